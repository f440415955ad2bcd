"""The Node/TypeScript client's own tests (clients/node/test), run with `npm test`
against a real contextd with its web port; `make test` installs and builds the client
first."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.grpc_web import web_address
from tests.support.keyed_server import KeyedServer, keyed_server
from tests.support.paths import ROOT
from tests.support.server import ServerProcess, start_server

CLIENT = ROOT / "clients" / "node"


@pytest.fixture(scope="module")
def node_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    # The cancel and deadline tests stream the echo of a 40,000-word message, which
    # the default --max-prompt-tokens (8,000) refuses.
    proc = start_server(
        tmp_path_factory.mktemp("node-client"), "--web-port", "0", "--max-prompt-tokens", "200000"
    )
    yield proc
    assert proc.stop() == 0
    # A stream write cut off by a cancel is logged at INFO (contextd.root.logs.ClientGoneFilter).
    assert not [e for e in proc.log_lines if e.get("level") == "ERROR"]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyedServer]:
    """For the credential tests (test/auth.test.ts): a server with --auth api-key."""
    with keyed_server(tmp_path_factory.mktemp("node-keys"), "--web-port", "0") as server:
        yield server


def test_node_client_against_a_live_server(node_server: ServerProcess, keyed: KeyedServer) -> None:
    npm = shutil.which("npm")
    assert shutil.which("node") and npm, "node and npm must be installed (Node 20 or later)"
    assert (CLIENT / "dist" / "test").is_dir(), (
        "the Node client is not built: run `make test`, or `npm ci && npm run build` in "
        "clients/node"
    )
    [web] = [str(e["address"]) for e in node_server.logs("grpc-web listening")]
    env = {
        **os.environ,
        "CONTEXTD_ADDRESS": node_server.address,
        "CONTEXTD_WEB_ADDRESS": web,
        "CONTEXTD_AUTH_ADDRESS": keyed.address,
        "CONTEXTD_AUTH_WEB_ADDRESS": web_address(keyed.proc),
        "CONTEXTD_AUTH_KEY_ALICE": keyed.alice,
        "CONTEXTD_AUTH_KEY_BOB": keyed.bob,
    }
    result = subprocess.run(
        [npm, "test"],
        cwd=CLIENT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    passed = re.search(r"^ℹ pass (\d+)$", output, re.MULTILINE)
    assert passed and int(passed.group(1)) >= 30, output
    assert re.search(r"^ℹ fail 0$", output, re.MULTILINE), output
    assert re.search(r"^ℹ cancelled 0$", output, re.MULTILINE), output
    assert re.search(r"^ℹ skipped 0$", output, re.MULTILINE), output
    assert "no gRPC-Web port" not in output, output  # nothing skipped
