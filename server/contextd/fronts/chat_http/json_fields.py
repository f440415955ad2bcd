"""Typed reads of a parsed JSON request, each refusing a wrong type with a 400 that
names the parameter (OpenAI's ``invalid_type``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from contextd.core import json_text
from contextd.core.errors import cut
from contextd.core.json_text import NESTING_RULE
from contextd.fronts.chat_http.failure import HttpFailure, invalid

JsonObject = Mapping[str, Any]
T = TypeVar("T")
# The longest parameter name quoted whole in an error.
_LONGEST_NAME = 64


def parse_object(body: bytes) -> JsonObject:
    """The request body as a JSON object (400 for anything else)."""
    try:
        value = json_text.loads(body)
    except json_text.TooDeep:
        raise invalid(
            None, f"the request body must be {NESTING_RULE}", code="invalid_json"
        ) from None
    except json_text.UnpairedSurrogate as error:
        raise invalid(
            None, f"the request body is not valid text: {error}", code="invalid_json"
        ) from None
    except ValueError:
        raise invalid(None, "the request body is not valid JSON", code="invalid_json") from None
    if not isinstance(value, dict):
        raise invalid(None, "the request body must be a JSON object", code="invalid_json")
    return value


def _wrong(param: str, expected: str) -> HttpFailure:
    return invalid(param, f"expected {expected}", code="invalid_type")


def _of(kind: type[T], value: object, param: str, expected: str) -> T:
    if not isinstance(value, kind):
        raise _wrong(param, expected)
    return value


def obj(value: object, param: str) -> JsonObject:
    return _of(dict, value, param, "an object")


def optional_object(value: object, param: str) -> JsonObject | None:
    return None if value is None else obj(value, param)


def array(value: object, param: str) -> list[Any]:
    return _of(list, value, param, "an array")


def string(value: object, param: str) -> str:
    return _of(str, value, param, "a string")


def optional_string(value: object, param: str) -> str:
    """A string, or "" for null."""
    return "" if value is None else string(value, param)


def boolean(value: object, param: str) -> bool:
    return _of(bool, value, param, "a boolean")


def optional_bool(value: object, param: str) -> bool | None:
    return None if value is None else boolean(value, param)


def integer(value: object, param: str) -> int:
    # bool is an int to Python, not to JSON.
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong(param, "an integer")
    return value


def optional_int(value: object, param: str) -> int | None:
    return None if value is None else integer(value, param)


def number(value: object, param: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _wrong(param, "a number")
    return float(value)


def optional_number(value: object, param: str) -> float | None:
    return None if value is None else number(value, param)


def known_keys(value: JsonObject, known: frozenset[str], at: str) -> None:
    """Refuse a key the API does not define, as the model APIs do."""
    for key in value:
        if key not in known:
            param = cut(f"{at}.{key}" if at else key, _LONGEST_NAME)
            raise HttpFailure(
                400,
                f"Unrecognized request argument supplied: {param}",
                param=param,
                code="unknown_parameter",
            )


def parameters(
    raw: bytes,
    used: frozenset[str],
    hints: Mapping[str, Callable[[object, str], object]],
    plain: Mapping[str, tuple[object, ...]],
) -> JsonObject:
    """The request body, each of its parameters one of the API's: ``used``, a hint
    (type-checked by its reader, without effect on the turn), or one of ``plain``,
    refused unless absent, null or a value that asks for nothing more than a plain
    answer."""
    body = parse_object(raw)
    known_keys(body, used | frozenset(hints) | frozenset(plain), "")
    for name, check in hints.items():
        check(body.get(name), name)
    for name, allowed in plain.items():
        value = body.get(name)
        if value is not None and value not in allowed:
            raise invalid(name, "not supported by contextd", code="unsupported_parameter")
    return body
