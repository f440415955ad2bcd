"""A Chat Completions request body into the native StreamChatRequest.

Every parameter of the API is either used, accepted without effect (a sampling or
billing hint that the turn's model options cannot carry), or refused with a 400 when
it asks for something contextd does not do (several choices, log probabilities, JSON
output, audio). A parameter the API does not define is refused, as OpenAI does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from contextd.core import json_text
from contextd.core.json_text import NESTING_RULE
from contextd.fronts.openai import json_fields as jf
from contextd.fronts.openai.errors import invalid
from contextd.fronts.openai.messages import Turn, inline_turn, session_turn
from contextd.fronts.openai.params import ParamMap
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb

# The header, and the metadata key, that name a contextd session; "new" starts one.
SESSION_HEADER = "X-Contextd-Session"
SESSION_KEY = "contextd_session"
TITLE_KEY = "contextd_title"
NEW_SESSION = "new"

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
    }
)


def _optional_object(value: object, param: str) -> object:
    return None if value is None else jf.obj(value, param)


# Accepted and type-checked, without effect on the turn.
HINTS: dict[str, Callable[[object, str], object]] = {
    "frequency_penalty": jf.optional_number,
    "presence_penalty": jf.optional_number,
    "top_p": jf.optional_number,
    "seed": jf.optional_int,
    "logit_bias": _optional_object,
    "store": jf.optional_bool,
    "service_tier": jf.optional_string,
    "prompt_cache_key": jf.optional_string,
    "prompt_cache_options": _optional_object,
    "prompt_cache_retention": jf.optional_string,
    "safety_identifier": jf.optional_string,
    "reasoning_effort": jf.optional_string,
    "verbosity": jf.optional_string,
    "prediction": _optional_object,
}
# Refused unless absent, null or the value that asks for nothing more than a plain answer.
PLAIN = {
    "n": (1,),
    "logprobs": (False,),
    "top_logprobs": (0,),
    "modalities": (["text"],),
    "response_format": ({"type": "text"},),
    "audio": (),
    "functions": (),
    "function_call": (),
    "web_search_options": (),
    "moderation": (),
}
KNOWN = USED | frozenset(HINTS) | frozenset(PLAIN)
_MAX_STOP = 4


@dataclass
class ChatRequest:
    """A translated request: the native call, and how to answer it."""

    native: cpb.StreamChatRequest
    params: ParamMap
    stream: bool
    include_usage: bool
    session_mode: bool


def parse_body(body: bytes) -> jf.JsonObject:
    """The request body as a JSON object (400 for anything else)."""
    try:
        value = json_text.loads(body)
    except json_text.TooDeep:
        raise invalid(
            None, f"the request body must be {NESTING_RULE}", code="invalid_json"
        ) from None
    except ValueError:
        raise invalid(None, "the request body is not valid JSON", code="invalid_json") from None
    if not isinstance(value, dict):
        raise invalid(None, "the request body must be a JSON object", code="invalid_json")
    return value


def translate(body: jf.JsonObject, headers: Mapping[str, str]) -> ChatRequest:
    """The native request for ``body``; ``headers`` may name the session."""
    jf.known_keys(body, KNOWN, "")
    for name, check in HINTS.items():
        check(body.get(name), name)
    for name, allowed in PLAIN.items():
        value = body.get(name)
        if value is not None and value not in allowed:
            raise invalid(name, "not supported by contextd", code="unsupported_parameter")
    params = ParamMap()
    metadata = _metadata(body.get("metadata"))
    session = _session(headers.get(SESSION_HEADER), metadata.get(SESSION_KEY))
    params.add("session.user_id", "user")
    named_by = SESSION_HEADER if headers.get(SESSION_HEADER) else f"metadata.{SESSION_KEY}"
    params.add("session.session_id", named_by)
    turn: Turn = (
        session_turn(body.get("messages"), params)
        if session is not None
        else inline_turn(body.get("messages"), params)
    )
    native = cpb.StreamChatRequest(
        session=pb.SessionContext(
            user_id=jf.optional_string(body.get("user"), "user"),
            session_id="" if session in (None, NEW_SESSION) else session,
        ),
        user_message=turn.user_message,
        user_message_parts=turn.user_parts,
        messages=turn.history,
        tool_results=turn.tool_results,
        title=metadata.get(TITLE_KEY, "") if session == NEW_SESSION else "",
    )
    _model_options(body, native.model, params)
    if _tool_choice(body.get("tool_choice")) != "none":
        native.tools.extend(_tools(body.get("tools"), params))
    jf.optional_bool(body.get("parallel_tool_calls"), "parallel_tool_calls")
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


def _session(header: str | None, key: str | None) -> str | None:
    """The named session ("new" for a new one), or None for an inline turn."""
    if header is not None and key is not None and header.strip() != key.strip():
        raise invalid(
            f"metadata.{SESSION_KEY}", f"names another session than the {SESSION_HEADER} header"
        )
    named = (header if header is not None else key or "").strip()
    return named or None


def _model_options(body: jf.JsonObject, out: cpb.ModelOptions, params: ParamMap) -> None:
    """The model named (passed on as the turn's model), temperature, output tokens, stop."""
    model = jf.string(body.get("model"), "model")
    out.model = model
    params.add("model.model", "model")
    temperature = jf.optional_number(body.get("temperature"), "temperature")
    if temperature is not None:
        if not 0 <= temperature <= 2:
            raise invalid("temperature", "must be from 0 to 2")
        out.temperature = temperature
        params.add("model.temperature", "temperature")
    for name in ("max_completion_tokens", "max_tokens"):  # the newer one wins
        tokens = jf.optional_int(body.get(name), name)
        if tokens is None:
            continue
        if not 1 <= tokens <= 2**31 - 1:
            raise invalid(name, "must be a positive integer")
        out.max_output_tokens = tokens
        params.add("model.max_output_tokens", name)
        break
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else jf.array(stop, "stop")
        if len(stops) > _MAX_STOP:
            raise invalid("stop", f"at most {_MAX_STOP} sequences")
        out.stop.extend(jf.string(s, f"stop[{k}]") for k, s in enumerate(stops))
        params.add("model.stop", "stop")


def _tool_choice(raw: object) -> str:
    """``auto`` (also when absent) or ``none``; forcing a call is not supported."""
    if raw is None or raw in ("auto", "none"):
        return str(raw or "auto")
    if isinstance(raw, str | dict):
        raise invalid(
            "tool_choice",
            "only auto and none are supported (the model decides)",
            code="unsupported_parameter",
        )
    raise invalid("tool_choice", "expected a string or an object", code="invalid_type")


def _tools(raw: object, params: ParamMap) -> list[cpb.ToolDefinition]:
    if raw is None:
        return []
    tools = []
    for k, item in enumerate(jf.array(raw, "tools")):
        at = f"tools[{k}]"
        tool = jf.obj(item, at)
        if tool.get("type") != "function":
            raise invalid(f"{at}.type", "only function tools are supported")
        jf.known_keys(tool, frozenset({"type", "function"}), at)
        function = jf.obj(tool.get("function"), f"{at}.function")
        jf.known_keys(
            function, frozenset({"name", "description", "parameters", "strict"}), f"{at}.function"
        )
        jf.optional_bool(function.get("strict"), f"{at}.function.strict")
        parameters = function.get("parameters")
        params.add(f"{at}.name", f"{at}.function.name")
        params.add(f"{at}.parameters_json", f"{at}.function.parameters")
        tools.append(
            cpb.ToolDefinition(
                name=jf.string(function.get("name"), f"{at}.function.name"),
                description=jf.optional_string(
                    function.get("description"), f"{at}.function.description"
                ),
                parameters_json=""
                if parameters is None
                else json.dumps(jf.obj(parameters, f"{at}.function.parameters")),
            )
        )
    return tools
