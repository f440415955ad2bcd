"""gRPC-Web: frames in the request body; message frames, then a trailer frame with the
status, in the response; base64 throughout in text mode."""

from __future__ import annotations

import grpc
from aiohttp import web

from contextd.fronts.web import framing
from contextd.fronts.web.exchange import CallError, Exchange, Metadata, NativeCall, Outcome
from contextd.fronts.web.metadata import header_pairs

CONTENT_TYPES = {
    "application/grpc-web": False,
    "application/grpc-web+proto": False,
    "application/grpc-web-text": True,
    "application/grpc-web-text+proto": True,
}


class GrpcWebExchange(Exchange):
    protocol = "grpc-web"

    def __init__(self, request: web.Request, cors_headers: dict[str, str]) -> None:
        super().__init__(request, cors_headers)
        self._text = CONTENT_TYPES[request.content_type]
        self._encoder = framing.TextEncoder() if self._text else None
        self._response: web.StreamResponse | None = None

    def body_limit(self, max_body: int) -> int:
        return max_body * 4 // 3 + 4 if self._text else max_body

    def messages(self, body: bytes) -> list[bytes]:
        return framing.request_messages(body, "gRPC-Web", text=self._text)

    def deadline(self) -> float | None:
        raw = self.request.headers.get("grpc-timeout")
        try:
            return None if raw is None else framing.parse_timeout(raw)
        except ValueError as error:
            raise CallError(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from None

    async def respond(self, call: NativeCall) -> web.StreamResponse:
        response = await self._start(await call.initial_metadata())
        async for message in call.responses():
            await self._write(response, framing.encode_frame(framing.MESSAGE, message))
        await self._finish(response, await call.outcome())
        return response

    async def refuse(self, error: CallError) -> web.StreamResponse:
        response = await self._start([])
        await self._finish(response, error.outcome())
        return response

    async def _start(self, initial_metadata: Metadata) -> web.StreamResponse:
        return await self.start(200, self.request.content_type, header_pairs(initial_metadata))

    async def _finish(self, response: web.StreamResponse, outcome: Outcome) -> None:
        trailers = [("grpc-status", str(outcome.code.value[0]))]
        if outcome.details:
            trailers.append(("grpc-message", framing.percent_encode(outcome.details)))
        trailers += header_pairs(outcome.trailing_metadata)
        await self._write(response, framing.encode_trailers(trailers))
        if self._encoder is not None:
            await response.write(self._encoder.flush())
        await response.write_eof()

    async def _write(self, response: web.StreamResponse, data: bytes) -> None:
        await response.write(data if self._encoder is None else self._encoder.encode(data))
