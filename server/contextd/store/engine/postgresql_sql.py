"""Repository SQL, written with SQLite's ``?`` and ``:name`` placeholders, as PostgreSQL
takes it: ``$1``, ``$2``, ... Each distinct statement is translated once and kept.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# String literals and quoted names are copied as they are; ``::`` (a cast) is no
# placeholder; then ``?`` and ``:name``.
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|::|\?|:([A-Za-z_][A-Za-z0-9_]*)")
# A statement whose rows the caller reads (otherwise only its row count).
_RETURNS_ROWS = re.compile(r"^\s*(?:SELECT|WITH|VALUES)\b|\bRETURNING\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Statement:
    sql: str
    # The parameter names in $n order (``:name`` style), or None (``?`` style).
    names: tuple[str, ...] | None
    returns_rows: bool

    def arguments(self, params: Sequence[Any] | Mapping[str, Any]) -> Sequence[Any]:
        if self.names is None:
            if isinstance(params, Mapping):
                raise TypeError("a statement with ? placeholders takes a sequence")
            return params
        if not isinstance(params, Mapping):
            raise TypeError("a statement with :name placeholders takes a mapping")
        return [params[name] for name in self.names]


@functools.lru_cache(maxsize=1024)
def translate(sql: str) -> Statement:
    positional = 0
    names: list[str] = []

    def replace(match: re.Match[str]) -> str:
        nonlocal positional
        token = match.group(0)
        if token == "?":
            positional += 1
            return f"${positional}"
        name = match.group(1)
        if name is None:  # a literal, a quoted name or ``::``
            return token
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    text = _TOKEN.sub(replace, sql)
    if positional and names:
        raise ValueError("a statement mixes ? and :name placeholders")
    return Statement(text, tuple(names) if names else None, bool(_RETURNS_ROWS.search(sql)))
