"""Fail when protos/ breaks the contract of the previous commit (buf breaking, FILE rules).

    python scripts/check_breaking.py                      # against HEAD~1
    CONTRACT_BASE=origin/main python scripts/check_breaking.py

Run from anywhere inside the git checkout; the working tree (uncommitted edits
included) is compared with the base commit through buf's git input. On a clean
clone of main that is "the last commit against the one before it"; for a merge
commit HEAD~1 is main before the merge.

- The base commit has no protos (the repository's first commit, or a commit before
  the contract existed): nothing to compare, exit 0 with a note.
- The base commit is not in the clone (a shallow clone, ``--depth 1``): exit 2 with
  how to fetch it. Skipping would pass every break unseen, so this fails instead.
- Not a git checkout (say, an unpacked tarball): exit 2.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

PROTO_DIR = "protos"
DEFAULT_BASE = "HEAD~1"


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)


def _buf() -> str:
    beside_python = Path(sys.executable).parent / "buf"
    return str(beside_python) if beside_python.exists() else shutil.which("buf") or "buf"


def _fail(message: str) -> int:
    print(f"check_breaking: {message}", file=sys.stderr)
    return 2


def main() -> int:
    base = os.environ.get("CONTRACT_BASE", DEFAULT_BASE)
    top = _git("rev-parse", "--show-toplevel", cwd=Path.cwd())
    if top.returncode != 0:
        return _fail("not inside a git checkout; buf breaking needs the previous commit")
    root = Path(top.stdout.strip())

    resolved = _git("rev-parse", "--verify", "--quiet", f"{base}^{{commit}}", cwd=root)
    if resolved.returncode != 0:
        if _git("rev-parse", "--is-shallow-repository", cwd=root).stdout.strip() == "true":
            return _fail(
                f"{base} is not in this shallow clone; run `git fetch --deepen=1` "
                "(or clone without --depth) so the contract can be compared"
            )
        if base == DEFAULT_BASE:
            print("check_breaking: first commit, no earlier contract to compare with")
            return 0
        return _fail(f"unknown base commit {base!r}")
    commit = resolved.stdout.strip()

    if _git("cat-file", "-e", f"{commit}:{PROTO_DIR}", cwd=root).returncode != 0:
        print(f"check_breaking: {base} has no {PROTO_DIR}/, nothing to compare")
        return 0

    result = subprocess.run(
        [_buf(), "breaking", "--against", f".git#ref={commit}"], cwd=root, check=False
    )
    if result.returncode == 0:
        print(f"check_breaking: {PROTO_DIR}/ is compatible with {base} ({commit[:12]})")
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
