"""JSON read with an explicit nesting limit.

Python's parser recurses once per array or object level, so a text nested thousands deep
(``[[[[...``) reaches the interpreter's recursion limit and raises RecursionError, which
no caller expects, from wherever the text was read. Texts a caller or a model wrote
(tool-call arguments, tool parameter schemas, an HTTP body) are read here instead: one
nested deeper than ``MAX_NESTING`` is refused before it is parsed, as a ValueError like
any other text that is not the JSON wanted.

A string holding half of a UTF-16 surrogate pair (``"\ud800"``, or its three bytes in
a body read as bytes) parses in Python, but is no text: it cannot be encoded, and fails
wherever it goes next (a protobuf field, a UTF-8 file). Such a text is refused here too
(UnpairedSurrogate).
"""

from __future__ import annotations

import json
import re
from typing import Any

# Far deeper than any tool's arguments or schema, far below the recursion limit.
MAX_NESTING = 64
NESTING_RULE = f"nested at most {MAX_NESTING} deep"

# An escape of a surrogate half, or one's UTF-8 bytes (json.loads reads bytes with
# "surrogatepass"): where neither occurs, no string of the value can hold one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_BYTES = re.compile(rb"\xed[\xa0-\xbf]")

# Strings (skipped whole: brackets inside them do not nest) and the brackets that do.
_TOKENS = re.compile(r'"(?:[^"\\]+|\\.)*"|[\[\]{}]')


class TooDeep(ValueError):
    """The text nests arrays and objects deeper than ``MAX_NESTING``."""


class UnpairedSurrogate(ValueError):
    """A string of the text holds half of a surrogate pair, which no encoding carries."""


def nests_too_deep(text: str, limit: int = MAX_NESTING) -> bool:
    """Whether ``text`` opens more than ``limit`` arrays or objects inside each other."""
    if text.count("[") + text.count("{") <= limit:  # the common case: no scan
        return False
    depth = 0
    for token in _TOKENS.finditer(text):
        bracket = token.group()[0]
        if bracket in "[{":
            depth += 1
            if depth > limit:
                return True
        elif bracket in "]}":
            depth -= 1
    return False


def loads(text: str | bytes, **options: Any) -> Any:
    """``json.loads(text, **options)``, refusing a text nested too deep (TooDeep)."""
    if nests_too_deep(text if isinstance(text, str) else text.decode("utf-8", "replace")):
        raise TooDeep(f"JSON {NESTING_RULE}")
    value = json.loads(text, **options)
    if _may_hold_surrogates(text) and _holds_surrogate(value):
        raise UnpairedSurrogate("a JSON string holds an unpaired surrogate (such as \\ud800)")
    return value


def _may_hold_surrogates(text: str | bytes) -> bool:
    if isinstance(text, bytes):
        if _SURROGATE_BYTES.search(text):
            return True
        text = text.decode("latin-1")  # only the ASCII escapes are looked for
    return "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None


def _holds_surrogate(value: object) -> bool:
    """Whether a string of ``value`` (its keys included) cannot be encoded."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
