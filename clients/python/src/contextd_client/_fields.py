"""Plain Python values <-> single protobuf fields, shared by every call's conversions.

Only what cannot be encoded at all raises (TypeError or ValueError). Everything the
server checks (roles, tool call ids, budgets, ...) is left to the server, so its
INVALID_ARGUMENT error names the offending field the same way for every client.

Responses from a newer server may carry enum numbers this client does not know: they
become ``"unknown(N)"``, and that name is read back as N where a request takes one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._pb import context_pb2 as pb

# How an enum number this client does not know is named, and read back.
_UNKNOWN = "unknown({})"
_UNKNOWN_NUMBER = re.compile(r"unknown\((-?\d+)\)")

_MEMORY_MODES: dict[bool | None, int] = {
    None: pb.MEMORY_MODE_UNSPECIFIED,
    True: pb.MEMORY_MODE_ON,
    False: pb.MEMORY_MODE_OFF,
}
_CACHE_LAYOUTS: dict[str | None, pb.CacheLayout] = {
    None: pb.CACHE_LAYOUT_UNSPECIFIED,
    "off": pb.CACHE_LAYOUT_OFF,
    "stable_prefix": pb.CACHE_LAYOUT_STABLE_PREFIX,
}


def _cache_layout(value: object, where: str) -> pb.CacheLayout:
    """ "off", "stable_prefix" or None (the server's default) as the enum."""
    if not (value is None or isinstance(value, str)) or value not in _CACHE_LAYOUTS:
        raise ValueError(f"{where} must be 'off', 'stable_prefix' or None, not {value!r}")
    return _CACHE_LAYOUTS[value]


def _type_name(value: object) -> str:
    return type(value).__name__


def _text(value: object, where: str) -> str:
    """A string field; ``None`` means empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise TypeError(f"{where} must be a string, not {_type_name(value)}")


def _ident(value: object, where: str) -> str:
    """An id field: a string or an integer (sent as its decimal text); ``None`` means empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"{where} must be a string or an int, not {_type_name(value)}")


def _sequence(value: object, where: str, what: str) -> Sequence[Any]:
    """A list-like argument; a lone string or mapping is a mistake, not a sequence of items."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence):
        raise TypeError(f"{where} must be a sequence of {what}, not {_type_name(value)}")
    return value


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where} must be an int, not {_type_name(value)}")
    return value


def _enum_name(enum: Any, number: int, prefix: str) -> str:
    """``ROLE_USER`` -> "user"; a number this client does not know -> "unknown(N)"."""
    try:
        name = str(enum.Name(number))
    except ValueError:
        return _UNKNOWN.format(number)
    return name.removeprefix(prefix).lower()
