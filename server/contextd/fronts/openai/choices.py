"""``tool_choice``, ``parallel_tool_calls`` and structured output (``response_format``
of Chat Completions, ``text.format`` of the Responses API) into the native request."""

from __future__ import annotations

import json

from contextd.fronts.chat_http import json_fields as jf
from contextd.fronts.chat_http.failure import excerpt, invalid
from contextd.fronts.chat_http.params import ParamMap
from contextd.v1 import chat_pb2 as cpb

_MODES = {
    "auto": cpb.TOOL_CHOICE_MODE_AUTO,
    "none": cpb.TOOL_CHOICE_MODE_NONE,
    "required": cpb.TOOL_CHOICE_MODE_REQUIRED,
}
_SCHEMA_KEYS = frozenset({"name", "description", "schema", "strict"})


def tool_choice(raw: object, param: str, out: cpb.StreamChatRequest, params: ParamMap) -> None:
    """``auto``, ``none``, ``required``, or a function by name: Chat Completions'
    ``{"type": "function", "function": {"name"}}`` or the Responses API's
    ``{"type": "function", "name"}``."""
    params.add("tool_choice.mode", param)
    if raw is None:
        return
    if isinstance(raw, str):
        if raw not in _MODES:
            raise invalid(param, f"unknown tool choice {excerpt(raw)}: auto, none or required")
        out.tool_choice.mode = _MODES[raw]
        return
    choice = jf.obj(raw, param)
    kind = choice.get("type")
    if kind == "allowed_tools" or kind not in ("function", None):
        raise invalid(
            f"{param}.type", "only function (or auto, none, required)", "unsupported_parameter"
        )
    if "function" in choice:
        jf.known_keys(choice, frozenset({"type", "function"}), param)
        function = jf.obj(choice["function"], f"{param}.function")
        jf.known_keys(function, frozenset({"name"}), f"{param}.function")
        name = jf.string(function.get("name"), f"{param}.function.name")
        params.add("tool_choice.function_name", f"{param}.function.name")
    else:
        jf.known_keys(choice, frozenset({"type", "name"}), param)
        name = jf.string(choice.get("name"), f"{param}.name")
        params.add("tool_choice.function_name", f"{param}.name")
    out.tool_choice.mode = cpb.TOOL_CHOICE_MODE_FUNCTION
    out.tool_choice.function_name = name


def parallel_tool_calls(raw: object, param: str, out: cpb.StreamChatRequest) -> None:
    value = jf.optional_bool(raw, param)
    if value is not None:
        out.parallel_tool_calls = value


def response_format(
    raw: object, param: str, out: cpb.ModelOptions, params: ParamMap, *, nested: bool
) -> None:
    """``{"type": "text" | "json_object" | "json_schema", ...}``: the schema under
    ``json_schema`` (Chat Completions) or beside ``type`` (``nested`` False: the Responses
    API's ``text.format``)."""
    if raw is None:
        return
    fmt = jf.obj(raw, param)
    kind = fmt.get("type")
    target = out.response_format
    if kind == "text":
        jf.known_keys(fmt, frozenset({"type"}), param)
        return
    if kind == "json_object":
        jf.known_keys(fmt, frozenset({"type"}), param)
        target.type = cpb.RESPONSE_FORMAT_TYPE_JSON_OBJECT
        return
    if kind != "json_schema":
        raise invalid(f"{param}.type", "must be text, json_object or json_schema")
    if nested:
        jf.known_keys(fmt, frozenset({"type", "json_schema"}), param)
        at = f"{param}.json_schema"
        spec = jf.obj(fmt.get("json_schema"), at)
    else:
        at = param
        spec = fmt
    jf.known_keys(spec, _SCHEMA_KEYS | ({"type"} if not nested else set()), at)
    target.type = cpb.RESPONSE_FORMAT_TYPE_JSON_SCHEMA
    target.name = jf.string(spec.get("name"), f"{at}.name")
    target.description = jf.optional_string(spec.get("description"), f"{at}.description")
    schema = spec.get("schema")
    target.schema_json = json.dumps(jf.obj(schema, f"{at}.schema")) if schema is not None else ""
    if schema is None:
        raise invalid(f"{at}.schema", "required")
    target.strict = bool(jf.optional_bool(spec.get("strict"), f"{at}.strict"))
    for native, name in (("name", "name"), ("schema_json", "schema"), ("description", "")):
        params.add(f"model.response_format.{native}", f"{at}.{name}" if name else at)
