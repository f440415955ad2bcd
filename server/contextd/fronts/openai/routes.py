"""``/v1/chat/completions``, ``/v1/models`` and the Responses API (responses_routes.py)
on the web port, each request one native
call (chat_http.front says how it is made).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from contextd.core.errors import cut
from contextd.fronts.chat_http.answer import AnsweredTurn, events, json_answer
from contextd.fronts.chat_http.failure import HttpFailure
from contextd.fronts.chat_http.front import ModelFront
from contextd.fronts.chat_http.turn import SESSION_ID_HEADER
from contextd.fronts.openai.errors import error_body
from contextd.fronts.openai.request import translate
from contextd.fronts.openai.response import Completion
from contextd.fronts.openai.responses_routes import ResponsesRoutes
from contextd.fronts.web.gateway import WebGateway
from contextd.v1 import chat_pb2 as cpb

_LONGEST_PATH = 100


@dataclass(frozen=True, slots=True)
class Model:
    """A model ``GET /v1/models`` lists."""

    id: str
    owned_by: str


class OpenAIRoutes(ModelFront):
    """The OpenAI-compatible API, mounted on a WebGateway (``mounts=[routes]``)."""

    protocol = "openai"  # its name in the web port's metrics
    exposed_headers = f"{SESSION_ID_HEADER}, X-Request-Id, X-Should-Retry, Retry-After"

    def __init__(self, models: Sequence[Model]) -> None:
        super().__init__()
        self._models = list(models)
        self._created = int(time.time())

    def __call__(self, gateway: WebGateway) -> Iterable[web.RouteDef]:
        self.attach(gateway)
        responses = ResponsesRoutes(self)
        unknown = [
            web.route(method, "/v1/{tail:.*}", self._unknown)
            for method in ("GET", "POST", "PUT", "PATCH", "DELETE")
        ]
        return [
            web.post("/v1/chat/completions", self._completions),
            *responses.routes(),
            web.get("/v1/models", self._list_models),
            web.get("/v1/models/{model}", self._get_model),
            *unknown,
        ]

    def error_body(self, failure: HttpFailure) -> dict[str, object]:
        return error_body(failure)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        def prepared(body: bytes, r: web.Request) -> AnsweredTurn:
            chat = translate(body, r.headers)

            async def answering(
                _: web.Request, started: cpb.TurnStarted
            ) -> tuple[Completion, _Chunks | None]:
                completion = Completion(chat.session_mode, started)
                if not chat.stream:
                    return completion, None
                return completion, _Chunks(completion, chat.include_usage, self.error_body)

            return AnsweredTurn(chat.native, chat.params, answering)

        return await self.run_turn(request, prepared)

    async def _list_models(self, request: web.Request) -> web.Response:
        return await self._models_answer(request, None)

    async def _get_model(self, request: web.Request) -> web.Response:
        return await self._models_answer(request, request.match_info["model"])

    async def _models_answer(self, request: web.Request, name: str | None) -> web.Response:
        """The models, once the credential is accepted: checked by a native call that
        needs one (ListTokenizers, which reads no user's data)."""

        async def answer() -> dict[str, Any]:
            refused = await self.credential_failure(request)
            if refused is not None:
                raise refused
            listed = [self._model_object(m) for m in self._models]
            if name is None:
                return {"object": "list", "data": listed}
            found = next((m for m in listed if m["id"] == name), None)
            if found is None:
                raise HttpFailure(
                    404,
                    "The model does not exist on this server.",
                    param="model",
                    code="model_not_found",
                )
            return found

        return await json_answer(self, request, answer)

    def _model_object(self, model: Model) -> dict[str, Any]:
        return {
            "id": model.id,
            "object": "model",
            "created": self._created,
            "owned_by": model.owned_by,
        }

    async def _unknown(self, request: web.Request) -> web.Response:
        path = cut(request.path, _LONGEST_PATH)
        return self.error_response(
            HttpFailure(404, f"Invalid URL ({cut(request.method)} {path})"), {}
        )


class _Chunks:
    """Chat Completions' stream: ``chat.completion.chunk`` events, ended by ``[DONE]``;
    a failure as an error object of its own."""

    def __init__(
        self,
        completion: Completion,
        include_usage: bool,
        error_body: Callable[[HttpFailure], dict[str, object]],
    ) -> None:
        self.completion = completion
        self.include_usage = include_usage
        self.error_body = error_body

    def opening(self) -> bytes:
        return events([(None, self.completion.first_chunk(self.include_usage))])

    def delta(self, text: str) -> bytes:
        chunk = self.completion.chunk({"content": text}, None, self.include_usage)
        return events([(None, chunk)])

    def failed(self, failure: HttpFailure) -> bytes:
        return events([(None, self.error_body(failure))])

    def closing(self, done: cpb.TurnCompleted) -> bytes:
        chunks = self.completion.last_chunks(done, self.include_usage)
        return events((None, chunk) for chunk in chunks) + b"data: [DONE]\n\n"
