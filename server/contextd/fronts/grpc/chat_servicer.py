"""ChatService over gRPC: a chat turn as a stream of events."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from contextd.app.chat import (
    AUTO,
    TEXT,
    ChatApp,
    ChatEvent,
    ChatTurnRequest,
    DeltaEvent,
    ModelOptions,
    ResponseFormat,
    TokenUsage,
    ToolCallEvent,
    ToolChoice,
    ToolSpec,
    TurnCompleted,
    TurnStarted,
    TurnStatus,
    UsageEvent,
)
from contextd.app.context import ContextApp
from contextd.app.scope import Caller
from contextd.core import json_text
from contextd.core.editing.compaction import NO_OPTIONS as NO_COMPACTION
from contextd.core.editing.compaction import CompactionOptions, check_compaction
from contextd.core.errors import InvalidArgument, Violations
from contextd.core.json_text import NESTING_RULE
from contextd.core.pipeline import is_tool_name
from contextd.fronts.grpc import convert
from contextd.fronts.grpc.auth import caller_for
from contextd.fronts.grpc.convert import PublicIds, check_id
from contextd.fronts.grpc.types import Context
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc

_STATUS = {
    TurnStatus.OK: cpb.TURN_STATUS_OK,
    TurnStatus.REQUIRES_ACTION: cpb.TURN_STATUS_REQUIRES_ACTION,
    TurnStatus.MAX_STEPS: cpb.TURN_STATUS_MAX_STEPS,
    TurnStatus.CANCELLED: cpb.TURN_STATUS_CANCELLED,
    TurnStatus.ERROR: cpb.TURN_STATUS_ERROR,
}
MAX_MODEL_NAME = 256
# Whether a prompt over max_prompt_tokens is refused (else trimmed).
_REFUSE_OVER_LIMIT = {
    cpb.PROMPT_LIMIT_POLICY_UNSPECIFIED: False,
    cpb.PROMPT_LIMIT_POLICY_TRIM: False,
    cpb.PROMPT_LIMIT_POLICY_REFUSE: True,
}
# Whether the turn uses the ReAct tags (else native tool calling).
_REACT = {
    cpb.TOOL_PROTOCOL_UNSPECIFIED: False,
    cpb.TOOL_PROTOCOL_NATIVE: False,
    cpb.TOOL_PROTOCOL_REACT: True,
}


@dataclass(frozen=True, slots=True)
class ChatServicer(chat_pb2_grpc.ChatServiceServicer):  # type: ignore[misc]
    _chat: ChatApp
    _context: ContextApp
    _ids: PublicIds

    async def StreamChat(
        self, request: cpb.StreamChatRequest, context: Context
    ) -> AsyncIterator[cpb.StreamChatResponse]:
        turn = self._turn_from_pb(request, context.time_remaining())
        # Yielded, not written with context.write: a write that loses the race with a
        # client cancel raises grpc's ExecuteBatchError into the handler, which would
        # then end as an unhandled error; grpc handles it itself for a yielded message.
        # aclosing: a call that ends early closes the turn now, not when it is collected.
        async with contextlib.aclosing(self._chat.run(turn)) as events:
            async for event in events:
                yield _event_to_pb(event, self._ids)

    def _turn_from_pb(
        self, request: cpb.StreamChatRequest, time_remaining: float | None
    ) -> ChatTurnRequest:
        v = Violations()
        session = request.session
        caller = Caller("")
        try:
            caller = caller_for(session.user_id, "session.user_id")
        except InvalidArgument as error:
            v.extend(error.violations)
        check_id(session.session_id, "session.session_id", v)
        tokenizer = convert.tokenizer_from_pb(request.tokenizer, self._context.tokenizers, v)
        limits = self._context.image_limits
        messages = convert.messages_from_pb(request.messages, "messages", v, limits)
        user_message, user_parts = convert.user_message_from_pb(
            request.user_message, request.user_message_parts, v, limits
        )
        memory = convert.memory_from_pb(session.memory, "session.memory", v)
        cache_layout = convert.cache_layout_from_pb(session.cache_layout, "session.cache_layout", v)
        editing = convert.editing_from_pb(
            request.editing, request.HasField("editing"), self._context.editing, "editing", v
        )
        compaction = _compaction_from_pb(request, v)
        tools = [_tool_from_pb(t, f"tools[{k}]", v) for k, t in enumerate(request.tools)]
        tool_choice = tool_choice_from_pb(request.tool_choice, "tool_choice", v)
        response_format = response_format_from_pb(
            request.model.response_format, "model.response_format", v
        )
        if len(request.model.model) > MAX_MODEL_NAME or not request.model.model.isprintable():
            # It names the model in spans, logs and the provider's request.
            v.add("model.model", f"at most {MAX_MODEL_NAME} printable characters")
        if request.model.max_output_tokens < 0:
            v.add("model.max_output_tokens", "must not be negative")
        if request.prompt_limit_policy not in _REFUSE_OVER_LIMIT:
            v.add("prompt_limit_policy", f"unknown policy {request.prompt_limit_policy}")
        if request.tool_protocol not in _REACT:
            v.add("tool_protocol", f"unknown tool protocol {request.tool_protocol}")
        v.raise_if_any()
        model = request.model
        return ChatTurnRequest(
            caller=caller,
            session_id=session.session_id,
            user_message=user_message,
            user_parts=user_parts,
            tokenizer=tokenizer,
            scenario=session.scenario,
            host=session.host,
            variables=dict(session.variables),
            memory=memory,
            cache_layout=cache_layout,
            messages=messages,
            tools=tools,
            tool_results=[(r.tool_call_id, r.content) for r in request.tool_results],
            token_budget=request.token_budget,
            refuse_over_limit=_REFUSE_OVER_LIMIT[request.prompt_limit_policy],
            model=ModelOptions(
                model=model.model,
                temperature=model.temperature if model.HasField("temperature") else None,
                max_output_tokens=model.max_output_tokens or None,
                stop=tuple(model.stop),
                response_format=response_format,
            ),
            title=request.title,
            react=_REACT[request.tool_protocol],
            deadline=None if time_remaining is None else time.monotonic() + time_remaining,
            mode=request.mode,
            editing=editing,
            compaction=compaction,
            prebuilt=request.prebuilt,
            ephemeral=request.ephemeral,
            answer_note=request.answer_note,
            tool_choice=tool_choice,
            parallel_tool_calls=(
                request.parallel_tool_calls if request.HasField("parallel_tool_calls") else None
            ),
        )


def _compaction_from_pb(request: cpb.StreamChatRequest, v: Violations) -> CompactionOptions:
    """The request's compaction, unset fields None (the server's settings)."""
    if not request.HasField("compaction"):
        return NO_COMPACTION
    c = request.compaction
    options = CompactionOptions(
        enabled=c.enabled if c.HasField("enabled") else None,
        trigger_tokens=c.trigger_tokens if c.HasField("trigger_tokens") else None,
        trigger_share=c.trigger_budget_share if c.HasField("trigger_budget_share") else None,
        keep_messages=c.keep_messages if c.HasField("keep_messages") else None,
        keep_turns=c.keep_turns if c.HasField("keep_turns") else None,
        model=c.model,
        prompt=c.prompt,
        timeout=c.timeout_seconds if c.HasField("timeout_seconds") else None,
    )
    check_compaction(options, "compaction", v)
    return options


def _tool_from_pb(tool: cpb.ToolDefinition, field: str, v: Violations) -> ToolSpec:
    parameters: object = {"type": "object"}
    if tool.parameters_json.strip():
        try:
            parameters = json_text.loads(tool.parameters_json)
        except ValueError:
            parameters = None
        if not isinstance(parameters, dict):
            v.add(f"{field}.parameters_json", f"must be a JSON schema object, {NESTING_RULE}")
            parameters = {"type": "object"}
    if not is_tool_name(tool.name):
        v.add(f"{field}.name", "1-64 letters, digits, '_' or '-'")
    return ToolSpec(tool.name, tool.description, parameters)  # type: ignore[arg-type]


def _fill_usage(out: cpb.TokenUsage, u: TokenUsage) -> None:
    out.SetInParent()  # set, zeros and all, as every usage of an event is
    out.prompt_tokens = u.prompt_tokens
    out.completion_tokens = u.completion_tokens
    out.prompt_tokens_estimate = u.prompt_tokens_estimate
    out.estimated = u.estimated
    out.cache_read_tokens = u.cache_read_tokens
    out.cache_write_tokens = u.cache_write_tokens


def _event_to_pb(event: ChatEvent, ids: PublicIds) -> cpb.StreamChatResponse:
    # Each event is filled in place: a keyword constructor copies every message it is
    # given into its parent, which costs as much again.
    response = cpb.StreamChatResponse()
    if isinstance(event, DeltaEvent):
        delta = response.text_delta
        delta.text = event.text
        delta.step = event.step
        return response
    if isinstance(event, ToolCallEvent):
        called = response.tool_call
        called.call.SetInParent()
        called.call.id = event.call.id
        called.call.name = event.call.name
        called.call.arguments = event.call.arguments
        called.step = event.step
        return response
    if isinstance(event, UsageEvent):
        usage = response.usage
        usage.SetInParent()
        _fill_usage(usage.usage, event.usage)
        usage.step = event.step
        return response
    if isinstance(event, TurnStarted):
        started = response.turn_started
        started.SetInParent()
        started.session_id = event.session_id
        started.turn_index = event.turn_index
        started.user_message_id = ids.message(event.user_message_id)
        started.prompt_tokens_estimate = event.prompt_tokens_estimate
        started.prompt_tokens_warning = event.prompt_tokens_warning
        context = started.context
        context.SetInParent()
        convert.fill_report(context, event.context)
        convert.add_context_layers(context.context_layers, event.context_layers)
        started.provider = event.provider
        started.model = event.model
        return response
    assert isinstance(event, TurnCompleted)
    done = response.turn_completed
    done.SetInParent()
    done.assistant_message_id = ids.message(event.assistant_message_id)
    done.final_text = event.final_text
    done.status = _STATUS[event.status]
    done.error_message = event.error_message
    _fill_usage(done.step_usage, event.step_usage)
    _fill_usage(done.turn_usage, event.turn_usage)
    _fill_usage(done.session_usage, event.session_usage)
    done.duration_ms = event.duration_ms
    for c in event.pending_tool_calls:
        done.pending_tool_calls.add(id=c.id, name=c.name, arguments=c.arguments)
    return response


# StreamChat's tool choice and structured output, from the protobuf to the app's.
_MODES = {
    cpb.TOOL_CHOICE_MODE_UNSPECIFIED: "auto",
    cpb.TOOL_CHOICE_MODE_AUTO: "auto",
    cpb.TOOL_CHOICE_MODE_NONE: "none",
    cpb.TOOL_CHOICE_MODE_REQUIRED: "required",
    cpb.TOOL_CHOICE_MODE_FUNCTION: "function",
}
_FORMATS = {
    cpb.RESPONSE_FORMAT_TYPE_UNSPECIFIED: "text",
    cpb.RESPONSE_FORMAT_TYPE_TEXT: "text",
    cpb.RESPONSE_FORMAT_TYPE_JSON_OBJECT: "json_object",
    cpb.RESPONSE_FORMAT_TYPE_JSON_SCHEMA: "json_schema",
}
DEFAULT_SCHEMA_NAME = "answer"
MAX_DESCRIPTION = 4000


def tool_choice_from_pb(choice: cpb.ToolChoice, field: str, v: Violations) -> ToolChoice:
    """The choice; whether a named function is one of the request's tools is the app's
    check (app/chat/request.py)."""
    mode = _MODES.get(choice.mode)
    if mode is None:
        v.add(f"{field}.mode", f"unknown mode {choice.mode}")
        return AUTO
    if mode == "function" and not choice.function_name:
        v.add(f"{field}.function_name", "required with mode FUNCTION")
    return ToolChoice(mode, choice.function_name)


def response_format_from_pb(rf: cpb.ResponseFormat, field: str, v: Violations) -> ResponseFormat:
    kind = _FORMATS.get(rf.type)
    if kind is None:
        v.add(f"{field}.type", f"unknown type {rf.type}")
        return TEXT
    if kind != "json_schema":
        for name, value in (("name", rf.name), ("schema_json", rf.schema_json)):
            if value:
                v.add(f"{field}.{name}", "only with type JSON_SCHEMA")
        return TEXT if kind == "text" else ResponseFormat("json_object")
    name = rf.name or DEFAULT_SCHEMA_NAME
    if not is_tool_name(name):
        v.add(f"{field}.name", "1-64 letters, digits, '_' or '-'")
    if len(rf.description) > MAX_DESCRIPTION:
        v.add(f"{field}.description", f"at most {MAX_DESCRIPTION} characters")
    schema: object = None
    with contextlib.suppress(ValueError):
        schema = json_text.loads(rf.schema_json)
    if not isinstance(schema, dict):
        v.add(f"{field}.schema_json", f"required: a JSON schema object, {NESTING_RULE}")
        schema = {}
    return ResponseFormat("json_schema", name, rf.description, schema, rf.strict)
