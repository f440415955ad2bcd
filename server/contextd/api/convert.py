"""Proto messages <-> domain objects. Enum fields are checked here; the rest in core/."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from contextd.api.auth import caller_for
from contextd.api.content_parts import fill_parts, parts_from_pb
from contextd.app.context import BuiltMessages, SessionModeRequest
from contextd.app.scope import Caller
from contextd.app.session_context import ContextLayer, SessionBuild, SessionBuildRequest
from contextd.core.build import BuildReport, BuildResult, CacheLayout, OverflowPolicy
from contextd.core.content import ImageLimits
from contextd.core.errors import FieldViolation, InvalidArgument, Violations
from contextd.core.formats import OutputFormat
from contextd.core.inline_request import (
    ApiMessage,
    InlineRequest,
    chat_messages,
    user_message_parts,
)
from contextd.core.messages import ChatMessage, CompressionSummary, Role
from contextd.core.pipeline import DropReason
from contextd.core.plain_build import PlainResult
from contextd.core.prompt import LayerReport, PromptLayers
from contextd.core.tokens import Tokenizer
from contextd.v1 import context_pb2 as pb

_ROLE_TO_PB: dict[Role, pb.Role] = {
    Role.SYSTEM: pb.ROLE_SYSTEM,
    Role.USER: pb.ROLE_USER,
    Role.ASSISTANT: pb.ROLE_ASSISTANT,
    Role.TOOL: pb.ROLE_TOOL,
}
_ROLES: dict[int, Role] = {number: role for role, number in _ROLE_TO_PB.items()}
_FORMATS = {
    pb.OUTPUT_FORMAT_UNSPECIFIED: OutputFormat.NEUTRAL,
    pb.OUTPUT_FORMAT_NEUTRAL: OutputFormat.NEUTRAL,
    pb.OUTPUT_FORMAT_OPENAI: OutputFormat.OPENAI,
    pb.OUTPUT_FORMAT_ANTHROPIC: OutputFormat.ANTHROPIC,
}
_CACHE_LAYOUTS: dict[int, CacheLayout] = {
    pb.CACHE_LAYOUT_UNSPECIFIED: CacheLayout.OFF,
    pb.CACHE_LAYOUT_OFF: CacheLayout.OFF,
    pb.CACHE_LAYOUT_STABLE_PREFIX: CacheLayout.STABLE_PREFIX,
}


def cache_layout_from_pb(value: int, field: str, violations: list[FieldViolation]) -> CacheLayout:
    """The layout; an unknown value is recorded and stands in as the default."""
    layout = _CACHE_LAYOUTS.get(value)
    if layout is None:
        violations.append(FieldViolation(field, f"unknown cache layout {value}"))
        return CacheLayout.OFF
    return layout


_POLICIES = {
    pb.OVERFLOW_POLICY_UNSPECIFIED: OverflowPolicy.KEEP_REQUIRED,
    pb.OVERFLOW_POLICY_KEEP_REQUIRED: OverflowPolicy.KEEP_REQUIRED,
    pb.OVERFLOW_POLICY_FAIL: OverflowPolicy.FAIL,
}
_DROP_REASONS = {
    DropReason.COMPRESSED: pb.DROP_REASON_COMPRESSED,
    DropReason.EMPTY: pb.DROP_REASON_EMPTY,
    DropReason.ORPHANED_TOOL_RESULT: pb.DROP_REASON_ORPHANED_TOOL_RESULT,
    DropReason.BUDGET: pb.DROP_REASON_BUDGET,
    DropReason.LEADING_ASSISTANT: pb.DROP_REASON_LEADING_ASSISTANT,
}


def layers_from_pb(layers: pb.PromptLayers) -> PromptLayers:
    return PromptLayers(
        identity=layers.identity,
        rules=layers.rules,
        skill=layers.skill,
        mode=layers.mode,
        memory=layers.memory,
        context=layers.context,
    )


def messages_from_pb(
    messages: Iterable[ApiMessage], field: str, violations: Violations, limits: ImageLimits
) -> list[ChatMessage]:
    return chat_messages(messages, _ROLES, field, violations, parts_from_pb, limits)


def build_from_pb(
    req: pb.BuildMessagesRequest, history_pb: Sequence[pb.Message]
) -> InlineRequest | SessionModeRequest:
    """BuildMessages' request for ``ContextApp.build``. ``history_pb`` is ``req.history[:]``,
    which the caller keeps to build the response from (each read of a repeated field
    element makes a new Python object). The history stays as received: the app reads it
    the way the request needs."""
    if req.HasField("session"):
        return _session_build_from_pb(req)
    output_format = _FORMATS.get(req.output_format)
    policy = _POLICIES.get(req.overflow_policy)
    cache_layout = _CACHE_LAYOUTS.get(req.cache_layout)
    violations: Sequence[FieldViolation] = ()
    # Not in the common case: no call for it.
    if output_format is None or policy is None or cache_layout is None:
        output_format, policy, found = _format_and_policy(req)
        cache_layout = cache_layout_from_pb(req.cache_layout, "cache_layout", found)
        violations = found
    summary = None
    if req.HasField("compression_summary"):
        s = req.compression_summary
        summary = CompressionSummary(tuple(s.message_ids), s.start_message_id, s.summary)
    return InlineRequest(
        history_pb,
        _ROLES,
        req.system_prompts[:],
        req.user_message,
        req.token_budget,
        req.tokenizer,
        layers_from_pb(req.layers) if req.HasField("layers") else None,
        summary,
        output_format,
        policy,
        violations,
        cache_layout,
        req.user_message_parts[:],
        parts_from_pb,
    )


def _format_and_policy(
    req: pb.BuildMessagesRequest,
) -> tuple[OutputFormat, OverflowPolicy, list[FieldViolation]]:
    """The output format and overflow policy of either mode; an unknown value is recorded
    and stands in as the default, so that the rest of the request can still be checked."""
    violations: list[FieldViolation] = []
    output_format = _FORMATS.get(req.output_format)
    if output_format is None:
        output_format = OutputFormat.NEUTRAL
        violations.append(
            FieldViolation("output_format", f"unknown output format {req.output_format}")
        )
    policy = _POLICIES.get(req.overflow_policy)
    if policy is None:
        policy = OverflowPolicy.KEEP_REQUIRED
        violations.append(
            FieldViolation("overflow_policy", f"unknown overflow policy {req.overflow_policy}")
        )
    return output_format, policy, violations


_MEMORY_MODES = {
    pb.MEMORY_MODE_UNSPECIFIED: None,
    pb.MEMORY_MODE_ON: True,
    pb.MEMORY_MODE_OFF: False,
}


def _session_build_from_pb(req: pb.BuildMessagesRequest) -> SessionModeRequest:
    # Session mode builds from the store: the inline fields must stay empty.
    inline = [name for name in ("system_prompts", "history") if getattr(req, name)]
    inline += [name for name in ("layers", "compression_summary") if req.HasField(name)]
    s = req.session
    output_format, policy, violations = _format_and_policy(req)
    if s.memory not in _MEMORY_MODES:
        violations.append(FieldViolation("session.memory", f"unknown memory mode {s.memory}"))
    cache_layout = cache_layout_from_pb(s.cache_layout, "session.cache_layout", violations)
    caller = Caller("")
    try:
        caller = caller_for(s.user_id, "session.user_id")
    except InvalidArgument as error:
        violations.extend(error.violations)

    def request(
        tokenizer: Tokenizer, limits: ImageLimits, parts_violations: Violations
    ) -> SessionBuildRequest:
        user_message, user_parts = user_message_parts(
            req.user_message,
            req.user_message_parts,
            "user_message_parts",
            parts_violations,
            parts_from_pb,
            limits,
        )
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
            memory=_MEMORY_MODES.get(s.memory),
            memory_limit=s.memory_limit,
            recent_sessions_limit=s.recent_sessions_limit,
            output_format=output_format,
            overflow_policy=policy,
            cache_layout=cache_layout,
        )

    return SessionModeRequest(req.tokenizer, inline, violations, request)


def build_response_to_pb(
    built: BuiltMessages, history_pb: Sequence[pb.Message]
) -> pb.BuildMessagesResponse:
    """BuildMessages' response, whichever way it was built. Messages passed through
    unchanged are copied from the request's ``history_pb``: cheaper than filling anew."""
    if isinstance(built, PlainResult):
        return _plain_response_to_pb(built, history_pb)
    if isinstance(built, SessionBuild):
        # Its sources are positions in the stored session, not in the request.
        response = _result_to_pb(built.result, None)
        response.report.context_layers.extend(context_layers_to_pb(built.layers))
        return response
    return _result_to_pb(built, history_pb)


def _plain_response_to_pb(
    result: PlainResult, history_pb: Sequence[pb.Message]
) -> pb.BuildMessagesResponse:
    response = pb.BuildMessagesResponse()
    fill_report(response.report, result.report)
    add = response.messages.add
    report = result.report
    if result.system_prompt:
        system = add()
        system.role = pb.ROLE_SYSTEM
        system.content = result.system_prompt
        system.tokens = report.system_tokens
    for source, tokens in zip(history_pb[result.kept_from :], result.kept_tokens, strict=True):
        copy = add()
        copy.CopyFrom(source)
        copy.tokens = tokens
    user = add()
    user.role = pb.ROLE_USER
    user.content = result.user_message
    user.tokens = report.user_message_tokens
    return response


def _result_to_pb(
    result: BuildResult, history_pb: Sequence[pb.Message] | None
) -> pb.BuildMessagesResponse:
    response = pb.BuildMessagesResponse()
    fill_report(response.report, result.report)
    if result.payload is not None:
        response.payload_json = json.dumps(
            result.payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )
    add = response.messages.add
    if history_pb is None:
        for m, n in zip(result.messages, result.message_tokens, strict=True):
            fill_message(add(), m, n)
        return response
    for m, n, source in zip(result.messages, result.message_tokens, result.sources, strict=True):
        if source is None:
            fill_message(add(), m, n)
        else:
            copy = add()
            copy.CopyFrom(history_pb[source])
            copy.tokens = n
    return response


def message_to_pb(m: ChatMessage, tokens: int) -> pb.Message:
    out = pb.Message()
    fill_message(out, m, tokens)
    return out


def fill_message(out: pb.Message, m: ChatMessage, tokens: int) -> None:
    out.role = _ROLE_TO_PB[m.role]
    out.content = m.content
    out.tokens = tokens
    if m.parts:
        fill_parts(out, m.parts)
    # Only what is set: each assignment costs a field lookup by name.
    if m.id:
        out.id = m.id
    if m.tool_call_id:
        out.tool_call_id = m.tool_call_id
    for c in m.tool_calls:
        out.tool_calls.add(id=c.id, name=c.name, arguments=c.arguments)


def layer_reports_to_pb(layers: list[LayerReport]) -> list[pb.LayerReport]:
    return [pb.LayerReport(name=x.name, included=x.included, tokens=x.tokens) for x in layers]


def report_to_pb(r: BuildReport) -> pb.BuildReport:
    out = pb.BuildReport()
    fill_report(out, r)
    return out


def fill_report(out: pb.BuildReport, r: BuildReport) -> None:
    # Field by field on the target (a keyword constructor looks every name up and
    # then copies the whole report into its parent), and only fields that are set:
    # each assignment costs a lookup by name.
    out.tokenizer = r.tokenizer
    out.token_budget = r.token_budget
    out.system_tokens = r.system_tokens
    if r.summary_tokens:
        out.summary_tokens = r.summary_tokens
    out.history_tokens = r.history_tokens
    out.user_message_tokens = r.user_message_tokens
    out.total_tokens = r.total_tokens
    if r.required_over_budget:
        out.required_over_budget = True
    if r.summary_included:
        out.summary_included = True
    out.history_kept = r.history_kept
    for x in r.dropped:
        out.dropped.add(start_index=x.start_index, count=x.count, reason=_DROP_REASONS[x.reason])
    for c in r.removed_tool_calls:
        out.removed_tool_calls.add(index=c.index, tool_call_id=c.tool_call_id)
    for mv in r.moved_tool_results:
        out.moved_tool_results.add(
            tool_call_id=mv.tool_call_id, from_index=mv.from_index, call_index=mv.call_index
        )
    if r.layers:
        out.layers.extend(layer_reports_to_pb(r.layers))
    if r.cacheable_prefix_tokens:
        out.cacheable_prefix_tokens = r.cacheable_prefix_tokens
    if r.image_tokens:
        out.image_tokens = r.image_tokens


def context_layers_to_pb(layers: list[ContextLayer]) -> list[pb.ContextLayerReport]:
    return [
        pb.ContextLayerReport(
            name=x.name,
            included=x.included,
            tokens=x.tokens,
            items_kept=x.items_kept,
            items_dropped=x.items_dropped,
            note=x.note,
        )
        for x in layers
    ]
