"""``--database-url`` at start: PostgreSQL's URL is used with its password masked in
the logs, another scheme and an unreachable database stop the start with a clear reason."""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path

import pytest

from tests.support.pg_databases import TEMPLATE
from tests.support.postgres import PostgresServer
from tests.support.server import start_server

SECRET = "hunter2-not-logged"


def test_another_scheme_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="only postgresql://") as refused:
        start_server(tmp_path, database_url=f"mysql://root:{SECRET}@db/contextd")
    assert SECRET not in str(refused.value)


def test_an_unreachable_database_stops_the_start(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql://contextd:{SECRET}@127.0.0.1:{port}/contextd"
    with pytest.raises(RuntimeError, match="cannot be reached") as refused:
        start_server(tmp_path, "--database-pool-timeout", "2", database_url=url)
    assert SECRET not in str(refused.value) and "contextd:***@" in str(refused.value)


def test_the_url_is_logged_without_its_password(tmp_path: Path, postgres: PostgresServer) -> None:
    name = f"logged_{uuid.uuid4().hex[:12]}"
    postgres.create_database(name, template=TEMPLATE)
    # The throwaway server trusts local connections: any password will do.
    url = f"postgresql://postgres:{SECRET}@127.0.0.1:{postgres.port}/{name}"
    proc = start_server(tmp_path, database_url=url)
    try:
        assert [line["url"] for line in proc.logs("database")] == [
            f"postgresql://postgres:***@127.0.0.1:{postgres.port}/{name}"
        ]
        assert not (tmp_path / "contextd.lock").exists()  # no directory lock for PostgreSQL
    finally:
        assert proc.stop() == 0
    assert SECRET not in json.dumps(proc.log_lines)
