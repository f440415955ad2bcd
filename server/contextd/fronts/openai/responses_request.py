"""A Responses API request body (``POST /v1/responses``) into the native StreamChatRequest.

Without ``previous_response_id`` or ``conversation`` the request is inline: its
``input`` items are the host's own list (``instructions`` first, as the system
prompt), run in prebuilt mode; a list that ends with ``function_call_output`` items
goes on after them. With either, the request is the next turn of that contextd session:
only its new items are used (the last user message, or the function call outputs that
end the list). ``store: false`` runs the inline turn ephemeral: nothing of it is
stored, and its id retrieves nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from contextd.core import json_text
from contextd.fronts.chat_http import json_fields as jf
from contextd.fronts.chat_http import model_options
from contextd.fronts.chat_http.failure import excerpt, invalid
from contextd.fronts.chat_http.params import ParamMap
from contextd.fronts.chat_http.tools import ToolShape, function_tools
from contextd.fronts.chat_http.turn import trailing_results
from contextd.fronts.openai import choices
from contextd.fronts.openai.messages import image_part
from contextd.fronts.openai.response_ids import ResponseId
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb


def _optional_object(value: object, param: str) -> object:
    return None if value is None else jf.obj(value, param)


def _optional_array(value: object, param: str) -> object:
    return None if value is None else jf.array(value, param)


USED = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "text",
        "stream",
        "stream_options",
        "temperature",
        "max_output_tokens",
        "previous_response_id",
        "conversation",
        "store",
        "metadata",
        "user",
    }
)
# Accepted and type-checked, without effect on the turn.
HINTS: dict[str, Callable[[object, str], object]] = {
    "top_p": jf.optional_number,
    "service_tier": jf.optional_string,
    "prompt_cache_key": jf.optional_string,
    "prompt_cache_retention": jf.optional_string,
    "safety_identifier": jf.optional_string,
    "reasoning": _optional_object,
    "include": _optional_array,
    "truncation": jf.optional_string,
    "max_tool_calls": jf.optional_int,
}
# Refused unless absent, null or the value that asks for nothing more.
PLAIN: dict[str, tuple[object, ...]] = {
    "background": (False,),
    "top_logprobs": (0,),
    "prompt": (),
}
_ROLES = {
    "system": pb.ROLE_SYSTEM,
    "developer": pb.ROLE_SYSTEM,
    "user": pb.ROLE_USER,
    "assistant": pb.ROLE_ASSISTANT,
}
_MESSAGE_KEYS = frozenset({"type", "role", "content", "id", "status", "phase"})
_CALL_KEYS = frozenset({"type", "call_id", "name", "arguments", "id", "status"})
_OUTPUT_KEYS = frozenset({"type", "call_id", "output", "id", "status"})
# Function tools, flat as the Responses API gives them.
TOOL_SHAPE = ToolShape(
    types=("function",),
    wrong_type="only function tools are supported",
    wrong_type_code="unsupported_parameter",
    keys=frozenset({"type", "name", "description", "parameters", "strict"}),
)
_TEXT_PARTS = ("input_text", "output_text", "refusal")
_PART_KEYS = {
    "input_text": frozenset({"type", "text"}),
    "output_text": frozenset({"type", "text", "annotations", "logprobs"}),
    "refusal": frozenset({"type", "refusal"}),
    "input_image": frozenset({"type", "image_url", "detail", "file_id"}),
}


@dataclass
class ResponsesRequest:
    """A translated request: the native call, and what the response object repeats."""

    native: cpb.StreamChatRequest
    params: ParamMap
    body: jf.JsonObject
    stream: bool
    store: bool
    previous: ResponseId | None
    conversation: str
    created_at: int  # when the request came, in seconds

    @property
    def session_mode(self) -> bool:
        return self.previous is not None or bool(self.conversation)


def translate(raw: bytes) -> ResponsesRequest:
    body = jf.parameters(raw, USED, HINTS, PLAIN)
    params = ParamMap()
    user = jf.optional_string(body.get("user"), "user")
    previous = _previous(body.get("previous_response_id"))
    conversation = _conversation(body.get("conversation"))
    if previous is not None and conversation:
        raise invalid("conversation", "give either previous_response_id or conversation")
    store = jf.optional_bool(body.get("store"), "store")
    store = True if store is None else store
    if not store and (previous is not None or conversation):
        raise invalid("store", "a response that continues a stored one is stored too")
    session_id = previous.session_id if previous is not None else conversation
    if previous is not None and not user:
        user = previous.user_id  # the user of the response continued
    params.add("session.user_id", "user")
    params.add("session.session_id", "previous_response_id" if previous else "conversation")
    native = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=session_id),
        prebuilt=not session_id,
        ephemeral=not store,
    )
    items = _items(body.get("input"))
    instructions = jf.optional_string(body.get("instructions"), "instructions")
    if session_id:
        _session_input(items, native, params)
    else:
        if instructions:
            native.messages.append(pb.Message(role=pb.ROLE_SYSTEM, content=instructions))
        _inline_input(items, native, params)
    _model_options(body, native.model, params)
    native.tools.extend(function_tools(body.get("tools"), params, TOOL_SHAPE))
    choices.tool_choice(body.get("tool_choice"), "tool_choice", native, params)
    choices.parallel_tool_calls(body.get("parallel_tool_calls"), "parallel_tool_calls", native)
    text = body.get("text")
    if text is not None:
        text = jf.obj(text, "text")
        jf.known_keys(text, frozenset({"format", "verbosity"}), "text")
        jf.optional_string(text.get("verbosity"), "text.verbosity")
        choices.response_format(
            text.get("format"), "text.format", native.model, params, nested=False
        )
    metadata = body.get("metadata")
    if metadata is not None:
        for key, value in jf.obj(metadata, "metadata").items():
            jf.string(value, f"metadata.{key}")
    stream = jf.optional_bool(body.get("stream"), "stream") or False
    options = body.get("stream_options")
    if options is not None:
        options = jf.obj(options, "stream_options")
        jf.known_keys(options, frozenset({"include_obfuscation"}), "stream_options")
        jf.optional_bool(options.get("include_obfuscation"), "stream_options.include_obfuscation")
    created_at = int(time.time())
    if store:
        # Kept with the stored answer, for GET /v1/responses/{id} to repeat.
        native.answer_note = request_note(body, created_at)
        params.add("answer_note", "instructions")
    return ResponsesRequest(native, params, body, stream, store, previous, conversation, created_at)


def _previous(raw: object) -> ResponseId | None:
    if raw is None:
        return None
    found = ResponseId.parse(jf.string(raw, "previous_response_id"))
    if found is None:
        raise invalid("previous_response_id", "not a response of this server", code="not_found")
    return found


def _conversation(raw: object) -> str:
    """The contextd session a ``conversation`` (its id, or ``{"id"}``) names."""
    if raw is None:
        return ""
    if isinstance(raw, dict):
        jf.known_keys(raw, frozenset({"id"}), "conversation")
        return jf.string(raw.get("id"), "conversation.id")
    return jf.string(raw, "conversation")


def _items(raw: object) -> list[jf.JsonObject]:
    """The input as items: a string is one user message."""
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    items = jf.array(raw, "input")
    if not items:
        raise invalid("input", "at least one item is required", code="empty_array")
    return [jf.obj(item, f"input[{k}]") for k, item in enumerate(items)]


def _kind(item: jf.JsonObject, k: int) -> str:
    kind = item.get("type", "message")
    if kind == "message" or (kind is None and "role" in item):
        return "message"
    if kind in ("function_call", "function_call_output", "reasoning"):
        return str(kind)
    raise invalid(f"input[{k}].type", f"unsupported item type {excerpt(kind)}")


def _inline_input(items: list[jf.JsonObject], out: cpb.StreamChatRequest, params: ParamMap) -> None:
    """The whole list: history, then the user message; or all history when it ends with
    function call outputs."""
    kinds = [_kind(item, k) for k, item in enumerate(items)]
    last = max((k for k, kind in enumerate(kinds) if kind != "reasoning"), default=-1)
    if last < 0:
        raise invalid("input", "no message or function call output to answer")
    ends_with_user = kinds[last] == "message" and items[last].get("role") == "user"
    if not ends_with_user and kinds[last] != "function_call_output":
        raise invalid(
            f"input[{last}]", "the last item must be a user message or a function call output"
        )
    for k, (item, kind) in enumerate(zip(items, kinds, strict=True)):
        if k == last and ends_with_user:
            _user_input(item, k, out, params)
        elif kind == "message":
            native = f"messages[{len(out.messages)}]"
            params.add(native, f"input[{k}]")
            out.messages.append(_message(item, k, params, native))
        elif kind == "function_call":
            _function_call(item, k, out.messages, params)
        elif kind == "function_call_output":
            params.add(f"messages[{len(out.messages)}]", f"input[{k}]")
            call_id, content = _function_output(item, k)
            out.messages.append(
                pb.Message(role=pb.ROLE_TOOL, content=content, tool_call_id=call_id)
            )
        # Reasoning items are the model's own notes of a call: not sent again.


def _session_input(
    items: list[jf.JsonObject], out: cpb.StreamChatRequest, params: ParamMap
) -> None:
    """Only what is new: the last user message, or the function call outputs that end
    the list (the session holds the rest)."""
    last = len(items) - 1
    kind = _kind(items[last], last)
    if kind == "message" and items[last].get("role") == "user":
        _user_input(items[last], last, out, params)
        return
    if kind != "function_call_output":
        raise invalid(
            f"input[{last}]", "the last item must be a user message or a function call output"
        )
    outputs = trailing_results(len(items), lambda k: _kind(items[k], k) == kind)
    for n, k in enumerate(outputs):
        params.add(f"tool_results[{n}]", f"input[{k}]")
        call_id, content = _function_output(items[k], k)
        out.tool_results.append(cpb.ToolResult(tool_call_id=call_id, content=content))


def _message(item: jf.JsonObject, k: int, params: ParamMap, native: str) -> pb.Message:
    at = f"input[{k}]"
    jf.known_keys(item, _MESSAGE_KEYS, at)
    role = item.get("role")
    if role not in _ROLES:
        raise invalid(f"{at}.role", f"unknown role {excerpt(role)}")
    out = pb.Message(role=_ROLES[str(role)])
    content = item.get("content")
    if role == "user" and isinstance(content, list):
        out.parts.extend(_parts(content, f"{at}.content", params, f"{native}.parts"))
    else:
        out.content = _text(content, f"{at}.content")
    return out


def _user_input(item: jf.JsonObject, k: int, out: cpb.StreamChatRequest, params: ParamMap) -> None:
    at = f"input[{k}]"
    jf.known_keys(item, _MESSAGE_KEYS, at)
    content = item.get("content")
    params.add("user_message", f"{at}.content")
    if isinstance(content, list):
        out.user_message_parts.extend(
            _parts(content, f"{at}.content", params, "user_message_parts")
        )
    else:
        out.user_message = jf.string(content, f"{at}.content")


def _text(content: object, at: str) -> str:
    """A string, or text parts joined."""
    if not isinstance(content, list):
        return jf.optional_string(content, at)
    texts = []
    for j, raw in enumerate(content):
        part = jf.obj(raw, f"{at}[{j}]")
        kind = part.get("type")
        if kind not in _TEXT_PARTS:
            raise invalid(f"{at}[{j}].type", "only text parts are supported here")
        jf.known_keys(part, _PART_KEYS[str(kind)], f"{at}[{j}]")
        field = "refusal" if kind == "refusal" else "text"
        texts.append(jf.string(part.get(field), f"{at}[{j}].{field}"))
    return "\n".join(texts)


def _parts(content: list[Any], at: str, params: ParamMap, native: str) -> list[pb.ContentPart]:
    parts = []
    for j, raw in enumerate(content):
        where = f"{at}[{j}]"
        part = jf.obj(raw, where)
        kind = part.get("type")
        if kind not in ("input_text", "input_image"):
            raise invalid(f"{where}.type", f"unsupported content part type {excerpt(kind)}")
        jf.known_keys(part, _PART_KEYS[str(kind)], where)
        params.add(f"{native}[{j}]", where)
        if kind == "input_text":
            parts.append(pb.ContentPart(text=jf.string(part.get("text"), f"{where}.text")))
            continue
        if part.get("file_id") is not None:
            raise invalid(f"{where}.file_id", "files are not supported; give image_url")
        url = jf.string(part.get("image_url"), f"{where}.image_url")
        for source in ("url", "data"):
            params.add(f"{native}[{j}].image.{source}", f"{where}.image_url")
        image = image_part(url, part.get("detail"), where, f"{where}.image_url")
        parts.append(pb.ContentPart(image=image))
    return parts


def _function_call(item: jf.JsonObject, k: int, messages: Any, params: ParamMap) -> None:
    """A call of the model's: one more tool call of the assistant message before it, or an
    assistant message of its own."""
    at = f"input[{k}]"
    jf.known_keys(item, _CALL_KEYS, at)
    call = pb.ToolCall(
        id=jf.string(item.get("call_id"), f"{at}.call_id"),
        name=jf.string(item.get("name"), f"{at}.name"),
        arguments=jf.optional_string(item.get("arguments"), f"{at}.arguments"),
    )
    if not messages or messages[-1].role != pb.ROLE_ASSISTANT:
        params.add(f"messages[{len(messages)}]", at)
        messages.append(pb.Message(role=pb.ROLE_ASSISTANT))
    native = f"messages[{len(messages) - 1}].tool_calls[{len(messages[-1].tool_calls)}]"
    params.add(f"{native}.id", f"{at}.call_id")
    params.add(f"{native}.name", f"{at}.name")
    params.add(f"{native}.arguments", f"{at}.arguments")
    messages[-1].tool_calls.append(call)


def _function_output(item: jf.JsonObject, k: int) -> tuple[str, str]:
    at = f"input[{k}]"
    jf.known_keys(item, _OUTPUT_KEYS, at)
    call_id = jf.string(item.get("call_id"), f"{at}.call_id")
    output = item.get("output")
    if isinstance(output, list):
        return call_id, _text(output, f"{at}.output")
    return call_id, jf.string(output, f"{at}.output")


def _model_options(body: jf.JsonObject, out: cpb.ModelOptions, params: ParamMap) -> None:
    model_options.model(body, out, params)
    model_options.temperature(body, out, params, highest=2)
    model_options.output_tokens(body, "max_output_tokens", out, params)


# The request's parameters a response repeats, kept with a stored one (answer_note).
NOTED = (
    "model",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "text",
    "temperature",
    "top_p",
    "max_output_tokens",
    "max_tool_calls",
    "metadata",
    "previous_response_id",
    "conversation",
    "truncation",
    "user",
    "store",
    "created_at",
)
# What each kept parameter must be, read back: a note another client of the session
# wrote may hold anything.
_NOTED_TYPES: dict[str, type | tuple[type, ...]] = {
    "tools": list,
    "text": dict,
    "metadata": dict,
    "conversation": (str, dict),
    "parallel_tool_calls": bool,
    "store": bool,
    "temperature": (int, float),
    "top_p": (int, float),
    "max_output_tokens": int,
    "max_tool_calls": int,
    "created_at": int,
}


def request_note(body: Mapping[str, Any], created_at: int) -> str:
    """The parameters of a request a stored response repeats when retrieved, and when
    it was created."""
    kept = {k: body[k] for k in NOTED if body.get(k) is not None}
    return json.dumps({**kept, "created_at": created_at})


def noted_request(note: str) -> dict[str, Any]:
    """The parameters ``request_note`` kept, those of a wrong shape left out (shown as
    their defaults)."""
    try:
        kept = json_text.loads(note) if note else {}
    except ValueError:
        return {}
    if not isinstance(kept, dict):
        return {}
    out = {}
    for key in NOTED:
        value = kept.get(key)
        wanted = _NOTED_TYPES.get(key, str)
        if value is None or not isinstance(value, wanted):
            continue
        if isinstance(value, list) and not all(isinstance(t, dict) for t in value):
            continue
        if isinstance(value, bool) and wanted in (int, (int, float)):
            continue
        out[key] = value
    return out
