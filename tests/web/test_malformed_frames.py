"""Request bodies that are not whole, plain frames, on both protocols of the web port:
gRPC-Web answers INVALID_ARGUMENT in its trailer frame, Connect streaming answers an
``invalid_argument`` end-stream error (HTTP 200, as every Connect stream does), each
saying what was wrong; nothing is forwarded, and the server keeps serving."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb

from tests.support.grpc_web import (
    call,
    frame,
    method_url,
    parse_body,
    request_headers,
    split_frames,
    web_address,
)
from tests.support.server import ServerProcess, start_server

COUNT_TOKENS = "contextd.v1.ContextService/CountTokens"
EXPORT_EVENTS = "contextd.v1.SessionService/ExportEvents"
COUNT = pb.CountTokensRequest(texts=["a b"], tokenizer="estimate").SerializeToString()
EXPORT = spb.ExportEventsRequest(user_id="u", session_id="s").SerializeToString()


# Nothing malformed is forwarded, so one small payload serves every method.
PAYLOAD = b"\x0a\x01x"
WHOLE = frame(PAYLOAD)
# (case, request body, what the error message must say)
SHARED_CASES = [
    ("truncated-header", b"\x00\x00\x00", "ends inside a frame header (3 of 5 bytes)"),
    ("flag-byte-only", b"\x00", "ends inside a frame header (1 of 5 bytes)"),
    ("length-beyond-body", b"\x00\x00\x00\x00\x09abc", "declares 9 bytes, 3 follow"),
    ("huge-length", b"\x00\xff\xff\xff\xff" + PAYLOAD, "declares 4294967295 bytes, 3 follow"),
    ("garbage-after-frame", WHOLE + b"\x00\x01", "ends inside a frame header (2 of 5 bytes)"),
    ("second-frame-cut", WHOLE + WHOLE[:-1], "frame 2 declares 3 bytes, 2 follow"),
    ("compressed", frame(PAYLOAD, flags=0x01), "frame 1 has flags 0x01: compressed"),
    ("compressed-second", WHOLE + frame(PAYLOAD, flags=0x01), "frame 2 has flags 0x01: compressed"),
    ("reserved-bit", frame(PAYLOAD, flags=0x40), "frame 1 has flags 0x40"),
]
# The flag each protocol ends its response body with, found in a request.
GRPC_WEB_CASES = [*SHARED_CASES, ("trailer-frame", frame(PAYLOAD, flags=0x80), "flags 0x80")]
CONNECT_CASES = [*SHARED_CASES, ("end-stream", frame(PAYLOAD, flags=0x02), "flags 0x02")]


def cases(table: list[tuple[str, bytes, str]]) -> Any:
    return pytest.mark.parametrize(
        ("body", "says"), [case[1:] for case in table], ids=[case[0] for case in table]
    )


@pytest.fixture(scope="module")
def proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_server(tmp_path_factory.mktemp("web-malformed"), "--web-port", "0")
    yield server
    assert server.stop() == 0
    assert not [e for e in server.log_lines if e.get("level") == "ERROR"]


@pytest.fixture(scope="module")
def web(proc: ServerProcess) -> str:
    return web_address(proc)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    # One connection, so "keeps serving" also means the connection stays usable.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
        yield session


async def grpc_web_post(
    http: aiohttp.ClientSession, web: str, body: bytes, *, text: bool = False
) -> tuple[grpc.StatusCode, str]:
    async with http.post(
        method_url(web, COUNT_TOKENS), data=body, headers=request_headers(text)
    ) as response:
        assert response.status == 200
        messages, trailers = parse_body(await response.read(), text)
    assert messages == []
    number = int(trailers["grpc-status"])
    code = next(c for c in grpc.StatusCode if c.value[0] == number)
    return code, trailers.get("grpc-message", "")


async def connect_stream_post(
    http: aiohttp.ClientSession, web: str, body: bytes, **headers: str
) -> dict[str, Any]:
    """The end-stream JSON of a Connect streaming call, which must be all it answers."""
    content_type = "application/connect+proto"
    async with http.post(
        method_url(web, EXPORT_EVENTS),
        data=body,
        headers={"Content-Type": content_type, "Connect-Protocol-Version": "1", **headers},
    ) as response:
        assert response.status == 200 and response.content_type == content_type
        [(flags, end)] = split_frames(await response.read())
    assert flags == 0x02
    answer: dict[str, Any] = json.loads(end)
    return answer


async def assert_grpc_web_serves(http: aiohttp.ClientSession, web: str) -> None:
    reply = await call(http, web, COUNT_TOKENS, COUNT)
    assert reply.one(pb.CountTokensResponse).text_tokens == [1]


async def assert_connect_serves(http: aiohttp.ClientSession, web: str) -> None:
    end = await connect_stream_post(http, web, frame(EXPORT))
    # A well-framed request reaches the service, which answers for the unknown session.
    assert end["error"]["code"] == "not_found"


@cases(GRPC_WEB_CASES)
async def test_grpc_web_malformed_frames(
    http: aiohttp.ClientSession, web: str, body: bytes, says: str
) -> None:
    code, message = await grpc_web_post(http, web, body)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert message.startswith("malformed gRPC-Web request: ") and says in message
    await assert_grpc_web_serves(http, web)


@cases(GRPC_WEB_CASES)
async def test_grpc_web_text_malformed_frames(
    http: aiohttp.ClientSession, web: str, body: bytes, says: str
) -> None:
    """The same frames inside valid base64: text mode decodes, then frames the same way."""
    code, message = await grpc_web_post(http, web, base64.b64encode(body), text=True)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and says in message
    await assert_grpc_web_serves(http, web)


@pytest.mark.parametrize("body", [b"not base64!", b"AAAA*AAA", b"abcde"])
async def test_grpc_web_text_that_is_not_base64(
    http: aiohttp.ClientSession, web: str, body: bytes
) -> None:
    code, message = await grpc_web_post(http, web, body, text=True)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "must be base64" in message
    await assert_grpc_web_serves(http, web)


@cases(CONNECT_CASES)
async def test_connect_malformed_envelopes(
    http: aiohttp.ClientSession, web: str, body: bytes, says: str
) -> None:
    end = await connect_stream_post(http, web, body)
    assert end["error"]["code"] == "invalid_argument"
    assert end["error"]["message"].startswith("malformed Connect request: ")
    assert says in end["error"]["message"]
    await assert_connect_serves(http, web)


async def test_connect_stream_compression_is_unimplemented(
    http: aiohttp.ClientSession, web: str
) -> None:
    """A declared encoding the server lacks is not malformed: the protocol answers
    ``unimplemented`` and names what is supported."""
    end = await connect_stream_post(
        http, web, frame(EXPORT, flags=0x01), **{"Connect-Content-Encoding": "gzip"}
    )
    assert end["error"] == {
        "code": "unimplemented",
        "message": "content encoding gzip is not supported; supported: identity",
    }
    await assert_connect_serves(http, web)


@pytest.mark.parametrize("text", [False, True])
async def test_grpc_web_without_a_message(
    http: aiohttp.ClientSession, web: str, text: bool
) -> None:
    """Zero frames is whole framing, but a unary method needs its one message (grpc
    would leave the call waiting for it)."""
    code, message = await grpc_web_post(http, web, b"", text=text)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert message == f"the request holds no message; /{COUNT_TOKENS} takes one"
    await assert_grpc_web_serves(http, web)


async def test_connect_stream_without_a_message(http: aiohttp.ClientSession, web: str) -> None:
    end = await connect_stream_post(http, web, b"")
    assert end["error"] == {
        "code": "invalid_argument",
        "message": f"the request holds no message; /{EXPORT_EVENTS} takes one",
    }
    await assert_connect_serves(http, web)


@pytest.mark.parametrize("text", [False, True])
async def test_extra_messages_are_refused(
    http: aiohttp.ClientSession, web: str, text: bool
) -> None:
    """Whole frames beyond the one a unary method takes are refused, not half-read (the
    native server would answer the first and drop the rest)."""
    second = pb.CountTokensRequest(texts=["a b c d"]).SerializeToString()
    body = frame(COUNT) + frame(second)
    code, message = await grpc_web_post(
        http, web, base64.b64encode(body) if text else body, text=text
    )
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert message == f"the request holds 2 messages; /{COUNT_TOKENS} takes one"
    await assert_grpc_web_serves(http, web)


async def test_connect_stream_with_two_messages(http: aiohttp.ClientSession, web: str) -> None:
    export = spb.ExportEventsRequest(user_id="u", session_id="1").SerializeToString()
    end = await connect_stream_post(http, web, frame(export) + frame(export))
    assert end["error"] == {
        "code": "invalid_argument",
        "message": f"the request holds 2 messages; /{EXPORT_EVENTS} takes one",
    }
    await assert_connect_serves(http, web)
