"""The host's function tools of a model API request into the native ToolDefinitions.

Every protocol gives a tool the same three things (a name, a description, a JSON schema
of its arguments) under its own field names, flat or nested in an object of their own;
a ToolShape says where, and one parser reads them all alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from contextd.fronts.chat_http import json_fields as jf
from contextd.fronts.chat_http.failure import invalid
from contextd.fronts.chat_http.params import ParamMap
from contextd.v1 import chat_pb2 as cpb


@dataclass(frozen=True, slots=True)
class ToolShape:
    """Where one protocol puts a function tool's fields."""

    # The values of ``type`` accepted (None: the field left out), and the refusal of others.
    types: tuple[str | None, ...]
    wrong_type: str
    wrong_type_code: str | None
    # The tool object's known fields.
    keys: frozenset[str]
    # The field holding the function's own fields (Chat Completions' ``function``);
    # empty when they stand in the tool object itself.
    nested: str = ""
    nested_keys: frozenset[str] = frozenset()
    # The JSON schema's field, and whether a tool must have one.
    schema: str = "parameters"
    schema_required: bool = False


def function_tools(raw: object, params: ParamMap, shape: ToolShape) -> list[cpb.ToolDefinition]:
    """The ``tools`` parameter read as ``shape`` says; none when it is absent."""
    if raw is None:
        return []
    tools = []
    for k, item in enumerate(jf.array(raw, "tools")):
        at = f"tools[{k}]"
        tool = jf.obj(item, at)
        if tool.get("type") not in shape.types:
            raise invalid(f"{at}.type", shape.wrong_type, code=shape.wrong_type_code)
        jf.known_keys(tool, shape.keys, at)
        fields, where = tool, at
        if shape.nested:
            where = f"{at}.{shape.nested}"
            fields = jf.obj(tool.get(shape.nested), where)
            jf.known_keys(fields, shape.nested_keys, where)
        jf.optional_bool(fields.get("strict"), f"{where}.strict")
        params.add(f"{at}.name", f"{where}.name")
        params.add(f"{at}.parameters_json", f"{where}.{shape.schema}")
        name = jf.string(fields.get("name"), f"{where}.name")
        description = jf.optional_string(fields.get("description"), f"{where}.description")
        schema = fields.get(shape.schema)
        if schema is not None or shape.schema_required:
            schema = json.dumps(jf.obj(schema, f"{where}.{shape.schema}"))
        tools.append(
            cpb.ToolDefinition(name=name, description=description, parameters_json=schema or "")
        )
    return tools
