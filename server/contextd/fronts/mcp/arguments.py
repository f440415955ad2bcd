"""The memory tools' structured arguments (scope, filter, times) as the native messages
take them, and arguments the tools refuse told in plain words naming each argument,
never the validator's own text nor the value sent."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from contextd.core.errors import cut, shown
from contextd.v1 import memory_pb2 as mpb

When = Annotated[
    datetime,
    Field(description="a time in RFC 3339, e.g. 2026-05-01T09:00:00Z (UTC without an offset)"),
]
Labels = Annotated[
    dict[str, str],
    Field(
        description="the host's own labels: at most 16 pairs, keys 1-64 characters, "
        "values at most 256",
        max_length=16,
    ),
]


class ScopeArg(BaseModel):
    """Which part of the host a memory belongs to; both empty: the user as a whole."""

    model_config = ConfigDict(extra="forbid")
    agent: str = Field("", description="an agent of the host's, e.g. planner")
    app: str = Field("", description="the host application, e.g. word")


class FilterArg(BaseModel):
    """Which memories are considered: every condition given must hold."""

    model_config = ConfigDict(extra="forbid")
    agent: str | None = Field(None, description="only this agent's (empty: of no agent)")
    app: str | None = Field(None, description="only this app's (empty: of no app)")
    metadata: Labels = {}
    created_after: When | None = None
    created_before: When | None = None
    updated_after: When | None = None
    updated_before: When | None = None
    as_of: When | None = Field(
        None,
        description="the memories true at this time, superseded facts included; "
        "unset: the ones true now",
    )


def timestamp(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    stamp = Timestamp()
    stamp.FromDatetime(value if value.tzinfo else value.replace(tzinfo=UTC))
    return stamp


def scope(value: ScopeArg | None) -> mpb.MemoryScope | None:
    return None if value is None else mpb.MemoryScope(agent=value.agent, app=value.app)


def memory_filter(value: FilterArg | None) -> mpb.MemoryFilter | None:
    if value is None:
        return None
    found = mpb.MemoryFilter(
        metadata=value.metadata,
        created_after=timestamp(value.created_after),
        created_before=timestamp(value.created_before),
        updated_after=timestamp(value.updated_after),
        updated_before=timestamp(value.updated_before),
        as_of=timestamp(value.as_of),
    )
    if value.agent is not None:
        found.agent = value.agent
    if value.app is not None:
        found.app = value.app
    return found


# --- refused arguments in plain words ---------------------------------------------------

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")

_KINDS = {
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "string": "text",
    "dict": "an object",
    "model": "an object",
    "datetime": "a time in RFC 3339, e.g. 2026-05-01T09:00:00Z",
    "timezone": "a time in RFC 3339, e.g. 2026-05-01T09:00:00Z",
    "list": "a list",
}


# What an error of each kind says, naming the bound it broke.
_TOLD = {
    "missing": "{name} is required",
    "extra_forbidden": "{name} is not an argument here",
    "greater_than_equal": "{name} must be at least {ge}",
    "greater_than": "{name} must be at least {gt}",
    "less_than_equal": "{name} must be at most {le}",
    "less_than": "{name} must be at most {lt}",
    "literal_error": "{name} must be one of {expected}",
    "too_long": "{name} is too long (at most {max_length})",
    "string_too_long": "{name} is too long (at most {max_length})",
    "too_short": "{name} is too short (at least {min_length})",
    "string_too_short": "{name} is too short (at least {min_length})",
}


def plain(tool: str, error: ValidationError) -> str:
    """What was wrong with the arguments of a call to ``tool``, one clause per argument
    (the first ten); a name the caller made up (a key of theirs) is quoted, bounded."""
    clauses = sorted({_clause(e) for e in error.errors(include_url=False, include_input=False)})
    return cut(f"Invalid arguments to {tool}: " + "; ".join(clauses[:10]) + ".", 600)


def _name(part: str | int) -> str:
    if isinstance(part, int):
        return f"[{part}]"
    return part if _WORD.fullmatch(part) else shown(part)


def _clause(e: Any) -> str:
    name = ".".join(_name(part) for part in e["loc"]) or "the arguments"
    kind: str = e["type"]
    told = _TOLD.get(kind)
    if told is not None:
        return told.format_map(_Bounds(e.get("ctx") or {}, name=name))
    for prefix, expected in _KINDS.items():
        if kind.startswith(prefix):
            return f"{name} must be {expected}"
    return f"{name} is not valid"


class _Bounds(dict[str, Any]):
    """An error's context (the tool's own bounds, never the caller's input); a bound it
    lacks reads as None."""

    def __missing__(self, key: str) -> None:
        return None
