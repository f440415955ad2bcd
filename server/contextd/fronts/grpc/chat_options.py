"""StreamChat's tool choice and structured output, from the protobuf to the app's."""

from __future__ import annotations

import contextlib

from contextd.app.chat import AUTO, TEXT, ResponseFormat, ToolChoice
from contextd.core import json_text
from contextd.core.errors import Violations
from contextd.core.json_text import NESTING_RULE
from contextd.core.pipeline import is_tool_name
from contextd.v1 import chat_pb2 as cpb

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
