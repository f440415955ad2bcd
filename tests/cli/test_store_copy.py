"""`contextd store copy`: a data directory filled through a real server, copied into
PostgreSQL, shows the same through a server on the copy (the event logs' export byte for
byte); a second copy copies nothing; copied back into a new data directory it shows the
same again. Ids stay, and the counters go on above them. A row the target holds with
other values stops the copy and leaves the target's tables as they were."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import asyncpg
import grpc
from contextd.store.engine.sqlite import DB_FILENAME
from contextd.store.open import open_store
from contextd.store_copy.tables import LEFT_OUT, TABLES
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb

from tests.support.auth import create_key, key_id, keys_command
from tests.support.server import start_server
from tests.support.store_copy import Client, Keys, copy_counts, shown_by, store_copy


def _fill(data_dir: Path) -> Keys:
    keys = Keys(
        alice=create_key(data_dir, "alice"),
        acme_bob=create_key(data_dir, "bob", "--tenant", "acme"),
    )
    proc = start_server(data_dir, "--auth", "api-key")
    try:
        with grpc.insecure_channel(proc.address) as channel:
            Client(channel, keys.alice).fill("walrus")
            Client(channel, keys.acme_bob).fill("narwhal")
    finally:
        assert proc.stop() == 0  # after-turn memories and summaries are written by then
    return keys


def _shown(data_dir: Path, keys: Keys, database_url: str = "") -> Shown:
    proc = start_server(data_dir, "--auth", "api-key", database_url=database_url)
    try:
        return shown_by(proc.address, keys)
    finally:
        assert proc.stop() == 0


Shown = dict[str, dict[str, object]]


def _same(shown: Shown, expected: Shown) -> None:
    """``shown`` (by a server on the other engine) is ``expected``. Memory searches find
    the same memories; the engines rank them alike except for ties of their text match
    (SQLite's bm25 favours the shorter text, PostgreSQL's ts_rank does not), so those are
    compared without their order."""

    def comparable(items: dict[str, object]) -> dict[str, object]:
        return {
            name: sorted(value) if name.startswith("search ") else value  # type: ignore[call-overload]
            for name, value in items.items()
        }

    differing = {
        (user, name)
        for user, items in expected.items()
        for name, value in comparable(items).items()
        if comparable(shown[user]).get(name) != value
    }
    assert differing == set()
    assert shown.keys() == expected.keys()


def _all_copied(stdout: str) -> dict[str, tuple[int, int, int]]:
    counts = copy_counts(stdout)
    assert set(counts) == {table.name for table in TABLES} | {"event log lines"}
    for name, (source, copied, target) in counts.items():
        assert source == copied == target, name
    return counts


def test_sqlite_to_postgresql_and_back(tmp_path: Path, postgres_url: str) -> None:
    source = tmp_path / "source"
    keys = _fill(source)
    before = _shown(source, keys)

    done = store_copy(str(source), postgres_url)
    assert done.returncode == 0, done.stderr
    counts = _all_copied(done.stdout)
    for name in ("sessions", "conversation", "memories", "skills", "api_keys"):
        assert counts[name][0] > 0, name
    assert counts["event log lines"][0] > 10

    again = store_copy(str(source), postgres_url)
    assert again.returncode == 0, again.stderr
    for name, (source_rows, copied, target) in copy_counts(again.stdout).items():
        assert (copied, target) == (0, source_rows), name

    on_postgres = tmp_path / "pg-server"
    _same(_shown(on_postgres, keys, postgres_url), before)

    # New rows on the copy get ids above every copied one.
    top = asyncio.run(_max_ids(postgres_url))
    proc = start_server(on_postgres, "--auth", "api-key", database_url=postgres_url)
    try:
        with grpc.insecure_channel(proc.address) as channel:
            alice = Client(channel, keys.alice)
            listed = alice.sessions.ListSessions(spb.ListSessionsRequest(), metadata=alice.auth)
            added = alice.sessions.AppendMessages(
                spb.AppendMessagesRequest(
                    session_id=listed.sessions[0].id,
                    messages=[pb.Message(role=pb.ROLE_USER, content="after the copy")],
                ),
                metadata=alice.auth,
            )
        assert added.messages[0].message.id  # opaque: the row's number is read below
        after = shown_by(proc.address, keys)
        assert asyncio.run(_max_ids(postgres_url))["conversation"] == top["conversation"] + 1
    finally:
        assert proc.stop() == 0

    back = tmp_path / "back"
    done = store_copy(postgres_url, str(back))
    assert done.returncode == 0, done.stderr
    _all_copied(done.stdout)
    shown_back = _shown(back, keys)
    _same(shown_back, after)
    # Back on SQLite, searches rank as they did before the copies.
    for user, items in before.items():
        for name in (name for name in items if name.startswith("search ")):
            assert shown_back[user][name] == items[name], (user, name)
    with sqlite3.connect(back / DB_FILENAME) as conn:
        counters = dict(conn.execute("SELECT name, seq FROM sqlite_sequence").fetchall())
    assert counters["conversation"] > top["conversation"]


async def _max_ids(url: str) -> dict[str, int]:
    conn = await asyncpg.connect(url)
    try:
        return {
            table.name: int(await conn.fetchval(f"SELECT COALESCE(MAX(id), 0) FROM {table.name}"))
            for table in TABLES
            if table.counter
        }
    finally:
        await conn.close()


def test_a_differing_row_stops_the_copy_and_other_data_stays(
    tmp_path: Path, postgres_url: str
) -> None:
    source = tmp_path / "source"
    first = create_key(source, "alice")
    theirs = create_key(tmp_path, "carol", "--database-url", postgres_url)
    assert store_copy(str(source), postgres_url).returncode == 0
    listed = keys_command(tmp_path, "list", "--database-url", postgres_url).stdout
    assert key_id(first) in listed and key_id(theirs) in listed

    # The copy's key is revoked on the target; the source has another key since.
    revoked = keys_command(tmp_path, "revoke", key_id(first), "--database-url", postgres_url)
    assert revoked.returncode == 0
    second = create_key(source, "dave")
    done = store_copy(str(source), postgres_url)
    assert done.returncode == 1
    assert f"api_keys row id={key_id(first)!r} differs" in done.stderr
    listed = keys_command(tmp_path, "list", "--database-url", postgres_url).stdout
    assert key_id(second) not in listed  # nothing was copied


def test_refusals(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    done = store_copy(str(empty), str(tmp_path / "target"))
    assert done.returncode == 2
    assert DB_FILENAME in done.stderr
    create_key(tmp_path / "source", "alice")
    same = store_copy(str(tmp_path / "source"), str(tmp_path / "source" / "."))
    assert same.returncode == 2
    serving = start_server(tmp_path / "source")
    try:
        busy = store_copy(str(tmp_path / "source"), str(tmp_path / "target"))
    finally:
        serving.stop()
    assert busy.returncode == 1
    assert "another contextd" in busy.stderr


def test_every_column_of_both_schemas_is_copied(tmp_path: Path, postgres_url: str) -> None:
    """A column a migration adds must be added to the copy too."""
    engine_own = {
        "sqlite": {"schema_migrations", "sqlite_sequence", "memories_fts_state", "cache_versions"},
        "postgresql": {
            "schema_migrations",
            "memories_fts_state",
            "event_lines",  # copied as event logs
            "event_log_ends",
            "cache_versions",
        },
    }
    copied = {table.name: set(table.columns) for table in TABLES}
    sqlite_columns = asyncio.run(_sqlite_columns(tmp_path))
    postgres_columns = asyncio.run(_postgres_columns(postgres_url))
    for engine, columns in (("sqlite", sqlite_columns), ("postgresql", postgres_columns)):
        tables = {
            name: names - LEFT_OUT.get(name, frozenset())
            for name, names in columns.items()
            if name not in engine_own[engine]
        }
        assert tables == copied, engine


async def _sqlite_columns(data_dir: Path) -> dict[str, set[str]]:
    store = await open_store("", data_dir)  # migrated as a server migrates it
    await store.close()
    with sqlite3.connect(data_dir / DB_FILENAME) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'memories_fts%'"
            )
        ]
        return {
            name: {row[1] for row in conn.execute(f"PRAGMA table_info({name})")} for name in names
        }


async def _postgres_columns(url: str) -> dict[str, set[str]]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = 'public'"
        )
    finally:
        await conn.close()
    columns: dict[str, set[str]] = {}
    for row in rows:
        columns.setdefault(row[0], set()).add(row[1])
    # Made by PostgreSQL itself: the memories' search terms and the sessions' order.
    columns["memories"].discard("search_terms")
    columns["sessions"].discard("rowid")
    return columns
