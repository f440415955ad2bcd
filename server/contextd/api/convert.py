"""Proto messages <-> domain objects. Enum fields are checked here; the rest in core/."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from contextd.api.auth import caller_for
from contextd.app.scope import Caller
from contextd.app.session_context import ContextLayer, SessionBuildRequest
from contextd.core.build import BuildReport, BuildRequest, BuildResult, OverflowPolicy
from contextd.core.errors import ContextdError, InvalidArgument, Violations
from contextd.core.formats import OutputFormat
from contextd.core.messages import ChatMessage, CompressionSummary, Role, ToolCall
from contextd.core.pipeline import DropReason
from contextd.core.plain_build import PlainRequest, PlainResult
from contextd.core.prompt import LayerReport, PromptLayers
from contextd.core.tokens import Tokenizer, TokenizerRegistry
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
_NEUTRAL_FORMATS = (pb.OUTPUT_FORMAT_UNSPECIFIED, pb.OUTPUT_FORMAT_NEUTRAL)
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
    messages: Iterable[Any], field: str, violations: Violations
) -> list[ChatMessage]:
    out: list[ChatMessage] = []
    roles = _ROLES
    for i, m in enumerate(messages):
        role = roles.get(m.role)
        if role is None:
            violations.add(f"{field}[{i}].role", f"unknown role {m.role}; use a ROLE_* value")
            role = Role.USER
        calls = m.tool_calls
        out.append(
            ChatMessage(
                role,
                m.content,
                tuple(ToolCall(c.id, c.name, c.arguments) for c in calls) if calls else (),
                m.tool_call_id,
                m.id,
            )
        )
    return out


def _format_and_policy(
    req: pb.BuildMessagesRequest, violations: Violations
) -> tuple[OutputFormat, OverflowPolicy]:
    """The output format and overflow policy of either mode (an unknown value is recorded
    and stands in as the default, so the rest of the request can still be checked)."""
    output_format = _FORMATS.get(req.output_format)
    if output_format is None:
        violations.add("output_format", f"unknown output format {req.output_format}")
    policy = _POLICIES.get(req.overflow_policy)
    if policy is None:
        violations.add("overflow_policy", f"unknown overflow policy {req.overflow_policy}")
    return output_format or OutputFormat.NEUTRAL, policy or OverflowPolicy.KEEP_REQUIRED


def build_request_from_pb(
    req: pb.BuildMessagesRequest,
    history_pb: Sequence[pb.Message],
    tokenizer: Tokenizer,
    violations: Violations,
) -> BuildRequest:
    """The inline-mode request; ``history_pb`` is ``req.history[:]``, which the caller
    keeps to build the response from (``result.sources`` index it; each read of a
    repeated field element makes a new Python object)."""
    output_format, policy = _format_and_policy(req, violations)
    summary = None
    if req.HasField("compression_summary"):
        s = req.compression_summary
        summary = CompressionSummary(tuple(s.message_ids), s.start_message_id, s.summary)
    return BuildRequest(
        user_message=req.user_message,
        token_budget=req.token_budget,
        tokenizer=tokenizer,
        system_prompts=req.system_prompts[:],
        layers=layers_from_pb(req.layers) if req.HasField("layers") else None,
        history=messages_from_pb(history_pb, "history", violations),
        compression_summary=summary,
        output_format=output_format,
        overflow_policy=policy,
    )


def plain_request_from_pb(
    req: pb.BuildMessagesRequest, history_pb: Sequence[pb.Message], tokenizers: TokenizerRegistry
) -> PlainRequest | None:
    """The request for ``build_plain`` when its shape allows it (neutral output, no
    layers, no summary, a known tokenizer and policy); None otherwise."""
    if (
        req.output_format not in _NEUTRAL_FORMATS
        or req.overflow_policy not in _POLICIES
        or req.HasField("layers")
        or req.HasField("compression_summary")
    ):
        return None
    try:
        tokenizer = tokenizers.get(req.tokenizer)
    except ContextdError:
        return None  # the general way reports it
    return PlainRequest(
        history_pb, _ROLES, req.system_prompts[:], req.user_message, req.token_budget, tokenizer
    )


def plain_response_to_pb(
    result: PlainResult, history_pb: Sequence[pb.Message], user_message: str
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
    user.content = user_message
    user.tokens = report.user_message_tokens
    return response


def message_to_pb(m: ChatMessage, tokens: int) -> pb.Message:
    out = pb.Message()
    fill_message(out, m, tokens)
    return out


def fill_message(out: pb.Message, m: ChatMessage, tokens: int) -> None:
    out.role = _ROLE_TO_PB[m.role]
    out.content = m.content
    out.tokens = tokens
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
    if r.layers:
        out.layers.extend(layer_reports_to_pb(r.layers))


def build_response_to_pb(
    result: BuildResult, history_pb: Sequence[pb.Message] | None = None
) -> pb.BuildMessagesResponse:
    """The response. Given the request's history messages, the messages passed through
    unchanged (``result.sources``) are copied from them: cheaper than filling anew."""
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


def check_session_mode(req: pb.BuildMessagesRequest, violations: Violations) -> None:
    """Session mode builds from the store: the inline fields must stay empty."""
    for name in ("system_prompts", "history"):
        if getattr(req, name):
            violations.add(name, "must be empty in session mode")
    for name in ("layers", "compression_summary"):
        if req.HasField(name):
            violations.add(name, "must be empty in session mode")


_MEMORY_MODES = {
    pb.MEMORY_MODE_UNSPECIFIED: None,
    pb.MEMORY_MODE_ON: True,
    pb.MEMORY_MODE_OFF: False,
}


def session_build_from_pb(
    req: pb.BuildMessagesRequest, tokenizer: Tokenizer, violations: Violations
) -> SessionBuildRequest:
    s = req.session
    output_format, policy = _format_and_policy(req, violations)
    if s.memory not in _MEMORY_MODES:
        violations.add("session.memory", f"unknown memory mode {s.memory}")
    caller = None
    try:
        caller = caller_for(s.user_id, "session.user_id")
    except InvalidArgument as error:
        violations.extend(error.violations)
    return SessionBuildRequest(
        caller=caller or Caller(""),
        session_id=s.session_id,
        user_message=req.user_message,
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
    )


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
