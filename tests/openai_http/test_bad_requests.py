"""Bad input to /v1: every refusal is a 4xx in OpenAI's error shape naming the parameter,
quotes at most a short piece of what was sent, and stores nothing."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.openai_http.conftest import MAX_MESSAGE, MODEL, Served

USER = "mallory"  # every refused request names this user: none may leave a session
OK: dict[str, Any] = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "hi"}],
    "user": USER,
}
LONG = "x" * 10_000


def post(served: Served, body: bytes | dict[str, Any], **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        f"{served.base_url}/chat/completions",
        content=content,
        headers={"Content-Type": "application/json", **headers},
        timeout=30,
    )


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The error object, checked to have exactly OpenAI's four keys."""
    body = response.json()
    assert set(body) == {"error"}
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert len(error["message"]) < 400, "an error quotes no unbounded input"
    return error


def tool(name: str, **function: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, **function}}


CASES: list[tuple[str, bytes | dict[str, Any], str | None, str | None]] = [
    ("not json", b"{not json", None, "invalid_json"),
    ("not an object", b"[1, 2]", None, "invalid_json"),
    # Read with an explicit nesting limit (64), not up to the interpreter's recursion limit.
    ("nested 65 deep", b'{"a":' * 64 + b"{}" + b"}" * 64, None, "invalid_json"),
    ("nested 100,000 deep", b"[" * 100_000 + b"]" * 100_000, None, "invalid_json"),
    # Half of a surrogate pair, escaped or as its bytes: no text, so no protobuf string.
    ("unpaired surrogate escape", b'{"model": "m", "user": "a\\ud800"}', None, "invalid_json"),
    (
        "unpaired surrogate in a key",
        b'{"model": "m", "messages": [{"role": "user", "content": "x", "\\udfff": 1}]}',
        None,
        "invalid_json",
    ),
    ("unpaired surrogate bytes", b'{"model": "m", "user": "a\xed\xa0\x80"}', None, "invalid_json"),
    ("unknown field", {**OK, "frobnicate": 1}, "frobnicate", "unknown_parameter"),
    (
        "long unknown field",
        {**OK, LONG: 1},
        "x" * 64 + f"…(+{len(LONG) - 64} chars)",
        "unknown_parameter",
    ),
    ("model missing", {k: v for k, v in OK.items() if k != "model"}, "model", "invalid_type"),
    ("messages a string", {**OK, "messages": "hi"}, "messages", "invalid_type"),
    ("no messages", {**OK, "messages": []}, "messages", "empty_array"),
    ("temperature a string", {**OK, "temperature": "hot"}, "temperature", "invalid_type"),
    ("temperature too high", {**OK, "temperature": 3}, "temperature", None),
    ("stream a string", {**OK, "stream": "yes"}, "stream", "invalid_type"),
    ("max_tokens zero", {**OK, "max_tokens": 0}, "max_tokens", None),
    ("max_tokens a bool", {**OK, "max_tokens": True}, "max_tokens", "invalid_type"),
    ("several choices", {**OK, "n": 2}, "n", "unsupported_parameter"),
    (
        "unknown output format",
        {**OK, "response_format": {"type": "yaml"}},
        "response_format.type",
        None,
    ),
    (
        "json schema without its schema",
        {**OK, "response_format": {"type": "json_schema", "json_schema": {"name": "a"}}},
        "response_format.json_schema.schema",
        None,
    ),
    (
        "json schema a list",
        {
            **OK,
            "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": []}},
        },
        "response_format.json_schema.schema",
        "invalid_type",
    ),
    (
        "json schema badly named",
        {
            **OK,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "a b", "schema": {"type": "object"}},
            },
        },
        "response_format.json_schema.name",
        None,
    ),
    ("a call required with no tools", {**OK, "tool_choice": "required"}, "tool_choice", None),
    ("unknown tool choice", {**OK, "tool_choice": "always"}, "tool_choice", None),
    (
        "forced tool not offered",
        {
            **OK,
            "tools": [tool("t")],
            "tool_choice": {"type": "function", "function": {"name": "u"}},
        },
        "tool_choice.function.name",
        None,
    ),
    (
        "parallel_tool_calls a string",
        {**OK, "parallel_tool_calls": "y"},
        "parallel_tool_calls",
        "invalid_type",
    ),
    ("custom tool", {**OK, "tools": [{"type": "custom", "custom": {}}]}, "tools[0].type", None),
    ("bad tool name", {**OK, "tools": [tool("bad name!")]}, "tools[0].function.name", None),
    (
        "reserved tool name",
        {**OK, "tools": [tool("memory_search")]},
        "tools[0].function.name",
        None,
    ),
    (
        "tool parameters a list",
        {**OK, "tools": [tool("t", parameters=[1])]},
        "tools[0].function.parameters",
        "invalid_type",
    ),
    (
        "unknown role",
        {**OK, "messages": [{"role": "wizard", "content": "hi"}]},
        "messages[0].role",
        None,
    ),
    (
        "long unknown role",
        {**OK, "messages": [{"role": LONG, "content": "hi"}]},
        "messages[0].role",
        None,
    ),
    (
        "content a number",
        {**OK, "messages": [{"role": "user", "content": 5}]},
        "messages[0].content",
        "invalid_type",
    ),
    (
        "unknown message key",
        {**OK, "messages": [{"role": "user", "content": "a", "x": 1}]},
        "messages[0].x",
        "unknown_parameter",
    ),
    (
        "ends with the assistant",
        {**OK, "messages": [{"role": "assistant", "content": "a"}]},
        "messages[0].role",
        None,
    ),
    (
        "image not base64",
        {
            **OK,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,%%%"}}
                    ],
                }
            ],
        },
        "messages[0].content[0].image_url.url",
        None,
    ),
    (
        "image not an image",
        {
            **OK,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image_url",
                            "image_url": {"url": "data:image/png;base64,aGVsbG8="},
                        }
                    ],
                }
            ],
        },
        "messages[0].content[0].image_url.url",
        None,
    ),
    ("metadata value a number", {**OK, "metadata": {"k": 1}}, "metadata.k", "invalid_type"),
    ("user with a space", {**OK, "user": "mal lory"}, "user", None),
    (
        "history tool call without id",
        {
            **OK,
            "messages": [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
                {"role": "user", "content": "hi"},
            ],
        },
        "messages[0].tool_calls[0].id",
        "invalid_type",
    ),
]


@pytest.mark.parametrize(
    ("body", "param", "code"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_bad_request_is_a_400_naming_its_parameter(
    served: Served, body: bytes | dict[str, Any], param: str | None, code: str | None
) -> None:
    response = post(served, body)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert (error["param"], error["code"]) == (param, code)
    assert served.sessions(USER) == []


def test_a_streaming_request_refused_before_the_turn_is_a_plain_error(served: Served) -> None:
    response = post(served, {**OK, "stream": True, "temperature": "hot"})
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/json")
    assert error_of(response)["param"] == "temperature"


def test_a_turn_over_max_message_bytes_is_413(served: Served) -> None:
    """A body the web port takes (it leaves room for framing) whose native request is
    over --max-message-bytes: refused as the native port refuses it."""
    text = "y" * (MAX_MESSAGE + 16 * 1024)
    response = post(served, {**OK, "messages": [{"role": "user", "content": text}]})
    assert response.status_code == 413, response.text
    assert error_of(response)["code"] == "request_too_large"
    assert served.sessions(USER) == []


def test_a_body_that_is_not_json_by_its_content_type_is_415(served: Served) -> None:
    response = post(served, OK, **{"Content-Type": "text/plain"})
    assert response.status_code == 415
    error_of(response)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_an_oversized_body_is_413(served: Served, chunked: bool) -> None:
    text = "y" * (MAX_MESSAGE + 128 * 1024)
    data = json.dumps({**OK, "messages": [{"role": "user", "content": text}]}).encode()
    content: Any = (
        iter([data[i : i + 65536] for i in range(0, len(data), 65536)]) if chunked else data
    )
    response = httpx.post(
        f"{served.base_url}/chat/completions",
        content=content,
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 413
    assert error_of(response)["code"] == "request_too_large"
    assert served.sessions(USER) == []


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/embeddings"), ("GET", "/chat/completions"), ("DELETE", "/models/" + "m" * 5000)],
)
def test_an_unknown_url_is_404_in_the_error_shape(served: Served, method: str, path: str) -> None:
    response = httpx.request(method, served.base_url + path, timeout=30)
    assert response.status_code == 404
    assert error_of(response)["message"].startswith(f"Invalid URL ({method} /v1/")


@pytest.mark.parametrize("session_id", ["424242", "0" * 32, "nope-z"])
def test_an_unknown_session_is_404(served: Served, session_id: str) -> None:
    response = post(served, {**OK, "metadata": {"contextd_session": session_id}})
    assert response.status_code == 404
    error = error_of(response)
    assert error["code"] == "not_found"
    assert served.sessions(USER) == []


@pytest.mark.parametrize("session_id", ["nope-" + "z" * 3000, "9" * 20 + "x" * 9000, "会话"])
def test_a_session_id_that_cannot_be_one_is_a_400(served: Served, session_id: str) -> None:
    response = post(served, {**OK, "metadata": {"contextd_session": session_id}})
    assert response.status_code == 400
    error = error_of(response)
    assert error["param"] == "metadata.contextd_session"
    assert len(response.text) < 1000  # quoting none of it
    assert served.sessions(USER) == []


def test_two_different_sessions_named_at_once_are_refused(served: Served) -> None:
    response = post(
        served, {**OK, "metadata": {"contextd_session": "1"}}, **{"X-Contextd-Session": "2"}
    )
    assert response.status_code == 400
    assert error_of(response)["param"] == "metadata.contextd_session"


def test_another_users_session_is_404_and_stays_as_it_was(served: Served) -> None:
    with openai.OpenAI(base_url=served.base_url, api_key="unused", max_retries=0) as c:
        made = c.chat.completions.with_raw_response.create(
            model=MODEL,
            messages=[{"role": "user", "content": "ann's secret"}],
            user="ann",
            extra_headers={"X-Contextd-Session": "new"},
        )
        session_id = made.headers["x-contextd-session-id"]
        with pytest.raises(openai.NotFoundError) as refused:
            c.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "let me in"}],
                user="bob",
                extra_headers={"X-Contextd-Session": session_id},
            )
    assert refused.value.status_code == 404
    stored = [m.message.content for m in served.messages("ann", session_id)]
    assert stored == ["ann's secret", "fake answer to: ann's secret"]
    assert served.sessions("bob") == []
