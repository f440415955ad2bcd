"""PostgreSQL's failures as callers see them: an unreachable database, a dropped connection,
an exhausted pool and a statement past its timeout are DatabaseUnavailable (UNAVAILABLE),
a full disk StorageFull; and the settings its connections run with."""

from __future__ import annotations

import asyncio
import socket

import asyncpg
import grpc
import pytest
from contextd.core.errors import DatabaseUnavailable, StorageFull
from contextd.fronts.grpc.errors import status_for
from contextd.store.engine.postgresql import PostgresDatabase, _translated
from contextd.store.sessions import SessionRepo

# The engine itself is under test (its pool, timeouts and errors): these tests open
# PostgresDatabase directly, with the pool settings each needs, without store/open.py's parts.


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_an_unreachable_database_is_unavailable() -> None:
    url = f"postgresql://contextd@127.0.0.1:{closed_port()}/nowhere"
    with pytest.raises(DatabaseUnavailable, match="cannot be reached"):
        await PostgresDatabase.open(url, pool_timeout=2)


async def test_an_exhausted_pool_fails_instead_of_waiting(postgres_url: str) -> None:
    db = await PostgresDatabase.open(postgres_url, pool_size=1, pool_timeout=0.2)
    try:
        async with db.transaction():
            with pytest.raises(DatabaseUnavailable, match="pool is exhausted"):
                await SessionRepo(db).get("x")
        assert await SessionRepo(db).get("x") is None  # free again
    finally:
        await db.close()


async def test_a_statement_past_its_timeout_is_unavailable(postgres_url: str) -> None:
    db = await PostgresDatabase.open(postgres_url, statement_timeout=0.1)
    try:
        with pytest.raises(DatabaseUnavailable, match="cancel"):
            await db.reader.execute_fetchall("SELECT pg_sleep(2)")
    finally:
        await db.close()


async def test_connections_run_without_jit(postgres_url: str) -> None:
    # A compiled plan cost a memory search 30-40 ms; every statement here is short.
    db = await PostgresDatabase.open(postgres_url, pool_size=1)
    try:
        assert (await db.reader.execute_fetchall("SHOW jit"))[0][0] == "off"
    finally:
        await db.close()


async def test_a_dropped_connection_is_unavailable_and_the_next_call_reconnects(
    postgres_url: str,
) -> None:
    db = await PostgresDatabase.open(postgres_url, pool_size=1)
    admin = await asyncpg.connect(postgres_url)
    try:
        with pytest.raises(DatabaseUnavailable):
            async with db.transaction() as conn:
                rows = await conn.execute_fetchall("SELECT pg_backend_pid()")
                await admin.execute("SELECT pg_terminate_backend($1)", rows[0][0])
                await conn.execute_fetchall("SELECT 1")
        # An idle connection the server dropped is replaced when the pool hands it out.
        rows = await db.reader.execute_fetchall("SELECT pg_backend_pid()")
        await admin.execute("SELECT pg_terminate_backend($1)", rows[0][0])
        await asyncio.sleep(0.1)
        assert (await db.reader.execute_fetchall("SELECT 1"))[0][0] == 1
    finally:
        await admin.close()
        await db.close()


def test_failures_map_to_their_status() -> None:
    disk_full = asyncpg.exceptions.DiskFullError("no space")
    assert isinstance(_translated(disk_full, connection_lost=False), StorageFull)
    assert isinstance(_translated(ConnectionRefusedError(), False), DatabaseUnavailable)
    assert _translated(asyncpg.exceptions.UniqueViolationError("dup"), False) is None
    assert status_for(DatabaseUnavailable("down")).code == grpc.StatusCode.UNAVAILABLE
