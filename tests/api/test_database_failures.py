"""PostgreSQL failing under a running contextd: stopped, restarted (a fast shutdown and an
immediate one, which is a crash of the server), a pool with no free connection, a
statement over the statement timeout. No restart of contextd is ever needed, and no
acknowledged write is lost.

The module stops and starts PostgreSQL, so it has a throwaway server of its own. That
server runs with fsync=off: a crash of PostgreSQL (SIGQUIT) still loses nothing, since
what it wrote is with the kernel; only a crash of the machine would.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.root.wiring import SERVICE_NAMES
from contextd.v1 import sessions_pb2, sessions_pb2_grpc
from grpc_health.v1 import health_pb2

from tests.support.pg_databases import TEMPLATE, postgres_for_tests
from tests.support.pg_failures import (
    Writer,
    health,
    table_locked,
    wait_for_health,
    waiting_for_locks,
)
from tests.support.postgres import PostgresServer
from tests.support.server import ServerProcess, start_server

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICES = ("", *SERVICE_NAMES)
# Never to be seen in a log: the URL carries it (trust authentication ignores it).
PASSWORD = "Pw4failures"


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[PostgresServer]:
    with postgres_for_tests() as server:
        yield server


@pytest.fixture
def database_url(own_postgres: PostgresServer) -> str:
    url = own_postgres.create_database(f"failures_{uuid.uuid4().hex[:12]}", template=TEMPLATE)
    return url.replace("postgres@", f"postgres:{PASSWORD}@", 1)


@pytest.fixture
def running(
    tmp_path: Path, database_url: str, own_postgres: PostgresServer
) -> Iterator[ServerProcess]:
    proc = start_server(tmp_path, "--database-pool-timeout", "2", database_url=database_url)
    yield proc
    if not _accepts(own_postgres):  # a failed test may have left it stopped
        own_postgres.start()
    proc.stop()


def _accepts(server: PostgresServer) -> bool:
    probe = subprocess.run(
        [str(server.bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(server.port)],
        capture_output=True,
    )
    return probe.returncode == 0


def _create_session(channel: grpc.Channel, user: str) -> str:
    stub = sessions_pb2_grpc.SessionServiceStub(channel)
    request = sessions_pb2.CreateSessionRequest(user_id=user)
    return str(stub.CreateSession(request, timeout=15).session.id)


def _listed_sessions(channel: grpc.Channel, user: str) -> list[str]:
    stub = sessions_pb2_grpc.SessionServiceStub(channel)
    reply = stub.ListSessions(sessions_pb2.ListSessionsRequest(user_id=user), timeout=15)
    return [s.id for s in reply.sessions]


def _no_password_logged(proc: ServerProcess) -> None:
    assert not [line for line in proc.logs() if PASSWORD in str(line)]


def test_a_stopped_database_is_unavailable_and_comes_back_without_a_restart(
    running: ServerProcess, own_postgres: PostgresServer
) -> None:
    user = f"down-{uuid.uuid4().hex[:6]}"
    with grpc.insecure_channel(running.address) as channel:
        kept = _create_session(channel, user)
        wait_for_health(channel, SERVING, SERVICES)

        own_postgres.stop()
        with pytest.raises(grpc.RpcError) as raised:
            _create_session(channel, user)
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "the database cannot be reached" in (raised.value.details() or "")
        assert wait_for_health(channel, NOT_SERVING, SERVICES) < 3
        with pytest.raises(grpc.RpcError) as raised:  # a read too
            _listed_sessions(channel, user)
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE

        own_postgres.start()
        assert wait_for_health(channel, SERVING, SERVICES) < 3  # probed once a second
        added = _create_session(channel, user)
        assert set(_listed_sessions(channel, user)) == {kept, added}
    assert running.stop() == 0
    assert running.logs("the database cannot be reached: calls that need it fail")
    assert running.logs("the database answers again")
    _no_password_logged(running)


def test_a_database_out_of_reach_at_start_stops_the_server_with_the_reason(
    tmp_path: Path, database_url: str, own_postgres: PostgresServer
) -> None:
    own_postgres.stop()
    try:
        command = [sys.executable, "-m", "contextd", "serve", "--port", "0"]
        command += ["--data-dir", str(tmp_path), "--database-url", database_url]
        started = time.monotonic()
        ended = subprocess.run(command, capture_output=True, text=True, timeout=60)
    finally:
        own_postgres.start()
    assert ended.returncode == 1
    assert time.monotonic() - started < 30
    assert "the database cannot be reached" in ended.stderr
    assert "postgres:***@" in ended.stderr
    assert PASSWORD not in ended.stderr


@pytest.mark.parametrize("fast", [True, False], ids=["fast-shutdown", "crash"])
def test_a_restart_under_load_loses_no_acknowledged_write(
    running: ServerProcess, own_postgres: PostgresServer, fast: bool
) -> None:
    writers = [Writer(running.address, f"load-{i}-{uuid.uuid4().hex[:6]}") for i in range(4)]
    for writer in writers:
        writer.start()
    try:
        time.sleep(1.5)
        own_postgres.stop(fast=fast)
        time.sleep(1.0)
        own_postgres.start()
        restarted = time.monotonic()
        time.sleep(2.0)
    finally:
        for writer in writers:
            writer.stop()
    for writer in writers:
        # Only UNAVAILABLE, while the database was away, and writes acknowledged after.
        assert set(writer.failures) <= {"UNAVAILABLE"}, _errors_logged(running)
        assert [t for t in writer.acknowledged_at if t > restarted], writer.user
    assert sum(sum(w.failures.values()) for w in writers) > 0
    with grpc.insecure_channel(running.address) as channel:
        assert health(channel) == SERVING
        for writer in writers:
            assert writer.sessions and writer.memories
            assert writer.missing(channel) == []
    assert running.stop() == 0
    _no_password_logged(running)


def test_a_pool_without_a_free_connection_answers_within_the_pool_timeout(
    tmp_path: Path, database_url: str
) -> None:
    proc = start_server(
        tmp_path,
        "--database-pool-size",
        "1",
        "--database-pool-timeout",
        "1",
        "--database-statement-timeout",
        "3",
        database_url=database_url,
    )
    user = f"pool-{uuid.uuid4().hex[:6]}"
    try:
        with grpc.insecure_channel(proc.address) as channel:
            outcome: list[grpc.RpcError | str] = []

            def blocked_call() -> None:
                try:
                    outcome.append(_create_session(channel, user))
                except grpc.RpcError as error:
                    outcome.append(error)

            with table_locked(database_url, "sessions"):
                # The pool's one connection waits for the lock in this call...
                holder = threading.Thread(target=blocked_call)
                started = time.monotonic()
                holder.start()
                while not waiting_for_locks(database_url):
                    assert time.monotonic() - started < 5
                    time.sleep(0.05)
                # ...so this one gets no connection.
                asked = time.monotonic()
                with pytest.raises(grpc.RpcError) as raised:
                    _create_session(channel, user)
                waited = time.monotonic() - asked
                holder.join(10)
            assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "pool is exhausted" in (raised.value.details() or "")
            assert 0.9 < waited < 2.5
            # The statement holding the connection ran into the statement timeout.
            [timed_out] = outcome
            assert isinstance(timed_out, grpc.RpcError)
            assert timed_out.code() == grpc.StatusCode.UNAVAILABLE
            assert "--database-statement-timeout" in (timed_out.details() or "")
            assert 2.5 < time.monotonic() - started < 6
            # Rolled back, and the database never counted as out of reach.
            assert _listed_sessions(channel, user) == []
            assert health(channel) == SERVING
            assert _create_session(channel, user)
    finally:
        assert proc.stop() == 0
    assert not proc.logs("the database cannot be reached: calls that need it fail")


def _errors_logged(proc: ServerProcess) -> list[dict[str, object]]:
    return [line for line in proc.logs() if str(line.get("level", "")).lower() == "error"]
