"""What a SQLite server has stored, as one value to compare before and after a call: every
row of every data table, and the event logs' files with their sizes."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from contextd.store.engine.sqlite import DB_FILENAME

T = TypeVar("T")


def stored_state(data_dir: Path) -> str:
    """A digest of the database's rows and the event logs' files (read while the server
    runs: SQLite's WAL gives a consistent snapshot)."""
    digest = hashlib.sha256()
    with sqlite3.connect(f"file:{data_dir / DB_FILENAME}?mode=ro", uri=True) as conn:
        tables = _data_tables(
            conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name")
        )
        for table in tables:
            rows = sorted(repr(row) for row in conn.execute(f'SELECT * FROM "{table}"'))
            digest.update(f"{table}:{len(rows)}\n".encode())
            for row in rows:
                digest.update(row.encode())
    history = data_dir / "history"
    for path in sorted(history.rglob("*")) if history.exists() else []:
        size = path.stat().st_size if path.is_file() else -1
        digest.update(f"{path.relative_to(history)}:{size}\n".encode())
    return digest.hexdigest()


# What a full-text index keeps in its own tables (derived from the rows indexed).
_FTS_SHADOWS = ("data", "idx", "docsize", "config", "content")


def _data_tables(tables: Iterable[tuple[str, str | None]]) -> list[str]:
    """The tables that hold data: not the row counters of AUTOINCREMENT (a refused call
    may use up a number) nor full-text indexes, whose pages differ after a row is added
    and removed again; the rows they index are compared."""
    listed = list(tables)
    virtual = [name for name, sql in listed if (sql or "").startswith("CREATE VIRTUAL")]
    return [
        name
        for name, sql in listed
        if name != "sqlite_sequence"
        and name not in virtual
        and not any(name in (f"{v}_{s}" for s in _FTS_SHADOWS) for v in virtual)
    ]


def settled_state(data_dir: Path, quiet_s: float = 0.2, timeout_s: float = 10.0) -> str:
    """The stored state once nothing changed it for ``quiet_s`` (work a call left running
    in the background, such as after a chat turn, has finished)."""
    deadline = time.monotonic() + timeout_s
    state = stored_state(data_dir)
    while True:
        time.sleep(quiet_s)
        again = stored_state(data_dir)
        if again == state or time.monotonic() > deadline:
            return again
        state = again


def checked(data_dir: Path, call: Callable[[], T], refused: Callable[[T], bool]) -> T:
    """Run ``call`` and return its outcome; when ``refused`` says the outcome refused the
    call, nothing stored may have changed. After a call that went through, wait for the
    work it left running (a turn's), so that the next call starts from a still store."""
    before = stored_state(data_dir)
    outcome = call()
    if refused(outcome):
        assert stored_state(data_dir) == before, f"refused ({outcome!r}) yet stored"
    else:
        settled_state(data_dir)
    return outcome
