"""Under the usual umask (022), everything contextd keeps in a data directory is readable
by its own account only: after a server served turns, memories and a deletion, after
`contextd keys` and `contextd store copy`, every folder is 0700 and every file 0600. A
data directory from before is made private on start, with one warning."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.store.engine.sqlite import SqliteDatabase
from contextd.store.event_log.events import EventStore
from contextd.store.event_log.files import FileLog
from contextd.v1 import sessions_pb2 as spb

from tests.support.auth import create_key
from tests.support.server import start_server
from tests.support.store_copy import Client, store_copy


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def loose_paths(data_dir: Path) -> dict[str, str]:
    """Every path under ``data_dir`` (itself included) whose mode is not 0700 for a
    folder or 0600 for a file, with that mode."""
    found = {}
    for path in [data_dir, *data_dir.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode != (0o700 if path.is_dir() else 0o600):
            found[str(path.relative_to(data_dir))] = oct(mode)
    return found


def test_everything_written_is_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    token = create_key(data, "alice")
    proc = start_server(data, "--auth", "api-key")
    try:
        with grpc.insecure_channel(proc.address) as channel:
            client = Client(channel, token)
            client.fill("walrus")
            gone = client.turn("a session to delete")
            client.sessions.DeleteSession(
                spb.DeleteSessionRequest(session_id=gone), metadata=client.auth
            )
        history = data / "history"
        assert any(history.rglob("*.jsonl"))
        # SQLite's -wal and -shm files exist while the server runs.
        assert (data / "contextd.sqlite3-wal").exists()
        assert loose_paths(data) == {}
    finally:
        assert proc.stop() == 0
    assert loose_paths(data) == {}

    copied = store_copy(str(data), str(tmp_path / "copy"))
    assert copied.returncode == 0, copied.stderr
    assert any((tmp_path / "copy" / "history").rglob("*.jsonl"))
    assert loose_paths(tmp_path / "copy") == {}
    assert loose_paths(data) == {}


def test_the_store_sets_its_modes_without_the_command(tmp_path: Path) -> None:
    """The store's own modes, under 022 in this process (no command's umask)."""

    async def write() -> None:
        # Not the opener: it makes the data directory private first, which would hide
        # whether the engine and the event log make their files private themselves.
        db = await SqliteDatabase.open(tmp_path / "data" / "contextd.sqlite3")
        try:
            log = EventStore(FileLog(tmp_path / "data" / "history"))
            await log.append("1" * 32, "session_start")
            await log.append("2" * 32, "session_start", tenant_id="acme")
            assert loose_paths(tmp_path / "data") == {}
        finally:
            await db.close()

    asyncio.run(write())


def test_a_data_directory_from_before_is_made_private_on_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    token = create_key(data, "alice")
    proc = start_server(data, "--auth", "api-key")
    with grpc.insecure_channel(proc.address) as channel:
        Client(channel, token).turn("hello")
    assert proc.stop() == 0
    for path in [data, *data.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    assert len(loose_paths(data)) > 3

    proc = start_server(data, "--auth", "api-key")
    try:
        [warning] = [line for line in proc.logs() if "made it private" in str(line["msg"])]
        assert warning["level"] == "WARNING", warning
        assert f"{data}, " in str(warning["msg"])
        assert str(data / "contextd.sqlite3") in str(warning["msg"])
        assert loose_paths(data) == {}
        with grpc.insecure_channel(proc.address) as channel:
            Client(channel, token).turn("still serving")
    finally:
        assert proc.stop() == 0
