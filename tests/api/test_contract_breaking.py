"""scripts/check_breaking.py in throwaway git repositories holding a copy of the contract.

Each case commits real protos and runs the script as `make lint` does; buf does the
comparison, so a removed field must fail and an added one must pass.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

SCRIPT = ROOT / "scripts" / "check_breaking.py"
MEMORY_PROTO = Path("protos/contextd/v1/memory.proto")
SOURCE_FIELD = "  string source_message_id = 4;\n"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "contract test",
    "GIT_AUTHOR_EMAIL": "contract@test.invalid",
    "GIT_COMMITTER_NAME": "contract test",
    "GIT_COMMITTER_EMAIL": "contract@test.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
        check=True,
    )
    return result.stdout


def check(repo: Path, base: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **GIT_ENV}
    env.pop("CONTRACT_BASE", None)
    if base is not None:
        env["CONTRACT_BASE"] = base
    return subprocess.run(
        [sys.executable, str(SCRIPT)], cwd=repo, capture_output=True, text=True, env=env
    )


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)


def add_contract(repo: Path) -> None:
    shutil.copy(ROOT / "buf.yaml", repo / "buf.yaml")
    shutil.copytree(ROOT / "protos", repo / "protos")


def edit(repo: Path, old: str, new: str) -> None:
    path = repo / MEMORY_PROTO
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    commit_all(repo, "start")
    add_contract(repo)
    commit_all(repo, "contract")
    return repo


def test_the_commit_that_adds_the_protos_has_nothing_to_compare(repo: Path) -> None:
    result = check(repo)
    assert result.returncode == 0, result.stderr
    assert "has no protos/" in result.stdout


def test_the_first_commit_of_a_repository_passes(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    add_contract(tmp_path)
    commit_all(tmp_path, "contract")
    result = check(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "first commit" in result.stdout


def test_an_added_field_is_compatible(repo: Path) -> None:
    edit(repo, SOURCE_FIELD, SOURCE_FIELD + "  string note = 100;\n")
    commit_all(repo, "add a field")
    result = check(repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "compatible with HEAD~1" in result.stdout


def test_a_removed_field_breaks(repo: Path) -> None:
    edit(repo, SOURCE_FIELD, "")
    commit_all(repo, "remove a field")
    result = check(repo)
    assert result.returncode != 0
    assert 'field "4" with name "source_message_id"' in result.stdout
    assert "AddMemoryRequest" in result.stdout


def test_an_uncommitted_break_is_caught_too(repo: Path) -> None:
    commit_all(repo, "nothing")
    edit(repo, "  int32 limit = 3;\n", "  int64 limit = 3;\n")
    result = check(repo)
    assert result.returncode != 0
    assert "SearchMemoriesRequest" in result.stdout


def test_a_shallow_clone_fails_clearly(repo: Path, tmp_path: Path) -> None:
    commit_all(repo, "one more")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    result = check(shallow)
    assert result.returncode == 2
    assert "shallow clone" in result.stderr and "git fetch --deepen=1" in result.stderr


def test_an_unknown_base_fails(repo: Path) -> None:
    result = check(repo, base="no-such-branch")
    assert result.returncode == 2
    assert "unknown base commit 'no-such-branch'" in result.stderr


def test_outside_git_fails(tmp_path: Path) -> None:
    result = check(tmp_path)
    assert result.returncode == 2
    assert "not inside a git checkout" in result.stderr
