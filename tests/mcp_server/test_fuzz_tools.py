"""Any arguments to any MCP tool or to the prompt, and any URI of the messages resource,
get a result or an error a host can act on: never an error of the server's own
(INTERNAL, UNKNOWN, an exception's text), and a refused call changes nothing stored.
The tools are listed by the server, so a tool added later fails
``test_every_tool_has_a_fuzz_case`` until it has one. Raw HTTP to the MCP port (hostile
headers, bodies nested too deep, oversized values) never gets a 5xx nor a long echo of
what was sent, and neither does a request for the protected resource metadata."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import threading
from collections.abc import Awaitable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any, TypeVar

import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import sessions_pb2 as spb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from tests.mcp_server.conftest import connect, mcp_url
from tests.support import stored_state
from tests.support.fuzz import json_like
from tests.support.fuzz_http import (
    BODIES,
    Answer,
    assert_no_long_echo,
    deep_object,
    in_place,
    send,
    sent_strings,
)
from tests.support.keyed_server import KeyedServer
from tests.support.server import ServerProcess, start_server

T = TypeVar("T")
USER = "fuzz-mcp"
EXAMPLES = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# What a tool error may not say: the native codes of a server fault, or that a tool
# raised something unexpected (the SDK reports any exception as the tool's error).
SERVER_FAULTS = ("INTERNAL", "UNKNOWN", "Traceback", "Exception")


class Loop:
    """An event loop in a thread of its own, for the MCP client of a synchronous test."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, work: Awaitable[T]) -> T:
        async def wrapped() -> T:
            return await work

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(60)

    @contextmanager
    def holding(self, opening: AbstractAsyncContextManager[T]) -> Iterator[T]:
        """``opening`` entered and left by one task of the loop (as anyio requires)."""
        opened: concurrent.futures.Future[T] = concurrent.futures.Future()
        leave = threading.Event()

        async def hold() -> None:
            async with opening as value:
                opened.set_result(value)
                await asyncio.to_thread(leave.wait)

        held = asyncio.run_coroutine_threadsafe(hold(), self.loop)
        try:
            yield opened.result(60)
        finally:
            leave.set()
            held.result(60)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_server(
        tmp_path_factory.mktemp("fuzz-mcp"), "--mcp-port", "0", "--memory-enabled", "false"
    )
    yield server
    assert server.stop() == 0
    assert [e for e in server.log_lines if e.get("level") == "ERROR"] == []


@pytest.fixture(scope="module")
def client(proc: ServerProcess) -> Iterator[tuple[Loop, Client]]:
    loop = Loop()
    try:
        with loop.holding(connect(mcp_url(proc), **{"X-Contextd-User": USER})) as opened:
            yield loop, opened
    finally:
        loop.close()


@pytest.fixture
def stored(proc: ServerProcess) -> dict[str, str]:
    """A session of the fuzz user with a question and an answer, and a memory."""
    with grpc.insecure_channel(proc.address) as channel:
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        sid = sessions.CreateSession(spb.CreateSessionRequest(user_id=USER)).session.id
        sessions.AppendMessages(
            spb.AppendMessagesRequest(
                user_id=USER,
                session_id=sid,
                messages=[
                    pb.Message(role=pb.ROLE_USER, content="Which train?"),
                    pb.Message(role=pb.ROLE_ASSISTANT, content="The 8:15."),
                ],
            )
        )
        memory = memory_pb2_grpc.MemoryServiceStub(channel).AddMemory(
            mpb.AddMemoryRequest(user_id=USER, content="I take the train.")
        )
    return {"session_id": sid, "memory_id": memory.memory.id}


# Each tool's case: the arguments a valid call gives (``$session_id`` and ``$memory_id``
# stand for the fuzz user's stored ones); the fuzz keeps, changes or drops each.
CASES: dict[str, dict[str, Any]] = {
    "search_memories": {"query": "train", "limit": 5},
    "list_memories": {"page_size": 10, "page_token": ""},
    "add_memory": {"content": "I like window seats."},
    "update_memory": {"memory_id": "$memory_id", "content": "I take the bus.", "supersede": True},
    "delete_memory": {"memory_id": "$memory_id"},
    "create_session": {"title": "Trip"},
    "list_sessions": {"page_size": 10, "page_token": ""},
    "read_session": {"session_id": "$session_id"},
    "build_context": {"question": "Which train?", "session_id": "$session_id"},
}


def test_every_tool_has_a_fuzz_case(client: tuple[Loop, Client]) -> None:
    loop, mcp = client
    tools = loop.run(mcp.list_tools()).tools
    assert {tool.name for tool in tools} == set(CASES)


def _named(arguments: dict[str, Any], stored: dict[str, str]) -> dict[str, Any]:
    return {k: stored.get(v[1:], v) if isinstance(v, str) else v for k, v in arguments.items()}


def _refused_tool(result: Any) -> bool:
    text = " ".join(getattr(block, "text", "") for block in result.content)
    assert not any(fault in text for fault in SERVER_FAULTS), text
    return bool(result.is_error)


@pytest.mark.parametrize("tool", sorted(CASES))
def test_any_arguments_to_any_tool(
    proc: ServerProcess, client: tuple[Loop, Client], stored: dict[str, str], tool: str
) -> None:
    loop, mcp = client
    valid = _named(CASES[tool], stored)

    @EXAMPLES
    @given(json_like(valid))
    def check(arguments: dict[str, Any]) -> None:
        stored_state.checked(
            proc.data_dir, lambda: loop.run(mcp.call_tool(tool, arguments)), _refused_tool
        )

    check()


def test_any_arguments_to_the_prompt(
    proc: ServerProcess, client: tuple[Loop, Client], stored: dict[str, str]
) -> None:
    loop, mcp = client
    assert [p.name for p in loop.run(mcp.list_prompts()).prompts] == ["what_do_you_remember"]

    @EXAMPLES
    @given(json_like({"topic": "train"}))
    def check(arguments: dict[str, Any]) -> None:
        def get() -> str:
            try:
                loop.run(mcp.get_prompt("what_do_you_remember", arguments))
            except Exception as error:  # the SDK raises the server's refusal
                text = str(error)
                assert not any(fault in text for fault in SERVER_FAULTS), text
                return "refused"
            return "got"

        stored_state.checked(proc.data_dir, get, lambda outcome: outcome == "refused")

    check()


def test_any_uri_of_the_messages_resource(
    proc: ServerProcess, client: tuple[Loop, Client], stored: dict[str, str]
) -> None:
    loop, mcp = client
    ids = st.sampled_from([stored["session_id"], "0" * 32, "", "s" * 5000, "%2e%2e", "会话"])

    @EXAMPLES
    @given(ids | st.text(max_size=40))
    def check(session_id: str) -> None:
        def read() -> str:
            try:
                loop.run(mcp.read_resource(f"contextd://sessions/{session_id}/messages"))
            except Exception as error:  # the SDK raises the server's refusal
                text = str(error)
                assert not any(fault in text for fault in SERVER_FAULTS), text
                return "refused"
            return "read"

        stored_state.checked(proc.data_dir, read, lambda outcome: outcome == "refused")

    check()


# --- raw HTTP on the MCP port -------------------------------------------------------------

CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "read_session", "arguments": {"session_id": "s" * 5000}},
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "fuzz", "version": "1"},
    },
}
MCP_BODIES = (
    BODIES
    | st.one_of(json_like(CALL), json_like(INITIALIZE)).map(lambda v: json.dumps(v).encode())
    | st.just(in_place(INITIALIZE, "params", deep_object(50_000)))
    | st.just(json.dumps([CALL] * 50).encode())
)
MCP_HEADERS = st.fixed_dictionaries(
    {},
    optional={
        "Accept": st.sampled_from(
            ["application/json, text/event-stream", "text/event-stream", "*/*", "x" * 3000]
        ),
        "Content-Type": st.sampled_from(["application/json", "text/plain", "c" * 3000]),
        "Mcp-Session-Id": st.sampled_from(["", "0" * 32, "m" * 5000, "会话", "\x7f"]),
        "Mcp-Protocol-Version": st.sampled_from(["2025-06-18", "1999-01-01", "v" * 400]),
        "Authorization": st.sampled_from(["Bearer x", "Bearer " + "k" * 3000, "Basic y"]),
        "X-Contextd-User": st.sampled_from([USER, "", "u" * 300, "\u202eu"]),
        "Origin": st.sampled_from(["https://evil.example", "o" * 2000]),
    },
)
# Any Host the metadata document may be asked at (the MCP port's own check of Host, for
# DNS rebinding, is the SDK's).
HOSTS = st.sampled_from(["evil.example", "h" * 3000, "[::1", "a b", "\u202eh:1", "x:99999"])
METADATA = ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]


def test_any_http_request_to_the_mcp_port(proc: ServerProcess, client: tuple[Loop, Client]) -> None:
    """Hostile HTTP to the MCP port: never a 5xx, no long echo of what was sent, nothing
    stored changed by a refused request, and the port serves its client afterwards."""
    address = mcp_url(proc).removeprefix("http://").removesuffix("/mcp")

    @settings(EXAMPLES, max_examples=40)
    @given(
        st.sampled_from(["POST", "GET", "DELETE", "PUT", "OPTIONS", "HEAD"]),
        st.sampled_from(["/mcp", "/mcp/", "/", "/mcp/" + "p" * 3000, "/%ff", *METADATA]),
        MCP_BODIES,
        MCP_HEADERS,
    )
    def check(method: str, path: str, body: bytes, headers: dict[str, str]) -> None:
        def refused(answer: Answer) -> bool:
            assert answer.status < 500, answer
            assert_no_long_echo(answer, sent_strings(path, body, headers))
            return answer.status >= 400

        stored_state.checked(
            proc.data_dir, lambda: send(address, method, path, body, headers), refused
        )

    check()
    loop, mcp = client
    assert {tool.name for tool in loop.run(mcp.list_tools()).tools} == set(CASES)


def test_any_request_for_the_resource_metadata(keyed: KeyedServer) -> None:
    """The document a port with credentials serves to anyone: any method, Host and
    credential get it, a 405 or a 401, never a 5xx nor an echo."""
    address = mcp_url(keyed.proc).removeprefix("http://").removesuffix("/mcp")

    @settings(EXAMPLES, max_examples=25)
    @given(
        st.sampled_from(["GET", "HEAD", "POST", "OPTIONS"]), st.sampled_from(METADATA), MCP_HEADERS
    )
    def check(method: str, path: str, headers: dict[str, str]) -> None:
        answer = send(address, method, path, b"", headers)
        assert answer.status in (200, 405), answer
        assert_no_long_echo(answer, sent_strings(path, b"", headers))
        if method == "GET":
            assert answer.json()["contextd_credential"] == "api-key"

    check()
