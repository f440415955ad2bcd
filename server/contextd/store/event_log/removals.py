"""Event logs of deleted sessions, removed only once the deletion committed.

Removing a log before the commit could leave a session whose log is gone, should the
process die in between. Removing it after the commit has the opposite gap: a crash
before the removal leaves a log that no row names any more, so nothing would ever
find it. So a transaction that deletes sessions first writes a note of their ids
(``note``, the last thing before its COMMIT); after the commit the logs go, then the
note (``finish``). A note a crash left behind is finished by the next ``sweep``: the
logs of the sessions it names that no longer exist are removed (a note whose
transaction rolled back names sessions that still exist, and their logs stay).

A note is written to a temporary name and renamed, so a note is whole or absent; like
the event log it is with the kernel before the commit, not synced to the disk.

Event logs kept in the database (PostgreSQL) go with their sessions' rows, in the
deleting transaction: no note is written, the logs are only counted.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from contextd.store.engine.database import Connection, Database
from contextd.store.engine.private import make_dir, write_private
from contextd.store.event_log.events import EventStore

_NOTE = ".json"
_PARTIAL = ".partial"


# (tenant id, session id): a session's event log is found by both.
Session = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Note:
    path: Path | None  # None: the logs went with the sessions' rows
    sessions: tuple[Session, ...]
    logs: int = 0  # how many went, when they went with the rows


class LogRemovals:
    def __init__(self, db: Database, events: EventStore, directory: Path) -> None:
        self._db = db
        self._events = events
        self._dir = directory
        make_dir(directory)

    async def note(self, conn: Connection, sessions: Sequence[Session]) -> Note | None:
        """Write the note of sessions being deleted; call it inside the deleting
        transaction, before their rows are deleted (None when there are none)."""
        if not sessions:
            return None
        going = await self._events.deleted_with_sessions(conn, [sid for _, sid in sessions])
        if going is not None:
            return Note(None, tuple(sessions), going)
        path = self._dir / f"{uuid.uuid4().hex}{_NOTE}"
        partial = path.with_suffix(_PARTIAL)
        write_private(partial, json.dumps([list(s) for s in sessions]).encode())
        os.replace(partial, path)
        return Note(path, tuple(sessions))

    async def finish(self, note: Note | None) -> int:
        """After the commit: remove the logs the note names, then the note; how many
        logs there were."""
        if note is None:
            return 0
        if note.path is None:
            return note.logs
        removed = 0
        for tenant_id, session_id in note.sessions:
            removed += await self._events.delete(session_id, tenant_id=tenant_id)
        _remove(note.path)
        return removed

    async def sweep(self) -> int:
        """Finish the notes a crash left behind; how many logs were removed."""
        removed = 0
        for path in _listing(self._dir):
            if path.suffix == _PARTIAL:  # its transaction never committed
                _remove(path)
            elif path.suffix == _NOTE:
                removed += await self._finish_left_over(path)
        return removed

    async def _finish_left_over(self, note: Path) -> int:
        listed = _read(note)
        existing = {
            row["id"]
            for row in await self._db.reader.execute_fetchall(
                "SELECT id FROM sessions WHERE id IN (SELECT value FROM json_each(?))",
                (json.dumps([session_id for _, session_id in listed]),),
            )
        }
        removed = 0
        for tenant_id, session_id in listed:
            if session_id not in existing:
                # Not a session or tenant id (the note was not ours): no file to remove.
                with contextlib.suppress(ValueError):
                    removed += await self._events.delete(session_id, tenant_id=tenant_id)
        _remove(note)
        return removed


# Sync helpers: each a system call or two, as the event log does them.
def _listing(directory: Path) -> list[Path]:
    return sorted(directory.iterdir())


def _read(note: Path) -> list[Session]:
    return [(str(tenant), str(sid)) for tenant, sid in json.loads(note.read_text("utf-8"))]


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
