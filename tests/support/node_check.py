"""A Node check script of tests/<folder> (its packages installed from its lock file by
``make test``): one line of JSON per check on standard output, read by name."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest


def run_node_check(project: Path, package: str, *args: str) -> dict[str, dict[str, Any]]:
    """``node project/check.mjs ARGS``'s checks; skipped without node, failed without
    ``package`` installed."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    assert (project / "node_modules" / package).exists(), (
        f"{project.relative_to(project.parents[1])}/node_modules is missing: run `make test` first"
    )
    done = subprocess.run(
        [node, str(project / "check.mjs"), *args],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return {line.pop("name"): line for line in lines}
