"""The data directory is made private when opened: folders 0700, files 0600, links left
alone, one warning naming what changed, and a refusal naming the fix where a path cannot
be changed."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
from contextd.store.engine import private
from contextd.store.engine.private import NotPrivate, make_dir, make_private, prepare_data_dir


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def loose_umask() -> object:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_make_dir_is_private_under_a_loose_umask(tmp_path: Path, loose_umask: object) -> None:
    target = tmp_path / "a" / "b" / "data"
    make_dir(target)
    assert [mode(p) for p in (tmp_path / "a", tmp_path / "a" / "b", target)] == [0o700] * 3
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError):
        make_dir(tmp_path / "file")


def test_a_loose_tree_is_made_private_and_named(tmp_path: Path, loose_umask: object) -> None:
    data = tmp_path / "data"
    (data / "history" / "tenants" / "acme").mkdir(parents=True, mode=0o755)
    for folder in (data, data / "history", data / "history" / "tenants"):
        folder.chmod(0o755)
    files = [data / "contextd.sqlite3", data / "history" / "s.jsonl"]
    files.append(data / "history" / "tenants" / "acme" / "t.jsonl")
    for file in files:
        file.write_text("{}\n")
        file.chmod(0o644)
    (data / "already").write_text("x")
    (data / "already").chmod(0o600)
    outside = tmp_path / "outside"
    outside.write_text("not ours")
    outside.chmod(0o644)
    (data / "link").symlink_to(outside)

    changed = make_private(data)

    assert data in changed and data / "history" / "tenants" / "acme" in changed
    assert set(files) <= set(changed) and data / "already" not in changed
    for path in data.rglob("*"):
        if not path.is_symlink():
            assert mode(path) == (0o700 if path.is_dir() else 0o600), path
    assert mode(outside) == 0o644  # a link's target is not the data directory's
    assert make_private(data) == []


def test_a_private_folder_is_not_walked(tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_dir(data / "history")
    deep = data / "history" / "old.jsonl"
    deep.write_text("x")
    deep.chmod(0o644)  # unreachable by others behind a 0700 folder
    top = data / "contextd.sqlite3"
    top.write_text("x")
    top.chmod(0o644)
    assert make_private(data) == [top]


def test_one_warning_names_the_change(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    with caplog.at_level(logging.WARNING, logger="contextd.store"):
        prepare_data_dir(data)
        prepare_data_dir(data)
    [record] = caplog.records
    assert str(data) in record.getMessage()


def test_a_path_that_cannot_change_is_refused_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    make_dir(data)
    (data / "contextd.sqlite3").write_text("x")
    (data / "contextd.sqlite3").chmod(0o644)

    def refuse(path: object, mode: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(private.os, "chmod", refuse)
    with pytest.raises(NotPrivate) as refused:
        make_private(data)
    assert f"chmod 600 {data / 'contextd.sqlite3'}" in str(refused.value)
