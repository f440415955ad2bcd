"""A Messages request body into the native StreamChatRequest.

Every parameter of the API is either used, accepted without effect (a hint the turn's
model options cannot carry), or refused with a 400 when it asks for something contextd
does not do (a container, MCP servers of the API's own). A parameter the API does not
define is refused, as Anthropic does. ``tool_choice`` and structured output
(``output_config.format``) are carried to whatever provider runs the turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from contextd.fronts.anthropic.blocks import inline_turn, session_turn, system_prompt
from contextd.fronts.anthropic.editing import (
    ContextManagement,
    ThinkingLeftOut,
    context_management,
    thinking_left_out,
)
from contextd.fronts.chat_http import json_fields as jf
from contextd.fronts.chat_http import model_options
from contextd.fronts.chat_http.failure import invalid
from contextd.fronts.chat_http.params import ParamMap
from contextd.fronts.chat_http.tools import ToolShape, function_tools
from contextd.fronts.chat_http.turn import named_session, turn_request
from contextd.v1 import chat_pb2 as cpb

USED = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "system",
        "stream",
        "stop_sequences",
        "temperature",
        "tools",
        "tool_choice",
        "metadata",
        "context_management",
    }
)


# Accepted and type-checked, without effect on the turn.
HINTS: dict[str, Callable[[object, str], object]] = {
    "top_k": jf.optional_int,
    "top_p": jf.optional_number,
    "thinking": jf.optional_object,
    "service_tier": jf.optional_string,
    "cache_control": jf.optional_object,
    "inference_geo": jf.optional_string,
    "speed": jf.optional_string,
    "output_config": jf.optional_object,
}
# Refused unless absent or null: services of Anthropic's own platform.
REFUSED: dict[str, tuple[object, ...]] = dict.fromkeys(
    ("container", "mcp_servers", "fallbacks", "thread", "compaction", "diagnostics"), ()
)
# Names the contextd user, before metadata.user_id: hosts built on Claude Code send an
# identifier of their own there.
USER_HEADER = "X-Contextd-User"
_MAX_STOP = 32
_CHOICES = {
    "auto": cpb.TOOL_CHOICE_MODE_AUTO,
    "any": cpb.TOOL_CHOICE_MODE_REQUIRED,
    "tool": cpb.TOOL_CHOICE_MODE_FUNCTION,
    "none": cpb.TOOL_CHOICE_MODE_NONE,
}
# The host's client tools (``custom``); the API's server tools are refused. Only name,
# description and input_schema are used.
TOOL_SHAPE = ToolShape(
    types=(None, "custom"),
    wrong_type="only client tools (custom) are supported",
    wrong_type_code=None,
    keys=frozenset(
        {
            *("name", "description", "input_schema", "type", "cache_control", "strict"),
            *("input_examples", "allowed_callers", "defer_loading", "eager_input_streaming"),
        }
    ),
    schema="input_schema",
    schema_required=True,
)


@dataclass
class MessagesRequest:
    """A translated request: the native call, and how to answer it."""

    native: cpb.StreamChatRequest
    params: ParamMap
    stream: bool
    session_mode: bool
    # The edits asked for, to report what they did; None when none is.
    editing: ContextManagement | None
    # The thinking blocks sent back, which the model is not shown.
    thinking: ThinkingLeftOut


def translate(raw: bytes, headers: Mapping[str, str]) -> MessagesRequest:
    """The native request for the body ``raw``; ``headers`` may name the session."""
    body = jf.parameters(raw, USED, HINTS, REFUSED)
    params = ParamMap()
    metadata = _metadata(body.get("metadata"))
    session = named_session(headers, metadata)
    user = headers.get(USER_HEADER)
    params.add("session.user_id", USER_HEADER if user is not None else "metadata.user_id")
    system = system_prompt(body.get("system"))
    turn = (
        session_turn(body.get("messages"), params)
        if session is not None
        else inline_turn(system, body.get("messages"), params)
    )
    if user is None:
        user = metadata.get("user_id", "")
    native = turn_request(turn, user, session, metadata, headers, params)
    _model_options(body, native.model, params)
    _output_format(body.get("output_config"), native.model, params)
    native.tools.extend(tool_definitions(body.get("tools"), params))
    tool_choice(body.get("tool_choice"), native, params)
    editing = context_management(body.get("context_management"), params)
    if editing is not None and editing.tool_uses is not None:
        native.editing.CopyFrom(editing.tool_uses)
    # Session mode takes the last (user) message only: it has no thinking.
    asked = editing is not None and editing.thinking and session is None
    thinking = thinking_left_out(body["messages"]) if asked else ThinkingLeftOut()
    stream = jf.optional_bool(body.get("stream"), "stream") or False
    return MessagesRequest(native, params, stream, session is not None, editing, thinking)


def _metadata(raw: object) -> dict[str, str]:
    """``metadata``: ``user_id`` (the contextd user unless the header names one), and
    contextd's session keys."""
    if raw is None:
        return {}
    metadata = jf.obj(raw, "metadata")
    return {
        key: jf.optional_string(value, f"metadata.{key}")
        for key, value in metadata.items()
        if value is not None
    }


def _model_options(body: jf.JsonObject, out: cpb.ModelOptions, params: ParamMap) -> None:
    """The model named (passed on as the turn's model), output tokens, temperature, stop."""
    model_options.model(body, out, params)
    model_options.output_tokens(body, "max_tokens", out, params, required=True)
    model_options.temperature(body, out, params, highest=1)
    model_options.stop(body, "stop_sequences", out, params, _MAX_STOP)


def tool_choice(raw: object, out: cpb.StreamChatRequest, params: ParamMap) -> None:
    """``auto``, ``any`` (some host tool), ``tool`` (the one named) or ``none``; and
    ``disable_parallel_tool_use``."""
    if raw is None:
        return
    choice = jf.obj(raw, "tool_choice")
    kind = choice.get("type")
    if kind not in _CHOICES:
        raise invalid("tool_choice.type", "must be auto, any, tool or none")
    keys = {"type", "disable_parallel_tool_use"} | ({"name"} if kind == "tool" else set())
    jf.known_keys(choice, frozenset(keys), "tool_choice")
    params.add("tool_choice.mode", "tool_choice.type")
    out.tool_choice.mode = _CHOICES[str(kind)]
    if kind == "tool":
        out.tool_choice.function_name = jf.string(choice.get("name"), "tool_choice.name")
        params.add("tool_choice.function_name", "tool_choice.name")
    single = jf.optional_bool(
        choice.get("disable_parallel_tool_use"), "tool_choice.disable_parallel_tool_use"
    )
    if single:
        out.parallel_tool_calls = False


def _output_format(raw: object, out: cpb.ModelOptions, params: ParamMap) -> None:
    """``output_config``: its ``format`` (a JSON schema the answer follows) is structured
    output; ``effort`` is accepted without effect."""
    if raw is None:
        return
    config = jf.obj(raw, "output_config")
    jf.known_keys(config, frozenset({"effort", "format"}), "output_config")
    jf.optional_string(config.get("effort"), "output_config.effort")
    if config.get("format") is None:
        return
    at = "output_config.format"
    fmt = jf.obj(config["format"], at)
    if fmt.get("type") != "json_schema":
        raise invalid(f"{at}.type", "must be json_schema")
    jf.known_keys(fmt, frozenset({"type", "schema"}), at)
    out.response_format.type = cpb.RESPONSE_FORMAT_TYPE_JSON_SCHEMA
    out.response_format.schema_json = json.dumps(jf.obj(fmt.get("schema"), f"{at}.schema"))
    params.add("model.response_format.schema_json", f"{at}.schema")


def tool_definitions(raw: object, params: ParamMap) -> list[cpb.ToolDefinition]:
    """The host's client tools (``custom``); the API's server tools are refused."""
    return function_tools(raw, params, TOOL_SHAPE)
