"""contextd.v1.ContextService over gRPC: converts, delegates to app/, converts back."""

from __future__ import annotations

from contextd.api import convert
from contextd.api.auth import caller_for
from contextd.api.types import Context
from contextd.app.context import ContextApp
from contextd.app.session_context import SessionContextBuilder
from contextd.app.sessions import SessionsApp
from contextd.core.errors import Violations
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc as pb_grpc


class ContextServicer(pb_grpc.ContextServiceServicer):  # type: ignore[misc]
    def __init__(
        self, app: ContextApp, sessions: SessionsApp, builder: SessionContextBuilder
    ) -> None:
        self._app = app
        self._sessions = sessions
        self._builder = builder

    async def AssemblePrompt(
        self, request: pb.AssemblePromptRequest, context: Context
    ) -> pb.AssemblePromptResponse:
        result = self._app.assemble_prompt(
            convert.layers_from_pb(request.layers), request.tokenizer
        )
        return pb.AssemblePromptResponse(
            system_prompt=result.system_prompt,
            layers=convert.layer_reports_to_pb(result.layers),
            tokens=result.tokens,
            tokenizer=result.tokenizer,
        )

    async def BuildMessages(
        self, request: pb.BuildMessagesRequest, context: Context
    ) -> pb.BuildMessagesResponse:
        if request.HasField("session"):
            return await self._build_for_session(request)
        history_pb = request.history[:]  # a slice costs half of list()
        plain = convert.plain_request_from_pb(request, history_pb, self._app.tokenizers)
        if plain is not None:
            built = self._app.build_plain(plain)
            if built is not None:
                return convert.plain_response_to_pb(built, history_pb, request.user_message)
        violations = Violations()
        tokenizer = self._app.tokenizer_or_placeholder(request.tokenizer, violations)
        build = convert.build_request_from_pb(request, history_pb, tokenizer, violations)
        if violations:
            self._app.reject(build, violations)
        result = self._app.build_messages(build)
        return convert.build_response_to_pb(result, history_pb)

    async def _build_for_session(
        self, request: pb.BuildMessagesRequest
    ) -> pb.BuildMessagesResponse:
        violations = Violations()
        convert.check_session_mode(request, violations)
        tokenizer = self._app.tokenizer_or_placeholder(request.tokenizer, violations)
        build = convert.session_build_from_pb(request, tokenizer, violations)
        violations.raise_if_any()
        session_build = await self._builder.build(build)
        response = convert.build_response_to_pb(session_build.result)
        response.report.context_layers.extend(convert.context_layers_to_pb(session_build.layers))
        return response

    async def Collect(self, request: pb.CollectRequest, context: Context) -> pb.CollectResponse:
        stored, memory_id = await self._sessions.collect(
            caller_for(request.user_id), request.message_id, request.uncollect, request.remember
        )
        return pb.CollectResponse(
            message_id=str(stored.id), is_collected=stored.is_collected, memory_id=memory_id
        )

    async def CountTokens(
        self, request: pb.CountTokensRequest, context: Context
    ) -> pb.CountTokensResponse:
        violations = Violations()
        messages = convert.messages_from_pb(request.messages, "messages", violations)
        violations.raise_if_any()
        counts = self._app.count_tokens(request.tokenizer, request.texts, messages)
        return pb.CountTokensResponse(
            tokenizer=counts.tokenizer,
            text_tokens=counts.text_tokens,
            message_tokens=counts.message_tokens,
            total_tokens=counts.total,
        )

    async def ListTokenizers(
        self, request: pb.ListTokenizersRequest, context: Context
    ) -> pb.ListTokenizersResponse:
        infos, default = self._app.list_tokenizers()
        return pb.ListTokenizersResponse(
            tokenizers=[
                pb.TokenizerInfo(
                    name=i.name,
                    available=i.available,
                    message_overhead=i.message_overhead,
                    description=i.description,
                )
                for i in infos
            ],
            default_tokenizer=default,
        )
