"""A value made deterministically from a JSON schema and valid against it: the offline
model's tool arguments and structured answers.

It covers what tool and structured-output schemas use (OpenAI's strict subset and
what pydantic, zod and LangChain write): ``type`` (one or a list), ``properties`` (all
of them are given, so that a strict schema's every required key is there),
``items`` / ``prefixItems`` with ``minItems``, ``enum``, ``const``, ``default``,
``anyOf`` / ``oneOf`` (the first choice), ``allOf`` (merged), ``$ref`` to ``#/$defs``
or ``#/definitions``, string ``minLength`` / ``format``, number bounds. A schema that
asks for more (``pattern``, ``not``) gets the closest value of its type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A recursive schema (a tree of nodes) ends after this many nested levels.
_MAX_DEPTH = 8
_FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00",
    "email": "echo@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


def example(schema: Mapping[str, Any], text: str = "echo") -> Any:
    """A value valid against ``schema``; strings are ``text`` where free."""
    return _Maker(schema, text).make(schema, "", 0)


class _Maker:
    def __init__(self, root: Mapping[str, Any], text: str) -> None:
        self._root = root
        self._text = text

    def make(self, schema: object, name: str, depth: int) -> Any:
        if not isinstance(schema, Mapping) or depth > 4 * _MAX_DEPTH:
            return self._text  # `true`, a broken schema or one that never ends
        schema = self._resolved(schema)
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return schema["enum"][0]
        if "default" in schema:
            return schema["default"]
        for key in ("anyOf", "oneOf"):
            choices = schema.get(key)
            if isinstance(choices, list) and choices:
                # A non-null choice first (an optional field gets a value), but a null one
                # deep down (a recursive schema ends).
                null = [c for c in choices if _is_null(self._resolved_any(c))]
                usable = [c for c in choices if c not in null]
                preferred = null if depth >= _MAX_DEPTH else usable
                return self.make((preferred or choices)[0], name, depth)
        if isinstance(schema.get("allOf"), list):
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                if isinstance(part, Mapping):
                    merged.update(self._resolved(part))
            rest = {k: v for k, v in schema.items() if k != "allOf"}
            return self.make({**merged, **rest}, name, depth)
        kind = _type(schema)
        if kind == "object":
            return self._object(schema, depth)
        if kind == "array":
            return self._array(schema, name, depth)
        if kind == "string":
            return self._string(schema, name)
        if kind == "integer":
            return int(_number(schema, integer=True))
        if kind == "number":
            return _number(schema, integer=False)
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        return self._text

    def _object(self, schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return {}
        required = schema.get("required")
        wanted = set(required) if isinstance(required, list) else set()
        out: dict[str, Any] = {}
        for key, sub in properties.items():
            if depth >= _MAX_DEPTH and key not in wanted:
                continue
            out[str(key)] = self.make(sub, str(key), depth + 1)
        return out

    def _array(self, schema: Mapping[str, Any], name: str, depth: int) -> list[Any]:
        prefix = schema.get("prefixItems")
        out = []
        if isinstance(prefix, list):
            out = [self.make(item, name, depth + 1) for item in prefix]
        least = schema.get("minItems")
        count = max(least if isinstance(least, int) else 1, len(out))
        if depth >= _MAX_DEPTH:
            count = least if isinstance(least, int) else 0
        items = schema.get("items", {})
        while len(out) < count:
            out.append(self.make(items, name, depth + 1))
        return out

    def _string(self, schema: Mapping[str, Any], name: str) -> str:
        fmt = schema.get("format")
        if isinstance(fmt, str) and fmt in _FORMATS:
            return _FORMATS[fmt]
        text = self._text or name or "echo"
        least = schema.get("minLength")
        most = schema.get("maxLength")
        if isinstance(least, int) and len(text) < least:
            text = (text * (least // max(len(text), 1) + 1))[:least]
        if isinstance(most, int) and len(text) > most:
            text = text[:most]
        return text

    def _resolved(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        """The schema a ``$ref`` points to (its own keys beside it kept), up to 32 hops."""
        for _ in range(32):
            ref = schema.get("$ref")
            if not isinstance(ref, str) or not ref.startswith("#/"):
                return schema
            target: object = self._root
            for part in ref[2:].split("/"):
                target = target.get(part) if isinstance(target, Mapping) else None
            if not isinstance(target, Mapping):
                return {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return schema

    def _resolved_any(self, schema: object) -> object:
        return self._resolved(schema) if isinstance(schema, Mapping) else schema


def _type(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"] or kind
        kind = kinds[0] if kinds else None
    if isinstance(kind, str):
        return kind
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return ""


def _is_null(schema: object) -> bool:
    return isinstance(schema, Mapping) and schema.get("type") == "null"


def _number(schema: Mapping[str, Any], *, integer: bool) -> float:
    """The least allowed value at or above 1 where bounds allow, else the bound itself."""
    value = 1.0
    low = schema.get("minimum")
    if isinstance(low, int | float) and not isinstance(low, bool):
        value = max(value, float(low))
    low = schema.get("exclusiveMinimum")
    if isinstance(low, int | float) and not isinstance(low, bool) and value <= low:
        value = float(low) + 1
    high = schema.get("maximum")
    if isinstance(high, int | float) and not isinstance(high, bool) and value > high:
        value = float(high)
    high = schema.get("exclusiveMaximum")
    if isinstance(high, int | float) and not isinstance(high, bool) and value >= high:
        value = float(high) - 1
    multiple = schema.get("multipleOf")
    if isinstance(multiple, int | float) and not isinstance(multiple, bool) and multiple > 0:
        value = multiple * max(1, round(value / multiple))
    return float(int(value)) if integer else value
