"""contextd.v1.ContextService over gRPC: converts, delegates to app/, converts back.
BuildMessages' own conversion (its inline and session requests, its response) is here;
what the services share (messages, tokenizers, editing, reports) is convert.py's."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contextd.app.context import ContextApp
from contextd.app.scope import Caller
from contextd.app.session_build_request import BuiltContext, SessionBuildRequest
from contextd.app.sessions import SessionsApp
from contextd.core.build_request import (
    BuildRequest,
    BuildResult,
    OverflowPolicy,
    validate_build_request,
)
from contextd.core.content import ImageLimits
from contextd.core.editing import EditingSettings
from contextd.core.editing.settings import OFF as EDITING_OFF
from contextd.core.errors import FieldViolation, InvalidArgument, Violations
from contextd.core.formats import OutputFormat
from contextd.core.messages import CompressionSummary
from contextd.core.prompt import PromptLayers
from contextd.core.tokens import TokenizerRegistry
from contextd.fronts.grpc import convert
from contextd.fronts.grpc.auth import caller_for
from contextd.fronts.grpc.convert import (
    CACHE_LAYOUTS,
    PublicIds,
    add_context_layers,
    cache_layout_from_pb,
    check_id,
    editing_from_pb,
    fill_message,
    fill_report,
    memory_from_pb,
    messages_from_pb,
    tokenizer_from_pb,
    user_message_from_pb,
)
from contextd.fronts.grpc.types import Context
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc as pb_grpc


@dataclass(frozen=True, slots=True)
class ContextServicer(pb_grpc.ContextServiceServicer):  # type: ignore[misc]
    _app: ContextApp
    _sessions: SessionsApp
    _ids: PublicIds

    async def AssemblePrompt(
        self, request: pb.AssemblePromptRequest, context: Context
    ) -> pb.AssemblePromptResponse:
        result = await self._app.assemble_prompt(layers_from_pb(request.layers), request.tokenizer)
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
            command = session_build_from_pb(request, app.tokenizers, app.image_limits, app.editing)
            built = await app.session_builds.build_messages(command)
            # The session's messages carry their stored ids, shown as callers see them.
            return build_response_to_pb(built, None, self._ids.message)
        # Read once, as a slice (the cheapest copy): the response copies the messages
        # kept as they are from these.
        history_pb = request.history[:]
        build = inline_build_from_pb(
            request, history_pb, app.tokenizers, app.image_limits, app.editing
        )
        return build_response_to_pb(await app.build(build), history_pb)

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


# --- BuildMessages' requests and response -------------------------------------------

_FORMATS = {
    pb.OUTPUT_FORMAT_UNSPECIFIED: OutputFormat.NEUTRAL,
    pb.OUTPUT_FORMAT_NEUTRAL: OutputFormat.NEUTRAL,
    pb.OUTPUT_FORMAT_OPENAI: OutputFormat.OPENAI,
    pb.OUTPUT_FORMAT_ANTHROPIC: OutputFormat.ANTHROPIC,
}
_POLICIES = {
    pb.OVERFLOW_POLICY_UNSPECIFIED: OverflowPolicy.KEEP_REQUIRED,
    pb.OVERFLOW_POLICY_KEEP_REQUIRED: OverflowPolicy.KEEP_REQUIRED,
    pb.OVERFLOW_POLICY_FAIL: OverflowPolicy.FAIL,
}


def inline_build_from_pb(
    req: pb.BuildMessagesRequest,
    history_pb: Sequence[pb.Message],
    tokenizers: TokenizerRegistry,
    limits: ImageLimits,
    editing: EditingSettings = EDITING_OFF,
) -> BuildRequest:
    """BuildMessages with the history in the request, as core's build request.
    ``history_pb`` is ``req.history[:]``, which the caller keeps to build the response
    from (each read of a repeated field element makes a new Python object)."""
    v = Violations()
    tokenizer = tokenizer_from_pb(req.tokenizer, tokenizers, v)
    output_format = _FORMATS.get(req.output_format)
    policy = _POLICIES.get(req.overflow_policy)
    cache_layout = CACHE_LAYOUTS.get(req.cache_layout)
    # Not in the common case: no call for it.
    if output_format is None or policy is None or cache_layout is None:
        output_format, policy = _format_and_policy(req, v)
        cache_layout = cache_layout_from_pb(req.cache_layout, "cache_layout", v)
    summary = None
    if req.HasField("compression_summary"):
        s = req.compression_summary
        summary = CompressionSummary(tuple(s.message_ids), s.start_message_id, s.summary)
    user_message, user_parts = user_message_from_pb(
        req.user_message, req.user_message_parts, v, limits
    )
    if req.HasField("editing"):
        editing = editing_from_pb(req.editing, True, editing, "editing", v)
    build = BuildRequest(
        user_message=user_message,
        user_parts=user_parts,
        token_budget=req.token_budget,
        tokenizer=tokenizer,
        system_prompts=req.system_prompts[:],
        layers=layers_from_pb(req.layers) if req.HasField("layers") else None,
        history=messages_from_pb(history_pb, "history", v, limits),
        compression_summary=summary,
        output_format=output_format,
        overflow_policy=policy,
        cache_layout=cache_layout,
        editing=editing,
    )
    if v:
        validate_build_request(build, v)  # raises, naming the build's bad fields too
    return build


def session_build_from_pb(
    req: pb.BuildMessagesRequest,
    tokenizers: TokenizerRegistry,
    limits: ImageLimits,
    editing: EditingSettings = EDITING_OFF,
) -> SessionBuildRequest:
    """BuildMessages in session mode (``req.session`` set): the list comes from the stored
    session, so the request's inline fields must stay empty."""
    s = req.session
    # First: naming another user than the credential's is refused before anything else.
    caller = Caller("")
    caller_violations: Sequence[FieldViolation] = ()
    try:
        caller = caller_for(s.user_id, "session.user_id")
    except InvalidArgument as error:
        caller_violations = error.violations
    v = Violations()
    for name in ("system_prompts", "history"):
        if getattr(req, name):
            v.add(name, "must be empty in session mode")
    for name in ("layers", "compression_summary"):
        if req.HasField(name):
            v.add(name, "must be empty in session mode")
    tokenizer = tokenizer_from_pb(req.tokenizer, tokenizers, v)
    output_format, policy = _format_and_policy(req, v)
    memory = memory_from_pb(s.memory, "session.memory", v)
    cache_layout = cache_layout_from_pb(s.cache_layout, "session.cache_layout", v)
    v.extend(caller_violations)
    check_id(s.session_id, "session.session_id", v)
    user_message, user_parts = user_message_from_pb(
        req.user_message, req.user_message_parts, v, limits
    )
    editing = editing_from_pb(req.editing, req.HasField("editing"), editing, "editing", v)
    v.raise_if_any()
    return SessionBuildRequest(
        caller=caller,
        session_id=s.session_id,
        user_message=user_message,
        user_parts=user_parts,
        token_budget=req.token_budget,
        tokenizer=tokenizer,
        scenario=s.scenario,
        host=s.host,
        variables=dict(s.variables),
        memory=memory,
        memory_limit=s.memory_limit,
        recent_sessions_limit=s.recent_sessions_limit,
        output_format=output_format,
        overflow_policy=policy,
        cache_layout=cache_layout,
        editing=editing,
    )


def _format_and_policy(
    req: pb.BuildMessagesRequest, violations: Violations
) -> tuple[OutputFormat, OverflowPolicy]:
    output_format = _FORMATS.get(req.output_format)
    if output_format is None:
        output_format = OutputFormat.NEUTRAL
        violations.add("output_format", f"unknown output format {req.output_format}")
    policy = _POLICIES.get(req.overflow_policy)
    if policy is None:
        policy = OverflowPolicy.KEEP_REQUIRED
        violations.add("overflow_policy", f"unknown overflow policy {req.overflow_policy}")
    return output_format, policy


def layers_from_pb(layers: pb.PromptLayers) -> PromptLayers:
    return PromptLayers(
        identity=layers.identity,
        rules=layers.rules,
        skill=layers.skill,
        mode=layers.mode,
        memory=layers.memory,
        context=layers.context,
    )


def build_response_to_pb(
    built: BuiltContext,
    history_pb: Sequence[pb.Message] | None,
    stored_id: Callable[[str], str] | None = None,
) -> pb.BuildMessagesResponse:
    """BuildMessages' response. ``history_pb``: the request's history when the build was
    inline; the messages kept as they are are copied from it (cheaper than filling anew).
    A session build's sources are positions in the stored session: None then, and
    ``stored_id`` shows each stored message's id as callers see it."""
    response = pb.BuildMessagesResponse()
    result = built.result
    report = response.report
    fill_report(report, result.report)
    if built.layers:
        add_context_layers(report.context_layers, built.layers)
    if result.payload is not None:
        response.payload_json = json.dumps(
            result.payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )
    _fill_messages(response, result, history_pb, stored_id)
    return response


def _fill_messages(
    response: pb.BuildMessagesResponse,
    result: BuildResult,
    history_pb: Sequence[pb.Message] | None,
    stored_id: Callable[[str], str] | None,
) -> None:
    add = response.messages.add
    if history_pb is None:
        for m, n in zip(result.messages, result.message_tokens, strict=True):
            out = add()
            fill_message(out, m, n)
            if m.id and stored_id is not None:
                out.id = stored_id(m.id)
        return
    for m, n, source in zip(result.messages, result.message_tokens, result.sources, strict=True):
        if source is None:
            fill_message(add(), m, n)
        else:
            copy = add()
            copy.CopyFrom(history_pb[source])
            copy.tokens = n
