"""JSON read with an explicit nesting limit.

Python's parser recurses once per array or object level, so a text nested thousands deep
(``[[[[...``) reaches the interpreter's recursion limit and raises RecursionError, which
no caller expects, from wherever the text was read. Texts a caller or a model wrote
(tool-call arguments, tool parameter schemas, an HTTP body) are read here instead: one
nested deeper than ``MAX_NESTING`` is refused before it is parsed, as a ValueError like
any other text that is not the JSON wanted.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Far deeper than any tool's arguments or schema, far below the recursion limit.
MAX_NESTING = 64
NESTING_RULE = f"nested at most {MAX_NESTING} deep"

# Strings (skipped whole: brackets inside them do not nest) and the brackets that do.
_TOKENS = re.compile(r'"(?:[^"\\]+|\\.)*"|[\[\]{}]')


class TooDeep(ValueError):
    """The text nests arrays and objects deeper than ``MAX_NESTING``."""


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
    return json.loads(text, **options)
