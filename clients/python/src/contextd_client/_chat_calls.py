"""Requests and events of a chat turn (StreamChat)."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import EllipsisType
from typing import Any, Concatenate, Literal, ParamSpec, TypeAlias, TypeVar, cast

from ._context_calls import CacheLayout, build_report
from ._editing import compaction_to_pb, editing_to_pb
from ._fields import (
    _MEMORY_MODES,
    _cache_layout,
    _enum_name,
    _ident,
    _int,
    _sequence,
    _text,
    _type_name,
)
from ._messages import MessageLike, messages_to_pb
from ._parts import PartLike, user_message_fields
from ._pb import chat_pb2 as cpb
from ._pb import context_pb2 as pb
from ._types import (
    ChatEvent,
    TextDelta,
    TokenUsage,
    ToolCallEvent,
    TurnCompleted,
    TurnStarted,
    Usage,
)

#: A tool the model may call: ``{"name", "description", "parameters"}`` (parameters a
#: JSON schema dict or its JSON text), OpenAI's ``{"type": "function", "function": {...}}``,
#: or a generated ``cpb.ToolDefinition``.
ToolLike: TypeAlias = Mapping[str, Any] | cpb.ToolDefinition
#: ``{"tool_call_id", "content"}`` or a generated ``cpb.ToolResult``.
ToolResultLike: TypeAlias = Mapping[str, Any] | cpb.ToolResult
#: How the model is offered tools: its provider's own tool calling, or the tag protocol
#: for models without it (see ToolProtocol in chat.proto).
ToolProtocol: TypeAlias = Literal["native", "react"]
#: Which tools the model may call: "auto" (it decides), "none", "required" (at least
#: one of the host's tools), or ``{"function": NAME}`` (that tool).
ToolChoiceLike: TypeAlias = Literal["auto", "none", "required"] | Mapping[str, str]
#: The answer's shape: ``{"type": "json_object"}``, or ``{"type": "json_schema",
#: "schema": {...}}`` with optional ``name``, ``description`` and ``strict``.
ResponseFormatLike: TypeAlias = Mapping[str, Any]

_TOOL_PROTOCOLS: dict[str | None, cpb.ToolProtocol] = {
    None: cpb.TOOL_PROTOCOL_UNSPECIFIED,
    "native": cpb.TOOL_PROTOCOL_NATIVE,
    "react": cpb.TOOL_PROTOCOL_REACT,
}

_TOOL_CHOICE_MODES: dict[str, cpb.ToolChoiceMode] = {
    "auto": cpb.TOOL_CHOICE_MODE_AUTO,
    "none": cpb.TOOL_CHOICE_MODE_NONE,
    "required": cpb.TOOL_CHOICE_MODE_REQUIRED,
}
_RESPONSE_FORMAT_TYPES: dict[str, cpb.ResponseFormatType] = {
    "text": cpb.RESPONSE_FORMAT_TYPE_TEXT,
    "json_object": cpb.RESPONSE_FORMAT_TYPE_JSON_OBJECT,
    "json_schema": cpb.RESPONSE_FORMAT_TYPE_JSON_SCHEMA,
}
_RESPONSE_FORMAT_KEYS = frozenset({"type", "name", "description", "schema", "strict"})

_Client = TypeVar("_Client")
_Built = TypeVar("_Built")
_Result = TypeVar("_Result")
_Arguments = ParamSpec("_Arguments")


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


def tool_choice_to_pb(choice: object) -> cpb.ToolChoice:
    if isinstance(choice, str) and choice in _TOOL_CHOICE_MODES:
        return cpb.ToolChoice(mode=_TOOL_CHOICE_MODES[choice])
    if isinstance(choice, Mapping) and set(choice) == {"function"}:
        return cpb.ToolChoice(
            mode=cpb.TOOL_CHOICE_MODE_FUNCTION,
            function_name=_text(choice["function"], "tool_choice['function']"),
        )
    raise ValueError(
        "tool_choice must be 'auto', 'none', 'required' or {'function': NAME}, "
        f"not {_type_name(choice)}"
    )


def response_format_to_pb(shape: object) -> cpb.ResponseFormat:
    if not isinstance(shape, Mapping):
        raise TypeError(f"response_format must be a mapping, not {_type_name(shape)}")
    unknown = sorted(str(k) for k in shape if k not in _RESPONSE_FORMAT_KEYS)
    if unknown:
        raise ValueError(f"response_format: unknown keys {unknown[:5]}")
    kind = shape.get("type")
    if not isinstance(kind, str) or kind not in _RESPONSE_FORMAT_TYPES:
        raise ValueError("response_format['type'] must be 'text', 'json_object' or 'json_schema'")
    strict = shape.get("strict", False)
    if not isinstance(strict, bool):
        raise TypeError(f"response_format['strict'] must be a bool, not {_type_name(strict)}")
    return cpb.ResponseFormat(
        type=_RESPONSE_FORMAT_TYPES[kind],
        name=_text(shape.get("name", ""), "response_format['name']"),
        description=_text(shape.get("description", ""), "response_format['description']"),
        schema_json=_json_object_text(shape.get("schema"), "response_format['schema']"),
        strict=strict,
    )


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


@dataclass(frozen=True, slots=True)
class ChatTurn:
    """A chat turn's request and deadline (``...``: the client's), as the clients send it."""

    request: cpb.StreamChatRequest
    timeout: float | EllipsisType | None


def chat_turn(
    user_message: str | Sequence[PartLike],
    *,
    user_id: str,
    session_id: str = "",
    scenario: str = "",
    host: str = "",
    variables: Mapping[str, str] | None = None,
    memory: bool | None = None,
    memory_limit: int = 0,
    recent_sessions_limit: int = 0,
    cache_layout: CacheLayout | None = None,
    messages: Sequence[MessageLike] = (),
    tools: Sequence[ToolLike] = (),
    tool_results: Sequence[ToolResultLike] = (),
    tool_protocol: ToolProtocol | None = None,
    tool_choice: ToolChoiceLike | None = None,
    parallel_tool_calls: bool | None = None,
    prebuilt: bool = False,
    ephemeral: bool = False,
    answer_note: str = "",
    token_budget: int = 0,
    tokenizer: str = "",
    model: str | None = None,
    temperature: float | None = None,
    max_output_tokens: int | None = None,
    stop: Sequence[str] = (),
    response_format: ResponseFormatLike | None = None,
    refuse_over_limit: bool = False,
    title: str = "",
    mode: str = "",
    editing: Mapping[str, Any] | None = None,
    compaction: Mapping[str, Any] | None = None,
    timeout: float | EllipsisType | None = ...,
) -> ChatTurn:
    """The arguments of ``stream_chat`` of both clients, declared here once."""
    if memory not in _MEMORY_MODES:
        raise TypeError(f"memory must be True, False or None, not {memory!r}")
    if variables is not None and not isinstance(variables, Mapping):
        raise TypeError(f"variables must be a mapping, not {_type_name(variables)}")
    if not (tool_protocol is None or isinstance(tool_protocol, str)) or (
        tool_protocol not in _TOOL_PROTOCOLS
    ):
        raise ValueError(f"tool_protocol must be 'native', 'react' or None, not {tool_protocol!r}")
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
        memory_limit=_int(memory_limit, "memory_limit"),
        recent_sessions_limit=_int(recent_sessions_limit, "recent_sessions_limit"),
        cache_layout=_cache_layout(cache_layout, "cache_layout"),
    )
    request = cpb.StreamChatRequest(
        session=session,
        **user_message_fields(user_message),
        messages=messages_to_pb(messages, "messages"),
        tools=[
            tool_to_pb(t, f"tools[{i}]")
            for i, t in enumerate(_sequence(tools, "tools", "tool mappings"))
        ],
        tool_results=[
            tool_result_to_pb(r, f"tool_results[{i}]")
            for i, r in enumerate(_sequence(tool_results, "tool_results", "result mappings"))
        ],
        tool_protocol=_TOOL_PROTOCOLS[tool_protocol],
        token_budget=_int(token_budget, "token_budget"),
        tokenizer=_text(tokenizer, "tokenizer"),
        title=_text(title, "title"),
        mode=_text(mode, "mode"),
        answer_note=_text(answer_note, "answer_note"),
    )
    stops = [stop] if isinstance(stop, str) else _sequence(stop, "stop", "strings")
    if model or temperature is not None or max_output_tokens or stops or response_format:
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
        if response_format is not None:
            options.response_format.CopyFrom(response_format_to_pb(response_format))
        request.model.CopyFrom(options)
    if tool_choice is not None:
        request.tool_choice.CopyFrom(tool_choice_to_pb(tool_choice))
    if parallel_tool_calls is not None:
        if not isinstance(parallel_tool_calls, bool):
            raise TypeError(
                f"parallel_tool_calls must be a bool, not {_type_name(parallel_tool_calls)}"
            )
        request.parallel_tool_calls = parallel_tool_calls
    if not isinstance(prebuilt, bool):
        raise TypeError(f"prebuilt must be a bool, not {_type_name(prebuilt)}")
    request.prebuilt = prebuilt
    if not isinstance(ephemeral, bool):
        raise TypeError(f"ephemeral must be a bool, not {_type_name(ephemeral)}")
    request.ephemeral = ephemeral
    if refuse_over_limit:
        request.prompt_limit_policy = cpb.PROMPT_LIMIT_POLICY_REFUSE
    if editing is not None:
        request.editing.CopyFrom(editing_to_pb(editing))
    if compaction is not None:
        request.compaction.CopyFrom(compaction_to_pb(compaction))
    return ChatTurn(request, timeout)


def takes_arguments_of(
    builder: Callable[_Arguments, _Built],
) -> Callable[
    [Callable[[_Client, _Built], _Result]], Callable[Concatenate[_Client, _Arguments], _Result]
]:
    """Give a method ``m(self, built)`` the arguments of ``builder``: ``m(self, *args,
    **kwargs)`` calls ``builder(*args, **kwargs)`` and passes its result on.

    So the sync and async ``stream_chat`` share one declaration of their arguments,
    :func:`chat_turn`'s: type checkers see it through the ParamSpec, ``inspect.signature``
    and ``help`` through ``__signature__``.
    """

    def decorate(
        method: Callable[[_Client, _Built], _Result],
    ) -> Callable[Concatenate[_Client, _Arguments], _Result]:
        @functools.wraps(method)
        def call(self: _Client, /, *args: _Arguments.args, **kwargs: _Arguments.kwargs) -> _Result:
            return method(self, builder(*args, **kwargs))

        own = inspect.signature(method)
        arguments = inspect.signature(builder)
        call.__signature__ = arguments.replace(  # type: ignore[attr-defined]
            parameters=[next(iter(own.parameters.values())), *arguments.parameters.values()],
            return_annotation=own.return_annotation,
        )
        return call

    return decorate


def token_usage(usage: cpb.TokenUsage) -> TokenUsage:
    return TokenUsage(
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.prompt_tokens_estimate,
        usage.estimated,
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )


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
