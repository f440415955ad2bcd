"""The grpcurl walkthrough of docs/grpcurl.md, command by command, against a live server.

Each ```sh block of its "## Walkthrough" runs through bash exactly as written
(line continuations and heredocs included), with the walkthrough's address replaced by
the test server's, grpcurl from this environment on PATH, and the ids bound by
earlier outputs (`"$SESSION"` and the like) as shell variables. Its exit status and
output must be what the walkthrough shows after it (see tests/support/walkthrough.py).
It runs once against a server as `make run` starts it, and once with `--auth api-key`,
each command carrying the key of the user it names.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from contextd.v1 import chat_pb2, context_pb2, memory_pb2, prompts_pb2, sessions_pb2, users_pb2

from tests.support import grpcurl
from tests.support.auth import create_key
from tests.support.paths import ROOT
from tests.support.server import ServerProcess, start_server
from tests.support.walkthrough import (
    Mismatch,
    Step,
    expected_values,
    match_json,
    match_text,
    parse_stream,
    read,
)

WALKTHROUGH = ROOT / "docs" / "grpcurl.md"
HEADING = "## Walkthrough"
README_ADDRESS = "127.0.0.1:50151"
WALKTHROUGH_USER = "ada"
SERVICE = "the service key"
USER_ID = re.compile(r'"user_id": "(\w+)"')
GRPCURL_ERROR_BASE = 64  # grpcurl exits with 64 + the gRPC status code
STEPS = read(WALKTHROUGH, HEADING)


@dataclass(frozen=True)
class Walkthrough:
    server: ServerProcess
    keys: dict[str, str]  # user -> API key; empty when the server checks no credentials

    def command(self, step: Step) -> str:
        """The step as run: with a key, the bearer header of the user the request names
        (the first user id in it, else the walkthrough's own user) after ``-plaintext``;
        a service key's for DeleteUser."""
        if not self.keys:
            return step.command
        named = USER_ID.search(step.command)
        token = self.keys[named[1] if named else WALKTHROUGH_USER]
        if "/DeleteUser" in step.command:
            # The user's own key goes with the user: asking again takes a service key.
            token = self.keys[SERVICE]
        header = f"-H 'authorization: Bearer {token}'"
        return step.command.replace("grpcurl -plaintext ", f"grpcurl -plaintext {header} ", 1)


@pytest.fixture(scope="module", params=["none", "api-key"])
def walkthrough(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Walkthrough]:
    """A server of its own (the walkthrough's outputs assume an empty database), once as
    `make run` starts it and once with --auth api-key and a key for each user."""
    data_dir = tmp_path_factory.mktemp("walkthrough")
    keys: dict[str, str] = {}
    if request.param == "api-key":
        keys = {user: create_key(data_dir, user) for user in ("ada", "bob")}
        keys[SERVICE] = create_key(data_dir, "walkthrough-backend", "--service")
    server = start_server(data_dir, "--auth", request.param)
    yield Walkthrough(server, keys)
    server.stop()


def expected_status(step: Step) -> int:
    """0, or for an output that shows grpcurl's ERROR block, 64 + the code shown."""
    shown = re.search(r"^\s*Code: (\w+)$", step.output, re.MULTILINE)
    if step.output_kind != "text" or not step.output.startswith("ERROR:") or shown is None:
        return 0
    name = re.sub(r"(?<!^)(?=[A-Z])", "_", shown[1]).upper()
    code: int = grpc.StatusCode[name].value[0]
    return GRPCURL_ERROR_BASE + code


def run_step(step: Step, command: str, address: str, bound: dict[str, str]) -> None:
    where = f"docs/grpcurl.md line {step.line}"
    assert step.command.startswith("grpcurl -plaintext "), f"{where}: not a grpcurl command"
    assert README_ADDRESS in step.command, f"{where}: the command must name {README_ADDRESS}"
    grpcurl_dir = str(Path(grpcurl.binary()).parent)
    env = {**os.environ, **bound, "PATH": grpcurl_dir + os.pathsep + os.environ["PATH"]}
    result = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + command.replace(README_ADDRESS, address)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    status = expected_status(step)
    assert result.returncode == status, (
        f"{where}: exit status {result.returncode}, the doc implies {status}\n{result.stderr}"
    )
    try:
        if step.output_kind == "json":
            match_json(expected_values(step.output), parse_stream(result.stdout), bound)
        elif step.output_kind == "text":
            match_text(step.output, result.stderr if status else result.stdout)
    except Mismatch as error:
        raise AssertionError(f"{where}: {error}\n--- actual output ---\n{result.stdout}") from None


def test_every_command_runs_and_prints_what_the_readme_shows(walkthrough: Walkthrough) -> None:
    bound: dict[str, str] = {}
    for step in STEPS:
        run_step(step, walkthrough.command(step), walkthrough.server.address, bound)
    assert set(bound) >= {"SESSION", "ANSWER", "MEMORY"}


def test_the_walkthrough_calls_every_rpc() -> None:
    modules = (context_pb2, chat_pb2, sessions_pb2, memory_pb2, prompts_pb2, users_pb2)
    every_rpc = {
        f"{service.full_name}/{method.name}"
        for module in modules
        for service in module.DESCRIPTOR.services_by_name.values()
        for method in service.methods
    }
    called = {
        word for step in STEPS for word in step.command.split() if word.startswith("contextd.v1.")
    }
    assert every_rpc - called == set()
    commands = " ".join(step.command for step in STEPS)
    for extra in (" list", " describe contextd.v1.", "grpc.health.v1.Health/Check"):
        assert extra in commands


def test_every_command_shows_its_output() -> None:
    assert [step.line for step in STEPS if step.output_kind is None] == []


def test_the_bad_request_is_expected_to_fail() -> None:
    assert any(expected_status(step) == GRPCURL_ERROR_BASE + 3 for step in STEPS)


# The matcher itself: what it must reject, so that a walkthrough drift cannot pass.


def test_a_changed_value_fails() -> None:
    with pytest.raises(Mismatch, match=r"\$.report.total_tokens"):
        match_json({"report": {"total_tokens": 25}}, {"report": {"total_tokens": 26}}, {})


def test_a_field_not_shown_fails_unless_elided() -> None:
    with pytest.raises(Mismatch, match="not shown"):
        match_json({"a": 1}, {"a": 1, "b": 2}, {})
    match_json(*expected_values('{\n  "a": 1,\n  ...\n}'), {"a": 1, "b": 2}, {})


def test_a_missing_field_fails_even_when_elided() -> None:
    with pytest.raises(Mismatch, match="missing"):
        match_json(*expected_values('{"a": 1,\n...\n}'), {"b": 2}, {})


def test_variables_bind_once_and_must_repeat() -> None:
    bound: dict[str, str] = {}
    match_json(["$ID", "$ID"], ["x1", "x1"], bound)
    assert bound == {"ID": "x1"}
    with pytest.raises(Mismatch, match=r"\$ID is 'x1'"):
        match_json(["$ID", "$ID"], ["x1", "x2"], {})


def test_elided_stream_items_and_text() -> None:
    expected = expected_values('{"a": 1}\n...\n{"c": "tail ..."}')
    match_json(expected, [{"a": 1}, {"b": 2}, {"b": 3}, {"c": "tail end"}], {})
    with pytest.raises(Mismatch):
        match_json(expected, [{"a": 1}, {"c": "other"}], {})
    with pytest.raises(Mismatch, match="more items"):
        match_json([1], [1, 2], {})


def test_text_lines_must_appear_in_order() -> None:
    match_text("ERROR:\n  Code: NotFound", "ERROR:\n  Code: NotFound\n  Message: gone")
    with pytest.raises(Mismatch):
        match_text("  Code: NotFound\nERROR:", "ERROR:\n  Code: NotFound")
