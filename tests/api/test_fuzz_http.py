"""Any HTTP request to any route of the web port (the OpenAI-compatible /v1 and Anthropic's
/v1/messages included) gets the documented answer: a status the route's documentation
lists (never a 5xx of the server's own: 502, 503 and 504 say a provider, a dependency or
a deadline), the route's error shape (/v1: OpenAI's ``{"error": {...}}``, /v1/messages:
Anthropic's ``{"type": "error", "error": {...}}``; calls: gRPC-Web trailers or a Connect
error, never ``unknown`` or ``internal``; /healthz: 405 with ``Allow``), no more than a
short cut piece of any value sent, and nothing stored changed by a refused request. The
server stays up and logs no error. Requests carry hostile headers, bodies nested far
too deep, oversized strings, values of the wrong type and ids that are bad, unknown or
another user's. The routes are read from the gateway as the server builds it, so a
route added later fails ``test_every_route_has_a_fuzz_case`` until it has one; each
RPC's gRPC-Web and Connect requests are fuzzed in test_fuzz.py."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from contextd.config import Settings
from contextd.fronts.limits import RequestLimits
from contextd.fronts.web.cors import CorsPolicy
from contextd.fronts.web.gateway import WebGateway
from contextd.root.listeners import web_mounts
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb
from contextd.v1 import sessions_pb2_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import stored_state
from tests.support.auth import every_rpc
from tests.support.fuzz import JSON_VALUES, json_like
from tests.support.fuzz_http import (
    BODIES,
    LONG,
    Answer,
    assert_no_long_echo,
    deep_object,
    in_place,
    nested,
    send,
    sent_strings,
)
from tests.support.grpc_web import parse_body, web_address
from tests.support.server import ServerProcess, start_server

ORIGIN = "https://app.example"
USER, OTHER = "fuzz-http", "fuzz-http-other"
EXAMPLES = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
# Session ids a request may name: the user's own, another user's, unknown, bad ones.
# ``$own`` and ``$other`` stand for the stored sessions.
SESSION_IDS = st.sampled_from(
    ["$own", "$other", "new", "0" * 32, "会话", "s" * 5000, "", "../x", "١" * 32, "A" * 22]
)
# What a client may send in a request, whatever the route: the headers the routes read.
HEADERS = st.fixed_dictionaries(
    {},
    optional={
        "Authorization": st.sampled_from(["Bearer x", "Basic y", "", "Bearer " + "k" * 3000]),
        "X-Api-Key": st.sampled_from(["x", "", "k" * 3000, "\u202ek"]),
        "Anthropic-Version": st.sampled_from(["2023-06-01", "2023-06-01", "", "v" * 300]),
        "Origin": st.sampled_from([ORIGIN, "https://evil.example", "null", "x" * 2000]),
        "X-Contextd-Session": SESSION_IDS,
        "X-Contextd-User": st.sampled_from([USER, "", "\u202eu", "u" * 300]),
        "Content-Type": st.sampled_from(
            [
                "application/json",
                "application/grpc-web+proto",
                "application/connect+json",
                "application/proto",
                "text/plain",
                "x/y",
                "application/json; charset=" + "c" * 500,
            ]
        ),
        "Connect-Protocol-Version": st.sampled_from(["1", "2", "z" * 300]),
        "Connect-Timeout-Ms": st.sampled_from(["0", "-1", "99999999999999999999", "abc"]),
        "Grpc-Timeout": st.sampled_from(["0n", "1S", "99999999H", "zz", "1" * 100 + "m"]),
        "Traceparent": st.sampled_from(["00-" + "f" * 32 + "-" + "f" * 16 + "-01", "t" * 400]),
        "Access-Control-Request-Method": st.sampled_from(["POST", "GET", "DELETE", "X"]),
        "Access-Control-Request-Headers": st.sampled_from(["authorization", "x-evil", ""]),
        "X-Evil-Bin": st.sampled_from(["%%%", "AAAA", "b" * 4000]),
    },
)
PATHS = st.sampled_from(
    ["/", "/v1", "/x", "/v1/models/" + "m" * 3000, "/%ff%fe", "/" + "p" * 4000, "/a/b/c"]
) | st.text(alphabet="/abcv1._-%", max_size=30).map(lambda p: "/" + p)
NOT_V1 = PATHS.filter(lambda p: not p.startswith("/v1/"))
METHOD_PATHS = st.sampled_from(sorted("/" + rpc.path for rpc in every_rpc()))
METHODS = st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "TRACE"])

VALID_COMPLETION: dict[str, Any] = {
    "model": "echo",
    "messages": [{"role": "user", "content": "Which train?"}],
    "user": USER,
}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
# Valid completions but for one value: nested far too deep, very long, or an id.
HOSTILE_COMPLETIONS = st.sampled_from(
    [
        in_place(VALID_COMPLETION, "messages", nested(10_000, "{}")),
        in_place(VALID_COMPLETION, "tools", "[" + deep_object(20_000) + "]"),
        in_place(VALID_COMPLETION, "metadata", deep_object(200)),
        json.dumps({**VALID_COMPLETION, "tools": [TOOL] * 3, "tool_choice": LONG}).encode(),
        json.dumps({**VALID_COMPLETION, "model": LONG}).encode(),
        json.dumps({**VALID_COMPLETION, "user": LONG}).encode(),
        json.dumps({**VALID_COMPLETION, LONG: 1}).encode(),
        json.dumps(
            {
                **VALID_COMPLETION,
                "messages": [
                    {"role": "user", "content": "Weather?"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": LONG,
                                "type": "function",
                                "function": {"name": "f", "arguments": nested(100)},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": LONG, "content": "sunny"},
                ],
            }
        ).encode(),
        json.dumps({**VALID_COMPLETION, "messages": [{"role": LONG, "content": "x"}]}).encode(),
        json.dumps({**VALID_COMPLETION, "metadata": {"contextd_session": "s" * 5000}}).encode(),
        json.dumps({**VALID_COMPLETION, "metadata": {"contextd_session": "$other"}}).encode(),
        json.dumps({**VALID_COMPLETION, "metadata": {"contextd_session": "$own"}}).encode(),
        json.dumps({**VALID_COMPLETION, "max_tokens": 2**70, "temperature": "hot"}).encode(),
    ]
)
COMPLETIONS = (
    (json_like(VALID_COMPLETION) | JSON_VALUES).map(lambda v: json.dumps(v).encode())
    | HOSTILE_COMPLETIONS
    | BODIES
)
VALID_RESPONSE: dict[str, Any] = {
    "model": "echo",
    "input": [{"role": "user", "content": "Which train?"}],
    "instructions": "Be brief.",
    "user": USER,
}
FUNCTION = {"type": "function", "name": "f", "parameters": {"type": "object"}}


def _response_id(*fields: object) -> str:
    return "resp_" + base64.urlsafe_b64encode(json.dumps(list(fields)).encode()).decode()


RESPONSE_IDS = st.sampled_from(
    [
        "resp_x",
        "resp_" + "A" * 3000,
        _response_id(USER, "0" * 32, 1, ""),
        _response_id(OTHER, "s" * 500, 2**70, "c" * 1000),
        _response_id(USER, "../x", -1, "c"),
        _response_id(["x"], {}, "1", None),
        "resp_" + base64.urlsafe_b64encode(b'["\\ud800","a",1,""]').decode(),
        "%ff",
        "..",
    ]
)
HOSTILE_RESPONSES = st.sampled_from(
    [
        in_place(VALID_RESPONSE, "input", nested(10_000, "{}")),
        in_place(VALID_RESPONSE, "tools", "[" + deep_object(20_000) + "]"),
        json.dumps({**VALID_RESPONSE, "tools": [FUNCTION] * 3, "tool_choice": LONG}).encode(),
        json.dumps({**VALID_RESPONSE, "instructions": LONG, "model": LONG}).encode(),
        json.dumps({**VALID_RESPONSE, "previous_response_id": LONG}).encode(),
        json.dumps({**VALID_RESPONSE, "conversation": "$other"}).encode(),
        json.dumps({**VALID_RESPONSE, "conversation": {"id": "$own"}}).encode(),
        json.dumps(
            {**VALID_RESPONSE, "text": {"format": {"type": "json_schema", "name": LONG}}}
        ).encode(),
        json.dumps(
            {
                **VALID_RESPONSE,
                "input": [
                    {"role": "user", "content": "Weather?"},
                    {
                        "type": "function_call",
                        "call_id": LONG,
                        "name": "f",
                        "arguments": nested(100),
                    },
                    {"type": "function_call_output", "call_id": LONG, "output": "sunny"},
                ],
            }
        ).encode(),
        json.dumps({**VALID_RESPONSE, "input": [{"type": LONG}]}).encode(),
    ]
)
RESPONSES = (
    (json_like(VALID_RESPONSE) | JSON_VALUES).map(lambda v: json.dumps(v).encode())
    | HOSTILE_RESPONSES
    | BODIES
)
VALID_MESSAGES: dict[str, Any] = {
    "model": "echo",
    "max_tokens": 50,
    "messages": [{"role": "user", "content": "Which train?"}],
    "metadata": {"user_id": USER},
}
TOOL_USE = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}
EDIT = {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 1}}
# Valid Messages requests but for one value: nested far too deep, very long, or an id.
HOSTILE_MESSAGES = st.sampled_from(
    [
        in_place(VALID_MESSAGES, "messages", nested(10_000, "{}")),
        in_place(VALID_MESSAGES, "system", "[" + deep_object(20_000) + "]"),
        in_place(VALID_MESSAGES, "context_management", deep_object(200)),
        json.dumps({**VALID_MESSAGES, "model": LONG}).encode(),
        json.dumps({**VALID_MESSAGES, "metadata": {"user_id": LONG}}).encode(),
        json.dumps({**VALID_MESSAGES, "system": LONG, "stop_sequences": [LONG] * 3}).encode(),
        json.dumps({**VALID_MESSAGES, LONG: 1}).encode(),
        json.dumps({**VALID_MESSAGES, "tools": [{"name": LONG, "input_schema": {}}]}).encode(),
        json.dumps(
            {
                **VALID_MESSAGES,
                "messages": [
                    {"role": "user", "content": "Weather?"},
                    {"role": "assistant", "content": [{**TOOL_USE, "id": LONG}]},
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": LONG, "content": LONG},
                            {"type": "text", "text": "and?"},
                        ],
                    },
                ],
            }
        ).encode(),
        json.dumps(
            {
                **VALID_MESSAGES,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": LONG,
                                },
                            }
                        ],
                    }
                ],
            }
        ).encode(),
        json.dumps({**VALID_MESSAGES, "messages": [{"role": LONG, "content": "x"}]}).encode(),
        json.dumps({**VALID_MESSAGES, "metadata": {"contextd_session": "$other"}}).encode(),
        json.dumps({**VALID_MESSAGES, "metadata": {"contextd_session": "$own"}}).encode(),
        json.dumps(
            {
                **VALID_MESSAGES,
                "metadata": {"user_id": USER, "contextd_session": "$own"},
                "messages": [{"role": "user", "content": [{**TOOL_USE, "type": "tool_result"}]}],
            }
        ).encode(),
        json.dumps({**VALID_MESSAGES, "context_management": {"edits": [EDIT] * 2}}).encode(),
        json.dumps(
            {**VALID_MESSAGES, "context_management": {"edits": [{**EDIT, "exclude_tools": [LONG]}]}}
        ).encode(),
        json.dumps({**VALID_MESSAGES, "max_tokens": 2**70, "temperature": "hot"}).encode(),
        json.dumps({**VALID_MESSAGES, "stream": True}).encode(),
        json.dumps(
            {
                **VALID_MESSAGES,
                "context_management": {
                    "edits": [
                        {"type": "clear_thinking_20251015", "keep": {"type": LONG, "value": 2**70}},
                        {**EDIT, "trigger": {"type": "tool_uses", "value": 2**40}},
                    ]
                },
                "messages": [
                    {"role": "user", "content": "Think?"},
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "thinking", "thinking": LONG, "signature": LONG},
                            {"type": "redacted_thinking", "data": LONG},
                        ],
                    },
                    {"role": "system", "content": LONG, "clear_at": LONG},
                    {"role": "user", "content": "and?"},
                ],
            }
        ).encode(),
        json.dumps(
            {
                **VALID_MESSAGES,
                "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
                "messages": [
                    {"role": "user", "content": "Think?"},
                    {"role": "assistant", "content": [{"type": "thinking", "thinking": LONG}]},
                    {"role": "user", "content": "and?"},
                    {"role": "system", "content": [{"type": "text", "text": LONG}] * 3},
                ],
            }
        ).encode(),
    ]
)
MESSAGES = (
    (json_like(VALID_MESSAGES) | JSON_VALUES).map(lambda v: json.dumps(v).encode())
    | HOSTILE_MESSAGES
    | BODIES
)
VALID_COUNT = {"model": "echo", "messages": VALID_MESSAGES["messages"], "system": "Be brief."}
COUNTS = (
    (json_like(VALID_COUNT) | JSON_VALUES).map(lambda v: json.dumps(v).encode())
    | HOSTILE_MESSAGES
    | BODIES
)


async def gateway_routes() -> set[tuple[str, str]]:
    """(method, path) of every route the web port serves with --openai-api and
    --anthropic-api, read from a gateway built as the server builds it (never started)."""
    mounts = await web_mounts(Settings(openai_api=True, anthropic_api=True))

    async def serving() -> str:
        return "SERVING"

    gateway = WebGateway(
        "127.0.0.1:1",
        CorsPolicy(frozenset()),
        RequestLimits(max_message_bytes=1024),
        1.0,
        health=serving,
        mounts=mounts,
    )
    try:
        app = gateway._runner.app  # the routes, as aiohttp holds them
        routes = app.router.routes()
        return {(r.method, r.resource.canonical) for r in routes if r.resource is not None}
    finally:
        await gateway.channel.close(None)


# --- what each route may answer -----------------------------------------------------------

# docs/openai.md: the statuses /v1 answers, and the web port's own 403 for an origin.
OPENAI_STATUSES = {200, 400, 401, 403, 404, 408, 413, 415, 429, 502, 503}


def openai_answer(method: str, answer: Answer) -> None:
    assert answer.status in OPENAI_STATUSES, answer
    if answer.status < 400 or method == "HEAD":
        return
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]
    assert error["type"] in {
        "invalid_request_error",
        "permission_error",
        "rate_limit_error",
        "api_error",
        "server_error",
    }, error


# docs/anthropic.md: the statuses /v1/messages answers, and the web port's 403 for an origin.
ANTHROPIC_STATUSES = {200, 400, 401, 403, 404, 408, 413, 415, 429, 502, 503}


def anthropic_answer(method: str, answer: Answer) -> None:
    assert answer.status in ANTHROPIC_STATUSES, answer
    if answer.status < 400:
        return
    body = answer.json()
    assert set(body) <= {"type", "error", "request_id"} and body["type"] == "error", body
    error = body["error"]
    assert set(error) == {"type", "message"}, error
    assert isinstance(error["message"], str) and error["message"]
    assert error["type"] in {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "rate_limit_error",
        "api_error",
        "overloaded_error",
        "timeout_error",
    }, error


def healthz_answer(method: str, answer: Answer) -> None:
    if method in ("GET", "HEAD"):
        assert answer.status in (200, 503), answer
        if method == "GET":
            assert answer.json()["status"] in ("SERVING", "NOT_SERVING")
    else:
        assert answer.status == 405, answer
        assert answer.headers["Allow"] == "GET, HEAD"


INSPECT_FILES = {"/inspect/", "/inspect/app.js", "/inspect/app.css"}


def inspect_answer(method: str, answer: Answer) -> None:
    """The inspector's files: served with their CSP, or 404, or a redirect from
    /inspect; any other method 405 with ``Allow``."""
    if method not in ("GET", "HEAD"):
        assert answer.status == 405, answer
        assert answer.headers["Allow"] == "GET, HEAD"
        return
    assert answer.status in (200, 308, 404), answer
    if answer.status == 308:
        assert answer.headers["Location"] == "/inspect/"
    else:
        assert "default-src 'none'" in answer.headers["Content-Security-Policy"]


def preflight_answer(method: str, answer: Answer) -> None:
    assert answer.status in (204, 403), answer


BAD_CODES = {grpc.StatusCode.UNKNOWN.value[0], grpc.StatusCode.INTERNAL.value[0]}
# docs/web.md: a call's answer, or the gateway's refusal of what is not one.
CALL_STATUSES = {200, 400, 401, 403, 404, 408, 409, 412, 413, 415, 429, 501, 503, 504}


def call_answer(method: str, answer: Answer) -> None:
    assert answer.status in CALL_STATUSES, answer
    kind = answer.headers.get("Content-Type", "")
    if kind.startswith("application/grpc-web"):
        assert answer.status == 200, answer
        _, trailers = parse_body(answer.body, text=False)
        assert int(trailers["grpc-status"]) not in BAD_CODES, trailers
    elif kind.startswith("application/json") and answer.status != 200:
        error = answer.json()
        assert error["code"] not in ("unknown", "internal"), error
        assert isinstance(error["message"], str)


Check = Callable[[str, Answer], None]
Case = tuple[st.SearchStrategy[tuple[str, str, bytes]], Check]


def case(methods: Any, paths: Any, bodies: Any, check: Check) -> Case:
    as_strategy = [s if isinstance(s, st.SearchStrategy) else st.just(s) for s in (methods, paths)]
    return st.tuples(*as_strategy, bodies), check


# Every route's case: what its requests are made of and what its answers must be. A
# route added to the web port needs one: test_every_route_has_a_fuzz_case fails until.
# Routes whose answers may quote what was sent: a turn's (the echo provider reflects the
# question) and a call's (what was stored); their refusals may not.
ANSWERS_QUOTE = {
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/responses"),
    ("POST", "/v1/messages"),
    ("POST", "/{tail}"),
}
V1_TAILS = st.text(alphabet="/abcv1_-%", max_size=30).map(lambda p: "/v1/" + p)
CASES: dict[tuple[str, str], Case] = {
    ("POST", "/v1/chat/completions"): case(
        "POST", "/v1/chat/completions", COMPLETIONS, openai_answer
    ),
    ("POST", "/v1/responses"): case("POST", "/v1/responses", RESPONSES, openai_answer),
    **{
        (method, "/v1/responses/{id}"): case(
            method, RESPONSE_IDS.map(lambda i: "/v1/responses/" + i), BODIES, openai_answer
        )
        for method in ("GET", "HEAD", "DELETE")
    },
    ("POST", "/v1/messages"): case("POST", "/v1/messages", MESSAGES, anthropic_answer),
    ("POST", "/v1/messages/count_tokens"): case(
        "POST", "/v1/messages/count_tokens", COUNTS, anthropic_answer
    ),
    ("GET", "/v1/models"): case("GET", "/v1/models", BODIES, openai_answer),
    ("HEAD", "/v1/models"): case("HEAD", "/v1/models", st.just(b""), openai_answer),
    ("GET", "/v1/models/{model}"): case(
        "GET",
        st.sampled_from(["echo", "m" * 3000, "%00", "..", "%ff"]).map(lambda m: "/v1/models/" + m)
        | st.text(alphabet="abcm-_.%0123456789", max_size=40).map(lambda m: "/v1/models/" + m),
        BODIES,
        openai_answer,
    ),
    ("HEAD", "/v1/models/{model}"): case("HEAD", "/v1/models/echo", st.just(b""), openai_answer),
    **{
        (method, "/v1/{tail}"): case(method, V1_TAILS, BODIES, openai_answer)
        for method in ("HEAD", "GET", "POST", "PUT", "PATCH", "DELETE")
    },
    ("*", "/healthz"): case(METHODS, "/healthz", BODIES, healthz_answer),
    ("*", "/inspect"): case(METHODS, "/inspect", BODIES, inspect_answer),
    ("*", "/inspect/{name}"): case(
        METHODS,
        st.sampled_from(sorted(INSPECT_FILES))
        | st.text(alphabet="abcjs./%_-", max_size=40).map(lambda n: "/inspect/" + n),
        BODIES,
        inspect_answer,
    ),
    ("OPTIONS", "/{tail}"): case("OPTIONS", PATHS | METHOD_PATHS, BODIES, preflight_answer),
    # Paths under /v1/ are the route above's.
    ("POST", "/{tail}"): case("POST", NOT_V1 | METHOD_PATHS, BODIES, call_answer),
}


async def test_every_route_has_a_fuzz_case() -> None:
    assert await gateway_routes() == set(CASES)


# --- the server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_server(
        tmp_path_factory.mktemp("fuzz-http"),
        *("--web-port", "0", "--openai-api", "--anthropic-api", "--cors-origins", ORIGIN),
        *("--memory-enabled", "false"),
    )
    yield server
    assert server.stop() == 0
    assert [e for e in server.log_lines if e.get("level") == "ERROR"] == []


@pytest.fixture(scope="module")
def sessions(proc: ServerProcess) -> dict[str, str]:
    """A session of the fuzz user and one of another user, each with a question."""
    named: dict[str, str] = {}
    with grpc.insecure_channel(proc.address) as channel:
        stub = sessions_pb2_grpc.SessionServiceStub(channel)
        for key, user in (("$own", USER), ("$other", OTHER)):
            sid = stub.CreateSession(spb.CreateSessionRequest(user_id=user)).session.id
            stub.AppendMessages(
                spb.AppendMessagesRequest(
                    user_id=user,
                    session_id=sid,
                    messages=[pb.Message(role=pb.ROLE_USER, content="Which train?")],
                )
            )
            named[key] = sid
    return named


def _named(text: str, sessions: dict[str, str]) -> str:
    for key, sid in sessions.items():
        text = text.replace(key, sid)
    return text


@pytest.mark.parametrize("route", sorted(CASES), ids=lambda r: f"{r[0]} {r[1]}")
def test_any_request_to_any_route(
    proc: ServerProcess, sessions: dict[str, str], route: tuple[str, str]
) -> None:
    address = web_address(proc)
    requests, check_answer = CASES[route]

    @EXAMPLES
    @given(requests, HEADERS)
    def check(call: tuple[str, str, bytes], headers: dict[str, str]) -> None:
        method, path, body = call
        headers = {name: _named(value, sessions) for name, value in headers.items()}
        if b"$o" in body:
            body = _named(body.decode(), sessions).encode()

        def refused(answer: Answer) -> bool:
            assert answer.status < 500 or answer.status in (502, 503, 504), answer
            check_answer(method, answer)
            is_refused = answer.status >= 400 or _call_refused(answer)
            if is_refused or route not in ANSWERS_QUOTE:
                assert_no_long_echo(answer, sent_strings(path, body, headers))
            return is_refused

        stored_state.checked(
            proc.data_dir, lambda: send(address, method, path, body, headers), refused
        )

    check()
    health = send(address, "GET", "/healthz", b"", {})
    assert (health.status, health.json()) == (200, {"status": "SERVING"})


def _call_refused(answer: Answer) -> bool:
    """A gRPC-Web answer is 200 with the call's status in its trailers."""
    if not answer.headers.get("Content-Type", "").startswith("application/grpc-web"):
        return False
    _, trailers = parse_body(answer.body, text=False)
    return int(trailers["grpc-status"]) != 0
