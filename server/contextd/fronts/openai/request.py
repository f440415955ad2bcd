"""A Chat Completions request body into the native StreamChatRequest.

Every parameter of the API is either used, accepted without effect (a sampling or
billing hint that the turn's model options cannot carry), or refused with a 400 when
it asks for something contextd does not do (several choices, log probabilities,
audio). A parameter the API does not define is refused, as OpenAI does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from contextd.fronts.chat_http import json_fields as jf
from contextd.fronts.chat_http import model_options
from contextd.fronts.chat_http.params import ParamMap
from contextd.fronts.chat_http.tools import ToolShape, function_tools
from contextd.fronts.chat_http.turn import Turn, named_session, turn_request
from contextd.fronts.openai import choices
from contextd.fronts.openai.messages import inline_turn, session_turn
from contextd.v1 import chat_pb2 as cpb

USED = frozenset(
    {
        "messages",
        "model",
        "stream",
        "stream_options",
        "temperature",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "user",
        "metadata",
        "response_format",
    }
)


# Accepted and type-checked, without effect on the turn.
HINTS: dict[str, Callable[[object, str], object]] = {
    "frequency_penalty": jf.optional_number,
    "presence_penalty": jf.optional_number,
    "top_p": jf.optional_number,
    "seed": jf.optional_int,
    "logit_bias": jf.optional_object,
    "store": jf.optional_bool,
    "service_tier": jf.optional_string,
    "prompt_cache_key": jf.optional_string,
    "prompt_cache_options": jf.optional_object,
    "prompt_cache_retention": jf.optional_string,
    "safety_identifier": jf.optional_string,
    "reasoning_effort": jf.optional_string,
    "verbosity": jf.optional_string,
    "prediction": jf.optional_object,
}
# Refused unless absent, null or the value that asks for nothing more than a plain answer.
PLAIN = {
    "n": (1,),
    "logprobs": (False,),
    "top_logprobs": (0,),
    "modalities": (["text"],),
    "audio": (),
    "functions": (),
    "function_call": (),
    "web_search_options": (),
    "moderation": (),
}
_MAX_STOP = 4
TOOL_SHAPE = ToolShape(
    types=("function",),
    wrong_type="only function tools are supported",
    wrong_type_code=None,
    keys=frozenset({"type", "function"}),
    nested="function",
    nested_keys=frozenset({"name", "description", "parameters", "strict"}),
)


@dataclass
class ChatRequest:
    """A translated request: the native call, and how to answer it."""

    native: cpb.StreamChatRequest
    params: ParamMap
    stream: bool
    include_usage: bool
    session_mode: bool


def translate(raw: bytes, headers: Mapping[str, str]) -> ChatRequest:
    """The native request for the body ``raw``; ``headers`` may name the session."""
    body = jf.parameters(raw, USED, HINTS, PLAIN)
    params = ParamMap()
    metadata = _metadata(body.get("metadata"))
    session = named_session(headers, metadata)
    params.add("session.user_id", "user")
    turn: Turn = (
        session_turn(body.get("messages"), params)
        if session is not None
        else inline_turn(body.get("messages"), params)
    )
    user = jf.optional_string(body.get("user"), "user")
    native = turn_request(turn, user, session, metadata, headers, params)
    _model_options(body, native.model, params)
    native.tools.extend(function_tools(body.get("tools"), params, TOOL_SHAPE))
    choices.tool_choice(body.get("tool_choice"), "tool_choice", native, params)
    choices.parallel_tool_calls(body.get("parallel_tool_calls"), "parallel_tool_calls", native)
    choices.response_format(
        body.get("response_format"), "response_format", native.model, params, nested=True
    )
    stream = jf.optional_bool(body.get("stream"), "stream") or False
    include_usage = False
    options = body.get("stream_options")
    if options is not None:
        options = jf.obj(options, "stream_options")
        jf.known_keys(
            options, frozenset({"include_usage", "include_obfuscation"}), "stream_options"
        )
        include_usage = bool(
            jf.optional_bool(options.get("include_usage"), "stream_options.include_usage")
        )
        jf.optional_bool(options.get("include_obfuscation"), "stream_options.include_obfuscation")
    return ChatRequest(native, params, stream, include_usage, session is not None)


def _metadata(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    metadata = jf.obj(raw, "metadata")
    return {key: jf.string(value, f"metadata.{key}") for key, value in metadata.items()}


def _model_options(body: jf.JsonObject, out: cpb.ModelOptions, params: ParamMap) -> None:
    """The model named (passed on as the turn's model), temperature, output tokens, stop."""
    model_options.model(body, out, params)
    model_options.temperature(body, out, params, highest=2)
    for name in ("max_completion_tokens", "max_tokens"):  # the newer one wins
        if model_options.output_tokens(body, name, out, params):
            break
    model_options.stop(body, "stop", out, params, _MAX_STOP, one_string=True)
