"""The Connect protocol, unary and server streaming, with binary protobuf or JSON.

Unary calls carry the bare message and answer with an HTTP status that says how they
ended (errors as a JSON body); streaming calls use length-prefixed envelopes and end
with an envelope flagged 0x02 holding the error, if any, and the trailing metadata.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import grpc
from aiohttp import web
from google.protobuf import any_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import DecodeError
from google.rpc import (
    error_details_pb2,  # noqa: F401  loads BadRequest, ErrorInfo... for "debug"
    status_pb2,
)

from contextd.core.errors import shown
from contextd.fronts.http_status import http_status
from contextd.fronts.web import framing
from contextd.fronts.web.exchange import (
    CallError,
    Exchange,
    Metadata,
    NativeCall,
    Outcome,
    method_for,
)
from contextd.fronts.web.grpc_web import CONTENT_TYPES as GRPC_WEB_TYPES
from contextd.fronts.web.metadata import header_pairs, header_value

UNARY_TYPES = {"application/proto": False, "application/json": True}
STREAM_TYPES = {"application/connect+proto": False, "application/connect+json": True}
CONTENT_TYPES = frozenset([*UNARY_TYPES, *STREAM_TYPES])
_END_STREAM = 0x02
_DETAILS_KEY = "grpc-status-details-bin"
_TIMEOUT_MS = re.compile(r"[0-9]{1,10}")


def exchange_for(request: web.Request, cors_headers: dict[str, str]) -> ConnectExchange:
    """The exchange for a Connect request whose content type fits its method (see
    ``refuse_misfit``)."""
    streaming = request.content_type in STREAM_TYPES
    json_codec = (STREAM_TYPES if streaming else UNARY_TYPES)[request.content_type]
    return ConnectExchange(
        request, cors_headers, method_for(request.path), streaming=streaming, json_codec=json_codec
    )


def refuse_misfit(request: web.Request, cors_headers: dict[str, str]) -> web.Response | None:
    """415 when a Connect content type is of the other kind than the method (unary types
    for unary methods, connect+ types for streaming ones), with ``Accept-Post`` naming
    the content types the method takes and a Connect error saying which to use: a
    client reads that body as the call's error. None when the request fits, or is not
    Connect."""
    if request.content_type not in CONTENT_TYPES:
        return None
    streaming = request.content_type in STREAM_TYPES
    method = method_for(request.path)
    if method is None or (method.server_streaming or method.client_streaming) == streaming:
        return None
    path = request.path.lstrip("/")
    kind = "a unary method" if streaming else "a streaming method"
    json_codec = (STREAM_TYPES if streaming else UNARY_TYPES)[request.content_type]
    fitting_types = UNARY_TYPES if streaming else STREAM_TYPES
    # The codec the client chose first.
    fitting = sorted(fitting_types, key=lambda t: fitting_types[t] != json_codec)
    message = (
        f"{path} is {kind}: call it with content type {' or '.join(fitting)} "
        f"({request.content_type} is for {'streaming' if streaming else 'unary'} methods)"
    )
    return web.Response(
        status=415,
        body=json.dumps({"code": "unimplemented", "message": message}).encode(),
        content_type="application/json",
        headers={**cors_headers, "Accept-Post": ", ".join([*GRPC_WEB_TYPES, *fitting])},
    )


class ConnectExchange(Exchange):
    protocol = "connect"

    def __init__(
        self,
        request: web.Request,
        cors_headers: dict[str, str],
        method: MethodDescriptor | None,
        *,
        streaming: bool,
        json_codec: bool,
    ) -> None:
        super().__init__(request, cors_headers)
        self._method = method
        self._streaming = streaming
        self._json = json_codec

    def messages(self, body: bytes) -> list[bytes]:
        encoding_header = "connect-content-encoding" if self._streaming else "content-encoding"
        encoding = self.request.headers.get(encoding_header, "identity")
        if encoding != "identity":
            raise CallError(
                grpc.StatusCode.UNIMPLEMENTED,
                f"content encoding {encoding} is not supported; supported: identity",
            )
        if not self._streaming:
            return [self._decode(body)]
        return [self._decode(payload) for payload in framing.request_messages(body, "Connect")]

    def deadline(self) -> float | None:
        raw = self.request.headers.get("connect-timeout-ms")
        if raw is None:
            return None
        if not _TIMEOUT_MS.fullmatch(raw.strip()):
            raise CallError(
                grpc.StatusCode.INVALID_ARGUMENT, f"malformed connect-timeout-ms {shown(raw)}"
            )
        return int(raw) / 1000

    async def respond(self, call: NativeCall) -> web.StreamResponse:
        initial = await call.initial_metadata()
        if self._streaming:
            response = await self._start_stream(initial)
            async for message in call.responses():
                await response.write(framing.encode_frame(framing.MESSAGE, self._encode(message)))
            await self._end_stream(response, await call.outcome())
            return response
        messages = [message async for message in call.responses()]
        outcome = await call.outcome()
        if outcome.code != grpc.StatusCode.OK:
            return await self._unary_error(outcome, initial)
        if len(messages) != 1:
            failure = Outcome(
                grpc.StatusCode.INTERNAL, f"{len(messages)} responses to a unary call", []
            )
            return await self._unary_error(failure, initial)
        headers = [*header_pairs(initial), *header_pairs(outcome.trailing_metadata, "trailer-")]
        return await self._unary(200, self.request.content_type, headers, self._encode(messages[0]))

    async def refuse(self, error: CallError) -> web.StreamResponse:
        if not self._streaming:
            return await self._unary_error(error.outcome(), [])
        response = await self._start_stream([])
        await self._end_stream(response, error.outcome())
        return response

    async def _unary(
        self, status: int, content_type: str, headers: list[tuple[str, str]], body: bytes
    ) -> web.StreamResponse:
        response = await self.start(status, content_type, headers)
        await response.write(body)
        await response.write_eof()
        return response

    async def _unary_error(self, outcome: Outcome, initial: Metadata) -> web.StreamResponse:
        trailing = [(k, v) for k, v in outcome.trailing_metadata if k != _DETAILS_KEY]
        headers = [*header_pairs(initial), *header_pairs(trailing, "trailer-")]
        status = http_status(outcome.code)
        return await self._unary(
            status, "application/json", headers, json.dumps(_error(outcome)).encode()
        )

    async def _start_stream(self, initial: Metadata) -> web.StreamResponse:
        # Always 200: a stream's outcome travels in its end-stream envelope.
        return await self.start(200, self.request.content_type, header_pairs(initial))

    async def _end_stream(self, response: web.StreamResponse, outcome: Outcome) -> None:
        end: dict[str, Any] = {}
        if outcome.code != grpc.StatusCode.OK:
            end["error"] = _error(outcome)
        metadata: dict[str, list[str]] = {}
        for key, value in outcome.trailing_metadata:
            if key != _DETAILS_KEY:
                metadata.setdefault(key, []).append(header_value(value))
        if metadata:
            end["metadata"] = metadata
        await response.write(framing.encode_frame(_END_STREAM, json.dumps(end).encode()))
        await response.write_eof()

    def _decode(self, payload: bytes) -> bytes:
        """A request message as protobuf bytes."""
        if not self._json:
            return payload
        if self._method is None:
            raise CallError(grpc.StatusCode.UNIMPLEMENTED, f"unknown method {self.request.path}")
        message = message_factory.GetMessageClass(self._method.input_type)()
        try:
            json_format.Parse(payload, message, ignore_unknown_fields=True)
        except (json_format.ParseError, UnicodeDecodeError) as error:
            raise CallError(
                grpc.StatusCode.INVALID_ARGUMENT, f"invalid JSON request: {error}"
            ) from None
        return bytes(message.SerializeToString())

    def _encode(self, payload: bytes) -> bytes:
        """A response message in the request's codec."""
        if not self._json:
            return payload
        assert self._method is not None  # a JSON request without it was refused
        message = message_factory.GetMessageClass(self._method.output_type).FromString(payload)
        return json_format.MessageToJson(message, indent=None).encode()


def _error(outcome: Outcome) -> dict[str, Any]:
    """A Connect error object: code, message, and the google.rpc details the native
    status carried."""
    code = "canceled" if outcome.code == grpc.StatusCode.CANCELLED else outcome.code.name.lower()
    error: dict[str, Any] = {"code": code}
    if outcome.details:
        error["message"] = outcome.details
    raw = next((v for k, v in outcome.trailing_metadata if k == _DETAILS_KEY), None)
    status = status_pb2.Status.FromString(raw) if isinstance(raw, bytes) else None
    if status is not None and status.details:
        error["details"] = [_detail(detail) for detail in status.details]
    return error


def _detail(detail: any_pb2.Any) -> dict[str, Any]:
    """A Connect error detail: its type and its protobuf bytes in base64, and under
    "debug" the same message in JSON, so that a page can read it (a BadRequest's
    fieldViolations, say) without protobuf; no "debug" for a type not loaded here."""
    name = detail.type_url.rsplit("/", 1)[-1]
    entry: dict[str, Any] = {
        "type": name,
        "value": base64.b64encode(detail.value).decode().rstrip("="),
    }
    try:
        descriptor = descriptor_pool.Default().FindMessageTypeByName(name)
        kind = message_factory.GetMessageClass(descriptor)
        entry["debug"] = json_format.MessageToDict(kind.FromString(detail.value))
    except (KeyError, DecodeError):
        pass
    return entry
