"""contextd.v1.ContextService over gRPC: converts, delegates to app/, converts back."""

from __future__ import annotations

from contextd.app.context import ContextApp
from contextd.app.sessions import SessionsApp
from contextd.core.errors import Violations
from contextd.fronts.grpc import convert
from contextd.fronts.grpc.auth import caller_for
from contextd.fronts.grpc.ids import PublicIds
from contextd.fronts.grpc.types import Context
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc as pb_grpc


class ContextServicer(pb_grpc.ContextServiceServicer):  # type: ignore[misc]
    def __init__(self, app: ContextApp, sessions: SessionsApp, ids: PublicIds) -> None:
        self._app = app
        self._sessions = sessions
        self._ids = ids

    async def AssemblePrompt(
        self, request: pb.AssemblePromptRequest, context: Context
    ) -> pb.AssemblePromptResponse:
        result = await self._app.assemble_prompt(
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
        app = self._app
        if request.HasField("session"):
            command = convert.session_build_from_pb(
                request, app.tokenizers, app.image_limits, app.editing
            )
            built = await app.build_session(command)
            # The session's messages carry their stored ids, shown as callers see them.
            return convert.build_response_to_pb(built, None, self._ids.message)
        # Read once, as a slice (the cheapest copy): the response copies the messages
        # kept as they are from these.
        history_pb = request.history[:]
        build = convert.inline_build_from_pb(
            request, history_pb, app.tokenizers, app.image_limits, app.editing
        )
        return convert.build_response_to_pb(await app.build(build), history_pb)

    async def Collect(self, request: pb.CollectRequest, context: Context) -> pb.CollectResponse:
        ids = self._ids
        stored, memory_id = await self._sessions.collect(
            caller_for(request.user_id),
            ids.message_row(request.message_id, "message_id"),
            request.uncollect,
            request.remember,
        )
        return pb.CollectResponse(
            message_id=ids.message(stored.id),
            is_collected=stored.is_collected,
            memory_id=ids.memory(int(memory_id or 0)),
        )

    async def CountTokens(
        self, request: pb.CountTokensRequest, context: Context
    ) -> pb.CountTokensResponse:
        violations = Violations()
        messages = convert.messages_from_pb(
            request.messages, "messages", violations, self._app.image_limits
        )
        violations.raise_if_any()
        # A slice reads each text once: every read of a repeated field makes a new str.
        counts = await self._app.count_tokens(request.tokenizer, request.texts[:], messages)
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
