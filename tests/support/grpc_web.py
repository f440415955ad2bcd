"""A gRPC-Web client written by hand over aiohttp, for tests: frames, trailers, status.

Independent of the server's own framing code, so the two check each other.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote

import aiohttp
import grpc
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

from tests.support.server import ServerProcess

BINARY = "application/grpc-web+proto"
TEXT = "application/grpc-web-text"

M = TypeVar("M", bound=Message)


def web_address(proc: ServerProcess) -> str:
    """host:port from the ``grpc-web listening`` log line (logged before ``listening``)."""
    [line] = proc.logs("grpc-web listening")
    return str(line["address"])


def frame(payload: bytes, flags: int = 0) -> bytes:
    return struct.pack(">BI", flags, len(payload)) + payload


def split_frames(body: bytes) -> list[tuple[int, bytes]]:
    frames = []
    while body:
        flags, length = struct.unpack(">BI", body[:5])
        assert len(body) >= 5 + length, "truncated frame"
        frames.append((flags, body[5 : 5 + length]))
        body = body[5 + length :]
    return frames


@dataclass
class Reply:
    http_status: int
    headers: dict[str, str]
    messages: list[bytes]
    trailers: dict[str, str]

    @property
    def code(self) -> grpc.StatusCode:
        number = int(self.trailers["grpc-status"])
        return next(code for code in grpc.StatusCode if code.value[0] == number)

    @property
    def message(self) -> str:
        return unquote(self.trailers.get("grpc-message", ""))

    def decode(self, kind: type[M]) -> list[M]:
        return [kind.FromString(m) for m in self.messages]

    def one(self, kind: type[M]) -> M:
        assert self.code == grpc.StatusCode.OK, (self.code, self.message)
        [message] = self.decode(kind)
        return message

    def status(self) -> status_pb2.Status:
        raw = self.trailers["grpc-status-details-bin"]
        return status_pb2.Status.FromString(base64.b64decode(raw + "=" * (-len(raw) % 4)))

    def violations(self) -> list[str]:
        fields: list[str] = []
        for detail in self.status().details:
            bad = error_details_pb2.BadRequest()
            if detail.Unpack(bad):
                fields += [v.field for v in bad.field_violations]
        return fields


def parse_body(body: bytes, text: bool) -> tuple[list[bytes], dict[str, str]]:
    """Messages and trailers; the trailer frame must come last and only once."""
    if text:
        body = base64.b64decode(body, validate=True)
    frames = split_frames(body)
    assert frames and frames[-1][0] == 0x80, "no trailer frame at the end"
    assert all(flags == 0 for flags, _ in frames[:-1]), [f for f, _ in frames]
    trailers: dict[str, str] = {}
    for line in frames[-1][1].decode("ascii").split("\r\n"):
        if line:
            name, value = line.split(":", 1)
            trailers[name.strip().lower()] = value.strip()
    return [payload for _, payload in frames[:-1]], trailers


def method_url(address: str, method: str) -> str:
    return f"http://{address}/{method}"


def request_headers(text: bool = False, **extra: str) -> dict[str, str]:
    return {
        "Content-Type": TEXT if text else BINARY,
        "X-Grpc-Web": "1",
        "X-User-Agent": "contextd-tests",
        **extra,
    }


async def call(
    http: aiohttp.ClientSession,
    address: str,
    method: str,
    request: Message | bytes,
    *,
    text: bool = False,
    headers: dict[str, str] | None = None,
) -> Reply:
    """One call, the whole response read; ``method`` is ``package.Service/Method``."""
    payload = request if isinstance(request, bytes) else request.SerializeToString()
    body = frame(payload)
    if text:
        body = base64.b64encode(body)
    async with http.post(
        method_url(address, method), data=body, headers=request_headers(text, **(headers or {}))
    ) as response:
        raw = await response.read()
        assert response.status == 200, (response.status, raw)
        messages, trailers = parse_body(raw, text)
        return Reply(response.status, dict(response.headers), messages, trailers)


async def unary(
    http: aiohttp.ClientSession, address: str, method: str, request: Any, kind: type[M]
) -> M:
    return (await call(http, address, method, request)).one(kind)
