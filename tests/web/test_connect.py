"""The Connect protocol on the web port (unary and server streaming, protobuf and JSON),
by hand over HTTP/1.1, against a real server."""

from __future__ import annotations

import base64
import json
import struct
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc
from contextd.v1 import sessions_pb2 as spb
from google.protobuf import json_format
from google.rpc import error_details_pb2

from tests.support.grpc_web import method_url, split_frames, web_address
from tests.support.server import ServerProcess, start_server

CTX = "contextd.v1.ContextService"
CHAT = "contextd.v1.ChatService/StreamChat"
ORIGIN = "http://localhost:3000"


@pytest.fixture(scope="module")
def server_with_web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(
        tmp_path_factory.mktemp("web-connect"), "--web-port", "0", "--cors-origins", ORIGIN
    )
    yield proc
    assert proc.stop() == 0
    assert not [e for e in proc.log_lines if e.get("level") == "ERROR"]


@pytest.fixture(scope="module")
def web(server_with_web: ServerProcess) -> str:
    return web_address(server_with_web)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def connect_headers(content_type: str, **extra: str) -> dict[str, str]:
    return {"Content-Type": content_type, "Connect-Protocol-Version": "1", **extra}


async def post(
    http: aiohttp.ClientSession,
    web: str,
    method: str,
    body: bytes,
    content_type: str,
    **headers: str,
) -> tuple[int, dict[str, str], bytes]:
    async with http.post(
        method_url(web, method), data=body, headers=connect_headers(content_type, **headers)
    ) as response:
        return response.status, dict(response.headers), await response.read()


def envelope(payload: bytes, flags: int = 0) -> bytes:
    return struct.pack(">BI", flags, len(payload)) + payload


def stream_parts(body: bytes) -> tuple[list[bytes], dict[str, Any]]:
    """Messages, and the end-stream JSON, which must come last."""
    frames = split_frames(body)
    assert frames and frames[-1][0] == 0x02, "no end-stream envelope at the end"
    assert all(flags == 0 for flags, _ in frames[:-1])
    return [payload for _, payload in frames[:-1]], json.loads(frames[-1][1])


def bad_request_fields(error: dict[str, Any]) -> list[str]:
    fields: list[str] = []
    for detail in error["details"]:
        if detail["type"] == "google.rpc.BadRequest":
            raw = detail["value"] + "=" * (-len(detail["value"]) % 4)
            bad = error_details_pb2.BadRequest.FromString(base64.b64decode(raw))
            fields += [v.field for v in bad.field_violations]
    return fields


async def test_unary_protobuf(http: aiohttp.ClientSession, web: str) -> None:
    request = pb.CountTokensRequest(texts=["hello world"], tokenizer="estimate")
    status, headers, body = await post(
        http, web, f"{CTX}/CountTokens", request.SerializeToString(), "application/proto"
    )
    assert status == 200 and headers["Content-Type"] == "application/proto"
    assert pb.CountTokensResponse.FromString(body).text_tokens == [3]


async def test_unary_json_answers_as_the_native_port_does(
    http: aiohttp.ClientSession, web: str, server_with_web: ServerProcess
) -> None:
    request = {
        "systemPrompts": ["S"],
        "history": [{"role": "ROLE_USER", "content": "AAAA"}],
        "userMessage": "E",
        "tokenBudget": 100,
        "tokenizer": "estimate",
        "outputFormat": "OUTPUT_FORMAT_ANTHROPIC",
        "someFutureField": 1,
    }
    status, headers, body = await post(
        http, web, f"{CTX}/BuildMessages", json.dumps(request).encode(), "application/json"
    )
    assert status == 200 and headers["Content-Type"] == "application/json"
    answer = json.loads(body)
    assert [m["content"] for m in answer["messages"]] == ["S", "AAAA", "E"]
    async with grpc.aio.insecure_channel(server_with_web.address) as channel:
        native = await context_pb2_grpc.ContextServiceStub(channel).BuildMessages(
            json_format.ParseDict(request, pb.BuildMessagesRequest(), ignore_unknown_fields=True)
        )
    assert answer == json_format.MessageToDict(native)


async def test_unary_errors_carry_code_and_details(http: aiohttp.ClientSession, web: str) -> None:
    bad = json.dumps({"systemPrompts": ["S"], "userMessage": "hi", "tokenBudget": -5}).encode()
    status, headers, body = await post(http, web, f"{CTX}/BuildMessages", bad, "application/json")
    assert status == 400 and headers["Content-Type"] == "application/json"
    error = json.loads(body)
    assert error["code"] == "invalid_argument" and "token_budget" in error["message"]
    assert bad_request_fields(error) == ["token_budget"]
    # The same details in JSON, for a page without protobuf.
    [bad] = [d for d in error["details"] if d["type"] == "google.rpc.BadRequest"]
    assert [v["field"] for v in bad["debug"]["fieldViolations"]] == ["token_budget"]
    assert all("debug" in detail for detail in error["details"])

    missing = spb.GetSessionRequest(user_id="u", session_id="none").SerializeToString()
    status, _, body = await post(
        http, web, "contextd.v1.SessionService/GetSession", missing, "application/proto"
    )
    assert status == 404 and json.loads(body) == {
        "code": "not_found",
        "message": "no session with id 'none'",
    }

    status, _, body = await post(http, web, f"{CTX}/CountTokens", b"{not json", "application/json")
    assert status == 400 and json.loads(body)["code"] == "invalid_argument"
    # Half of a surrogate pair is no text: refused as bad JSON, escaped or as its bytes.
    for half in (b"\\ud800", b"\xed\xa0\x80"):
        text = b'{"texts": ["a' + half + b'"]}'
        status, _, body = await post(http, web, f"{CTX}/CountTokens", text, "application/json")
        assert status == 400 and json.loads(body)["code"] == "invalid_argument"

    status, _, body = await post(http, web, f"{CTX}/Nothing", b"{}", "application/json")
    assert status == 501 and json.loads(body)["code"] == "unimplemented"


async def test_timeout_header(http: aiohttp.ClientSession, web: str) -> None:
    request = pb.CountTokensRequest(texts=["a"], tokenizer="estimate").SerializeToString()
    status, _, body = await post(
        http, web, f"{CTX}/CountTokens", request, "application/proto", **{"Connect-Timeout-Ms": "0"}
    )
    assert status == 504 and json.loads(body)["code"] == "deadline_exceeded"
    status, _, body = await post(
        http, web, f"{CTX}/CountTokens", request, "application/proto", **{"Connect-Timeout-Ms": "x"}
    )
    assert status == 400 and "connect-timeout-ms" in json.loads(body)["message"]
    status, _, _ = await post(
        http,
        web,
        f"{CTX}/CountTokens",
        request,
        "application/proto",
        **{"Connect-Timeout-Ms": "5000"},
    )
    assert status == 200


async def test_stream_chat_in_json(http: aiohttp.ClientSession, web: str) -> None:
    user = f"connect-{uuid.uuid4().hex[:8]}"
    request = {"session": {"userId": user}, "userMessage": "hello over connect"}
    status, headers, body = await post(
        http,
        web,
        CHAT,
        envelope(json.dumps(request).encode()),
        "application/connect+json",
        Origin=ORIGIN,
    )
    assert status == 200 and headers["Content-Type"] == "application/connect+json"
    assert headers["Access-Control-Allow-Origin"] == ORIGIN
    messages, end = stream_parts(body)
    assert end == {}
    events = [json.loads(m) for m in messages]
    names = [next(iter(e)) for e in events]
    assert names[0] == "turnStarted" and names[-2:] == ["usage", "turnCompleted"]
    assert set(names[1:-2]) == {"textDelta"}
    done = events[-1]["turnCompleted"]
    assert done["status"] == "TURN_STATUS_OK"
    assert "".join(e["textDelta"]["text"] for e in events[1:-2]) == done["finalText"]

    export = spb.ExportEventsRequest(
        user_id=user, session_id=events[0]["turnStarted"]["sessionId"]
    ).SerializeToString()
    status, _, body = await post(
        http,
        web,
        "contextd.v1.SessionService/ExportEvents",
        envelope(export),
        "application/connect+proto",
    )
    lines, end = stream_parts(body)
    assert status == 200 and end == {}
    types = [json.loads(spb.ExportEventsResponse.FromString(m).json)["type"] for m in lines]
    assert types == ["session_start", "turn_start", "assistant", "final", "turn_end"]


async def test_stream_errors_end_the_stream(http: aiohttp.ClientSession, web: str) -> None:
    bad = cpb.StreamChatRequest(user_message="no session").SerializeToString()
    status, _, body = await post(http, web, CHAT, envelope(bad), "application/connect+proto")
    assert status == 200
    messages, end = stream_parts(body)
    assert messages == [] and end["error"]["code"] == "invalid_argument"
    assert "session.user_id" in bad_request_fields(end["error"])
    [bad] = [d for d in end["error"]["details"] if d["type"] == "google.rpc.BadRequest"]
    assert "session.user_id" in [v["field"] for v in bad["debug"]["fieldViolations"]]


async def test_content_type_must_fit_the_method(http: aiohttp.ClientSession, web: str) -> None:
    status, headers, body = await post(http, web, CHAT, b"{}", "application/json", Origin=ORIGIN)
    assert status == 415 and headers["Content-Type"] == "application/json"
    assert headers["Access-Control-Allow-Origin"] == ORIGIN  # so that the page reads why
    error = json.loads(body)
    assert error["code"] == "unimplemented"
    assert error["message"] == (
        "contextd.v1.ChatService/StreamChat is a streaming method: call it with content type "
        "application/connect+json or application/connect+proto "
        "(application/json is for unary methods)"
    )
    accepted = {t.strip() for t in headers["Accept-Post"].split(",")}
    assert {"application/connect+json", "application/connect+proto"} <= accepted
    assert "application/grpc-web+proto" in accepted and "application/json" not in accepted

    status, headers, body = await post(
        http, web, "contextd.v1.SessionService/ExportEvents", b"", "application/proto"
    )
    assert status == 415 and "application/connect+proto or" in json.loads(body)["message"]

    status, headers, body = await post(
        http, web, f"{CTX}/CountTokens", envelope(b""), "application/connect+proto"
    )
    assert status == 415 and json.loads(body)["message"].startswith(
        "contextd.v1.ContextService/CountTokens is a unary method: call it with content type "
        "application/proto or application/json"
    )
    assert "application/connect+proto" not in headers["Accept-Post"]
    status, _, _ = await post(http, web, f"{CTX}/CountTokens", b"", "text/plain")
    assert status == 415


async def test_compressed_requests_are_refused(http: aiohttp.ClientSession, web: str) -> None:
    status, _, body = await post(
        http, web, f"{CTX}/CountTokens", b"", "application/proto", **{"Content-Encoding": "gzip"}
    )
    assert status == 501 and json.loads(body)["code"] == "unimplemented"


async def test_health_in_json(http: aiohttp.ClientSession, web: str) -> None:
    status, _, body = await post(
        http, web, "grpc.health.v1.Health/Check", b"{}", "application/json"
    )
    assert status == 200 and json.loads(body) == {"status": "SERVING"}
