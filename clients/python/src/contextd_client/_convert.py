"""Plain Python values <-> the generated protobuf messages.

Only what cannot be encoded at all raises here (TypeError or ValueError). Everything
the server checks (roles, tool call ids, budgets, ...) is left to the server, so its
INVALID_ARGUMENT error names the offending field the same way for every client.

Responses from a newer server may carry enum numbers this client does not know: they
become ``"unknown(N)"`` (a role such as ``"unknown(42)"`` goes back to the server as
42). A response that cannot be decoded (a payload_json that is not a JSON object)
raises :class:`InvalidResponseError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias, TypeVar, cast

from ._errors import InvalidResponseError
from ._pb import chat_pb2 as cpb
from ._pb import context_pb2 as pb
from ._pb import sessions_pb2 as spb
from ._types import (
    AssembledPrompt,
    BuildReport,
    BuildResult,
    ChatEvent,
    ContextLayerInfo,
    DroppedRange,
    LayerInfo,
    RemovedToolCall,
    TextDelta,
    TokenCount,
    TokenizerInfo,
    TokenizerList,
    TokenUsage,
    ToolCallEvent,
    TurnCompleted,
    TurnStarted,
    Usage,
)

OutputFormat = Literal["neutral", "openai", "anthropic"]
OverflowPolicy = Literal["keep", "fail"]
#: A message as a dict (see the README), or a generated ``pb.Message``.
MessageLike: TypeAlias = Mapping[str, Any] | pb.Message

LAYER_NAMES: tuple[str, ...] = ("identity", "rules", "skill", "mode", "memory", "context")

_ROLES: dict[str, pb.Role] = {
    "system": pb.ROLE_SYSTEM,
    "user": pb.ROLE_USER,
    "assistant": pb.ROLE_ASSISTANT,
    "tool": pb.ROLE_TOOL,
}
_ROLE_NAMES: dict[int, str] = {number: name for name, number in _ROLES.items()}
_FORMATS: dict[str, pb.OutputFormat] = {
    "neutral": pb.OUTPUT_FORMAT_NEUTRAL,
    "openai": pb.OUTPUT_FORMAT_OPENAI,
    "anthropic": pb.OUTPUT_FORMAT_ANTHROPIC,
}
_POLICIES: dict[str, pb.OverflowPolicy] = {
    "keep": pb.OVERFLOW_POLICY_KEEP_REQUIRED,
    "fail": pb.OVERFLOW_POLICY_FAIL,
}
_DROP_REASON_PREFIX = "DROP_REASON_"
# How an enum number this client does not know is named, and read back.
_UNKNOWN = "unknown({})"
_UNKNOWN_NUMBER = re.compile(r"unknown\((-?\d+)\)")
_Enum = TypeVar("_Enum", pb.OutputFormat, pb.OverflowPolicy)


def _type_name(value: object) -> str:
    return type(value).__name__


def _text(value: object, where: str) -> str:
    """A string field; ``None`` means empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise TypeError(f"{where} must be a string, not {_type_name(value)}")


def _ident(value: object, where: str) -> str:
    """An id field: a string or an integer (sent as its decimal text); ``None`` means empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"{where} must be a string or an int, not {_type_name(value)}")


def _arguments(value: object, where: str) -> str:
    """Tool call arguments: JSON text as given, or any other value encoded as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise TypeError(f"{where} cannot be encoded as JSON: {error}") from error


def _role(value: object, where: str) -> pb.Role:
    """A role name; an unknown name becomes ROLE_UNSPECIFIED so the server names the field.

    ``"unknown(N)"``, the name :func:`role_name` gives a role number this client does
    not know, is sent back as N, so messages from a newer server can be fed back in.
    """
    if value is None:
        return pb.ROLE_UNSPECIFIED
    if isinstance(value, str):
        known = _ROLES.get(value)
        if known is not None:
            return known
        number = _UNKNOWN_NUMBER.fullmatch(value)
        if number is not None and -(2**31) <= int(number[1]) < 2**31:
            return cast(pb.Role, int(number[1]))
        return pb.ROLE_UNSPECIFIED
    if isinstance(value, int) and not isinstance(value, bool):
        return cast(pb.Role, value)  # a pb.Role number
    raise TypeError(f"{where} must be a role name such as 'user', not {_type_name(value)}")


def _sequence(value: object, where: str, what: str) -> Sequence[Any]:
    """A list-like argument; a lone string or mapping is a mistake, not a sequence of items."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise TypeError(f"{where} must be a sequence of {what}, not {_type_name(value)}")
    return value


def tool_call_to_pb(call: object, where: str) -> pb.ToolCall:
    """``{"id", "name", "arguments"}`` or OpenAI's ``{"id", "type", "function": {...}}``."""
    if isinstance(call, pb.ToolCall):
        return call
    if not isinstance(call, Mapping):
        raise TypeError(f"{where} must be a mapping, not {_type_name(call)}")
    source: Mapping[str, Any] = call
    function = call.get("function")
    if function is not None:
        if not isinstance(function, Mapping):
            raise TypeError(f"{where}.function must be a mapping, not {_type_name(function)}")
        source = function
    return pb.ToolCall(
        id=_ident(call.get("id"), f"{where}.id"),
        name=_text(source.get("name"), f"{where}.name"),
        arguments=_arguments(source.get("arguments"), f"{where}.arguments"),
    )


def message_to_pb(message: object, where: str) -> pb.Message:
    """A message dict (unknown keys such as "tokens" are ignored) or a ``pb.Message``."""
    if isinstance(message, pb.Message):
        return message
    if not isinstance(message, Mapping):
        raise TypeError(f"{where} must be a message mapping, not {_type_name(message)}")
    calls = message.get("tool_calls")
    calls = () if calls is None else _sequence(calls, f"{where}.tool_calls", "tool calls")
    return pb.Message(
        id=_ident(message.get("id"), f"{where}.id"),
        role=_role(message.get("role"), f"{where}.role"),
        content=_text(message.get("content"), f"{where}.content"),
        tool_calls=[tool_call_to_pb(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(calls)],
        tool_call_id=_ident(message.get("tool_call_id"), f"{where}.tool_call_id"),
    )


def messages_to_pb(messages: object, where: str) -> list[pb.Message]:
    items = _sequence(messages, where, "message mappings")
    return [message_to_pb(m, f"{where}[{i}]") for i, m in enumerate(items)]


def _enum_name(enum: Any, number: int, prefix: str) -> str:
    """``ROLE_USER`` -> "user"; a number this client does not know -> "unknown(N)"."""
    try:
        name = str(enum.Name(number))
    except ValueError:
        return _UNKNOWN.format(number)
    return name.removeprefix(prefix).lower()


def role_name(role: int) -> str:
    """The role's name as in message dicts: "user", ..., "unspecified" or "unknown(N)"."""
    known = _ROLE_NAMES.get(role)
    return known if known is not None else _enum_name(pb.Role, role, "ROLE_")


def message_from_pb(message: pb.Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": role_name(message.role), "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    if message.id:
        out["id"] = message.id
    out["tokens"] = message.tokens
    return out


def layers_to_pb(layers: object, where: str = "layers") -> pb.PromptLayers:
    if isinstance(layers, pb.PromptLayers):
        return layers
    if not isinstance(layers, Mapping):
        raise TypeError(f"{where} must be a mapping of layer name to text")
    unknown = [str(k) for k in layers if k not in LAYER_NAMES]
    if unknown:
        raise ValueError(
            f"{where} has no layer {', '.join(map(repr, unknown))}; "
            f"layers are {', '.join(LAYER_NAMES)}"
        )
    return pb.PromptLayers(**{k: _text(v, f"{where}.{k}") for k, v in layers.items()})


def summary_to_pb(summary: object, where: str = "compression_summary") -> pb.CompressionSummary:
    if isinstance(summary, pb.CompressionSummary):
        return summary
    if not isinstance(summary, Mapping):
        raise TypeError(f"{where} must be a mapping, not {_type_name(summary)}")
    ids = summary.get("message_ids")
    ids = () if ids is None else _sequence(ids, f"{where}.message_ids", "message ids")
    return pb.CompressionSummary(
        message_ids=[_ident(x, f"{where}.message_ids[{i}]") for i, x in enumerate(ids)],
        start_message_id=_ident(summary.get("start_message_id"), f"{where}.start_message_id"),
        summary=_text(summary.get("summary"), f"{where}.summary"),
    )


def _choice(value: object, choices: Mapping[str, _Enum], where: str) -> _Enum:
    if isinstance(value, str) and value in choices:
        return choices[value]
    raise ValueError(f"{where} must be one of {', '.join(map(repr, choices))}, not {value!r}")


# Requests ---------------------------------------------------------------------------


def assemble_prompt_request(
    identity: str,
    rules: str,
    skill: str,
    mode: str,
    memory: str,
    context: str,
    tokenizer: str,
) -> pb.AssemblePromptRequest:
    values = (identity, rules, skill, mode, memory, context)
    layers = {name: _text(v, name) for name, v in zip(LAYER_NAMES, values, strict=True)}
    return pb.AssemblePromptRequest(
        layers=pb.PromptLayers(**layers), tokenizer=_text(tokenizer, "tokenizer")
    )


def build_messages_request(
    user_message: str,
    *,
    token_budget: int,
    system_prompt: str | Sequence[str] | None,
    layers: Mapping[str, str] | None,
    history: Sequence[MessageLike],
    compression_summary: Mapping[str, Any] | None,
    tokenizer: str,
    output_format: OutputFormat,
    on_overflow: OverflowPolicy,
) -> pb.BuildMessagesRequest:
    if isinstance(token_budget, bool) or not isinstance(token_budget, int):
        raise TypeError(f"token_budget must be an int, not {_type_name(token_budget)}")
    request = pb.BuildMessagesRequest(
        user_message=_text(user_message, "user_message"),
        token_budget=token_budget,
        tokenizer=_text(tokenizer, "tokenizer"),
        output_format=_choice(output_format, _FORMATS, "output_format"),
        overflow_policy=_choice(on_overflow, _POLICIES, "on_overflow"),
        history=messages_to_pb(history, "history"),
    )
    if system_prompt is not None:
        prompts = (
            [system_prompt]
            if isinstance(system_prompt, str)
            else _sequence(system_prompt, "system_prompt", "strings")
        )
        request.system_prompts.extend(
            _text(p, f"system_prompt[{i}]") for i, p in enumerate(prompts)
        )
    if layers is not None:
        request.layers.CopyFrom(layers_to_pb(layers))
    if compression_summary is not None:
        request.compression_summary.CopyFrom(summary_to_pb(compression_summary))
    return request


def count_tokens_request(
    texts: str | Sequence[str],
    messages: Sequence[MessageLike],
    tokenizer: str,
) -> pb.CountTokensRequest:
    items = [texts] if isinstance(texts, str) else _sequence(texts, "texts", "strings")
    return pb.CountTokensRequest(
        tokenizer=_text(tokenizer, "tokenizer"),
        texts=[_text(t, f"texts[{i}]") for i, t in enumerate(items)],
        messages=messages_to_pb(messages, "messages"),
    )


def list_tokenizers_request() -> pb.ListTokenizersRequest:
    return pb.ListTokenizersRequest()


# Responses --------------------------------------------------------------------------


def _layers_from_pb(layers: Sequence[pb.LayerReport]) -> list[LayerInfo]:
    return [LayerInfo(x.name, x.included, x.tokens) for x in layers]


def _drop_reason(reason: int) -> str:
    return _enum_name(pb.DropReason, reason, _DROP_REASON_PREFIX)


def assembled_prompt(response: pb.AssemblePromptResponse) -> AssembledPrompt:
    return AssembledPrompt(
        system_prompt=response.system_prompt,
        layers=_layers_from_pb(response.layers),
        tokens=response.tokens,
        tokenizer=response.tokenizer,
    )


def build_report(report: pb.BuildReport) -> BuildReport:
    return BuildReport(
        tokenizer=report.tokenizer,
        token_budget=report.token_budget,
        system_tokens=report.system_tokens,
        summary_tokens=report.summary_tokens,
        history_tokens=report.history_tokens,
        user_message_tokens=report.user_message_tokens,
        total_tokens=report.total_tokens,
        required_over_budget=report.required_over_budget,
        summary_included=report.summary_included,
        history_kept=report.history_kept,
        dropped=[
            DroppedRange(x.start_index, x.count, _drop_reason(x.reason)) for x in report.dropped
        ],
        removed_tool_calls=[
            RemovedToolCall(x.index, x.tool_call_id) for x in report.removed_tool_calls
        ],
        layers=_layers_from_pb(report.layers),
        context_layers=[
            ContextLayerInfo(x.name, x.included, x.tokens, x.items_kept, x.items_dropped, x.note)
            for x in report.context_layers
        ],
    )


_JSON_TYPES: dict[type, str] = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _payload(payload_json: str) -> dict[str, Any] | None:
    """The provider body fragment; "" (neutral output) is ``None``."""
    if not payload_json:
        return None
    try:
        parsed = json.loads(payload_json)
    except (ValueError, RecursionError) as error:  # RecursionError: nested too deep
        raise InvalidResponseError(
            f"BuildMessagesResponse.payload_json is not valid JSON ({error})"
        ) from error
    if not isinstance(parsed, dict):
        raise InvalidResponseError(
            "BuildMessagesResponse.payload_json is not a JSON object "
            f"but a JSON {_JSON_TYPES.get(type(parsed), type(parsed).__name__)}"
        )
    return parsed


def build_result(response: pb.BuildMessagesResponse) -> BuildResult:
    return BuildResult(
        messages=[message_from_pb(m) for m in response.messages],
        payload=_payload(response.payload_json),
        report=build_report(response.report),
    )


def token_count(response: pb.CountTokensResponse) -> TokenCount:
    return TokenCount(
        tokenizer=response.tokenizer,
        text_tokens=list(response.text_tokens),
        message_tokens=list(response.message_tokens),
        total_tokens=response.total_tokens,
    )


def tokenizer_list(response: pb.ListTokenizersResponse) -> TokenizerList:
    return TokenizerList(
        tokenizers=[
            TokenizerInfo(t.name, t.available, t.message_overhead, t.description)
            for t in response.tokenizers
        ],
        default=response.default_tokenizer,
    )


# Chat turns -------------------------------------------------------------------------

#: A tool the model may call: ``{"name", "description", "parameters"}`` (parameters a
#: JSON schema dict or its JSON text), OpenAI's ``{"type": "function", "function": {...}}``,
#: or a generated ``cpb.ToolDefinition``.
ToolLike: TypeAlias = Mapping[str, Any] | cpb.ToolDefinition
#: ``{"tool_call_id", "content"}`` or a generated ``cpb.ToolResult``.
ToolResultLike: TypeAlias = Mapping[str, Any] | cpb.ToolResult

_MEMORY_MODES: dict[bool | None, int] = {
    None: pb.MEMORY_MODE_UNSPECIFIED,
    True: pb.MEMORY_MODE_ON,
    False: pb.MEMORY_MODE_OFF,
}


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where} must be an int, not {_type_name(value)}")
    return value


def _json_object_text(value: object, where: str) -> str:
    """A JSON schema: a mapping (encoded here), its JSON text as given, or None for ""."""
    if value is None or isinstance(value, str):
        return value or ""
    if not isinstance(value, Mapping):
        raise TypeError(f"{where} must be a mapping or JSON text, not {_type_name(value)}")
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise TypeError(f"{where} cannot be encoded as JSON: {error}") from error


def tool_to_pb(tool: object, where: str) -> cpb.ToolDefinition:
    if isinstance(tool, cpb.ToolDefinition):
        return tool
    if not isinstance(tool, Mapping):
        raise TypeError(f"{where} must be a mapping, not {_type_name(tool)}")
    source: Mapping[str, Any] = tool
    function = tool.get("function")
    if function is not None:
        if not isinstance(function, Mapping):
            raise TypeError(f"{where}.function must be a mapping, not {_type_name(function)}")
        source = function
    return cpb.ToolDefinition(
        name=_text(source.get("name"), f"{where}.name"),
        description=_text(source.get("description"), f"{where}.description"),
        parameters_json=_json_object_text(source.get("parameters"), f"{where}.parameters"),
    )


def tool_result_to_pb(result: object, where: str) -> cpb.ToolResult:
    if isinstance(result, cpb.ToolResult):
        return result
    if not isinstance(result, Mapping):
        raise TypeError(f"{where} must be a mapping, not {_type_name(result)}")
    return cpb.ToolResult(
        tool_call_id=_ident(result.get("tool_call_id"), f"{where}.tool_call_id"),
        content=_text(result.get("content"), f"{where}.content"),
    )


def stream_chat_request(
    user_message: str,
    *,
    user_id: str,
    session_id: str,
    scenario: str,
    host: str,
    variables: Mapping[str, str] | None,
    memory: bool | None,
    messages: Sequence[MessageLike],
    tools: Sequence[ToolLike],
    tool_results: Sequence[ToolResultLike],
    token_budget: int,
    tokenizer: str,
    model: str | None,
    temperature: float | None,
    max_output_tokens: int | None,
    stop: Sequence[str],
    refuse_over_limit: bool,
    title: str,
) -> cpb.StreamChatRequest:
    if memory not in _MEMORY_MODES:
        raise TypeError(f"memory must be True, False or None, not {memory!r}")
    if variables is not None and not isinstance(variables, Mapping):
        raise TypeError(f"variables must be a mapping, not {_type_name(variables)}")
    session = pb.SessionContext(
        user_id=_ident(user_id, "user_id"),
        session_id=_ident(session_id, "session_id"),
        scenario=_text(scenario, "scenario"),
        host=_text(host, "host"),
        variables={
            _text(k, "variables key"): _text(v, f"variables[{k!r}]")
            for k, v in (variables or {}).items()
        },
        memory=cast(pb.MemoryMode, _MEMORY_MODES[memory]),
    )
    request = cpb.StreamChatRequest(
        session=session,
        user_message=_text(user_message, "user_message"),
        messages=messages_to_pb(messages, "messages"),
        tools=[
            tool_to_pb(t, f"tools[{i}]")
            for i, t in enumerate(_sequence(tools, "tools", "tool mappings"))
        ],
        tool_results=[
            tool_result_to_pb(r, f"tool_results[{i}]")
            for i, r in enumerate(_sequence(tool_results, "tool_results", "result mappings"))
        ],
        token_budget=_int(token_budget, "token_budget"),
        tokenizer=_text(tokenizer, "tokenizer"),
        title=_text(title, "title"),
    )
    stops = [stop] if isinstance(stop, str) else _sequence(stop, "stop", "strings")
    if model or temperature is not None or max_output_tokens or stops:
        options = cpb.ModelOptions(
            model=_text(model, "model"),
            max_output_tokens=0
            if max_output_tokens is None
            else _int(max_output_tokens, "max_output_tokens"),
            stop=[_text(x, f"stop[{i}]") for i, x in enumerate(stops)],
        )
        if temperature is not None:
            if isinstance(temperature, bool) or not isinstance(temperature, int | float):
                raise TypeError(f"temperature must be a number, not {_type_name(temperature)}")
            options.temperature = float(temperature)
        request.model.CopyFrom(options)
    if refuse_over_limit:
        request.prompt_limit_policy = cpb.PROMPT_LIMIT_POLICY_REFUSE
    return request


def token_usage(usage: cpb.TokenUsage) -> TokenUsage:
    return TokenUsage(usage.prompt_tokens, usage.completion_tokens, usage.prompt_tokens_estimate)


def turn_status(status: int) -> str:
    """TURN_STATUS_OK -> "ok"; a number this client does not know -> "unknown(N)"."""
    return _enum_name(cpb.TurnStatus, status, "TURN_STATUS_")


def _tool_call_dict(call: pb.ToolCall) -> dict[str, str]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def chat_event(response: cpb.StreamChatResponse) -> ChatEvent | None:
    """The event of one StreamChat response; ``None`` for a kind this client does not know."""
    kind = response.WhichOneof("event")
    if kind == "text_delta":
        return TextDelta(response.text_delta.text, response.text_delta.step)
    if kind == "tool_call":
        call = response.tool_call.call
        return ToolCallEvent(call.id, call.name, call.arguments, response.tool_call.step)
    if kind == "usage":
        return Usage(token_usage(response.usage.usage), response.usage.step)
    if kind == "turn_started":
        started = response.turn_started
        return TurnStarted(
            session_id=started.session_id,
            turn_index=started.turn_index,
            user_message_id=started.user_message_id,
            prompt_tokens_estimate=started.prompt_tokens_estimate,
            prompt_tokens_warning=started.prompt_tokens_warning,
            context=build_report(started.context),
            provider=started.provider,
            model=started.model,
        )
    if kind == "turn_completed":
        done = response.turn_completed
        return TurnCompleted(
            assistant_message_id=done.assistant_message_id,
            final_text=done.final_text,
            status=turn_status(done.status),
            error_message=done.error_message,
            step_usage=token_usage(done.step_usage),
            turn_usage=token_usage(done.turn_usage),
            session_usage=token_usage(done.session_usage),
            duration_ms=done.duration_ms,
            pending_tool_calls=[_tool_call_dict(c) for c in done.pending_tool_calls],
        )
    return None


# Sessions ---------------------------------------------------------------------------


def _time(message: Any, name: str) -> datetime | None:
    """A Timestamp field as an aware UTC datetime; ``None`` when unset."""
    if not message.HasField(name):
        return None
    return cast(datetime, getattr(message, name).ToDatetime(tzinfo=UTC))


def session_from_pb(session: spb.Session) -> dict[str, Any]:
    return {
        "id": session.id,
        "user_id": session.user_id,
        "scenario": session.scenario,
        "host": session.host,
        "title": session.title,
        "metadata": dict(session.metadata),
        "create_time": _time(session, "create_time"),
        "update_time": _time(session, "update_time"),
        "message_count": session.message_count,
    }


def session_message_from_pb(stored: spb.SessionMessage) -> dict[str, Any]:
    """A stored message: the message dict plus where and how it is stored."""
    out = message_from_pb(stored.message)
    out.update(
        session_id=stored.session_id,
        seq=stored.seq,
        turn_index=stored.turn_index,
        is_collected=stored.is_collected,
        status=stored.status,
        create_time=_time(stored, "create_time"),
    )
    return out


def create_session_request(
    user_id: str,
    scenario: str,
    host: str,
    title: str,
    metadata: Mapping[str, str] | None,
) -> spb.CreateSessionRequest:
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping, not {_type_name(metadata)}")
    return spb.CreateSessionRequest(
        user_id=_ident(user_id, "user_id"),
        scenario=_text(scenario, "scenario"),
        host=_text(host, "host"),
        title=_text(title, "title"),
        metadata={
            _text(k, "metadata key"): _text(v, f"metadata[{k!r}]")
            for k, v in (metadata or {}).items()
        },
    )


def event_from_json(response: spb.ExportEventsResponse) -> dict[str, Any]:
    """One event of the log, decoded; a line that is not a JSON object is a server bug."""
    try:
        parsed = json.loads(response.json)
    except (ValueError, RecursionError) as error:
        raise InvalidResponseError(
            f"ExportEventsResponse.json is not valid JSON ({error})"
        ) from error
    if not isinstance(parsed, dict):
        raise InvalidResponseError("ExportEventsResponse.json is not a JSON object")
    return parsed


def get_session_request(user_id: str, session_id: str) -> spb.GetSessionRequest:
    return spb.GetSessionRequest(
        user_id=_ident(user_id, "user_id"), session_id=_ident(session_id, "session_id")
    )


def list_messages_request(
    user_id: str, session_id: str, page_size: int, page_token: str = ""
) -> spb.ListMessagesRequest:
    return spb.ListMessagesRequest(
        user_id=_ident(user_id, "user_id"),
        session_id=_ident(session_id, "session_id"),
        page_size=_int(page_size, "page_size"),
        page_token=page_token,
    )


def export_events_request(user_id: str, session_id: str, after: int) -> spb.ExportEventsRequest:
    return spb.ExportEventsRequest(
        user_id=_ident(user_id, "user_id"),
        session_id=_ident(session_id, "session_id"),
        after=_int(after, "after"),
    )
