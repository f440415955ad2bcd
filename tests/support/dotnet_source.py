"""Tokens of C# and Visual Basic source with comments and string contents removed.

Enough of each language's lexical grammar to name every identifier the code itself uses:
comments (C# `//`, `/* */`, doc comments; VB `'` and `REM`) and the text of string and
character literals are dropped, while the code inside interpolated strings (`$"{expr}"`) is
tokenized as code. C# preprocessor lines are not code; each token carries the `#if`
conditions it sits under. Numbers are dropped; operators are single tokens except `?.`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

IDENT = "ident"
PUNCT = "punct"


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    line: int
    conditions: tuple[str, ...] = ()


_IDENTIFIER = re.compile(r"@?[A-Za-z_]\w*")
_NUMBER = re.compile(r"\d[\w.]*")
_VB_ESCAPED = re.compile(r"\[([A-Za-z_]\w*)\]")


class _Lexer:
    def __init__(self, text: str, vb: bool) -> None:
        self.text = text
        self.vb = vb
        self.i = 0
        self.line = 1
        self.conditions: list[str] = []
        self.tokens: list[Token] = []

    def emit(self, kind: str, text: str) -> None:
        self.tokens.append(Token(kind, text, self.line, tuple(self.conditions)))

    def skip_to_line_end(self) -> None:
        end = self.text.find("\n", self.i)
        self.i = len(self.text) if end < 0 else end

    def run(self, until_brace: bool = False) -> None:
        """Tokenizes until the text ends or, inside an interpolation hole, its closing brace."""
        text, depth = self.text, 0
        while self.i < len(text):
            char = text[self.i]
            rest = text[self.i : self.i + 3]
            if char == "\n":
                self.line += 1
                self.i += 1
            elif char.isspace():
                self.i += 1
            elif self._at_comment(char, rest):
                self.skip_to_line_end()
            elif not self.vb and rest.startswith("/*"):
                end = text.index("*/", self.i + 2) + 2
                self.line += text.count("\n", self.i, end)
                self.i = end
            elif not self.vb and char == "#" and self._at_line_start():
                self._directive()
            elif char == '"' or (char in "$@" and re.match(r"[$@]{1,2}\"", rest)):
                self._string()
            elif not self.vb and char == "'":
                self._char_literal()
            elif until_brace and char == "}" and depth == 0:
                self.i += 1
                return
            elif until_brace and char == ":" and depth == 0 and not self._is_conditional():
                self._skip_format_spec()
                return
            elif match := _IDENTIFIER.match(text, self.i):
                self.emit(IDENT, match.group().lstrip("@"))
                self.i = match.end()
            elif match := _NUMBER.match(text, self.i):
                self.i = match.end()
            elif self.vb and (match := _VB_ESCAPED.match(text, self.i)):
                self.emit(IDENT, match.group(1))
                self.i = match.end()
            else:
                if text.startswith("?.", self.i):
                    self.emit(PUNCT, "?.")
                    self.i += 2
                    continue
                depth += {"{": 1, "}": -1}.get(char, 0)
                self.emit(PUNCT, char)
                self.i += 1

    def _at_comment(self, char: str, rest: str) -> bool:
        """At a comment running to the line's end: C# `//`, VB `'` or `REM`."""
        if not self.vb:
            return rest.startswith("//")
        return char == "'" or re.match(r"REM\b", self.text[self.i : self.i + 4]) is not None

    def _at_line_start(self) -> bool:
        start = self.text.rfind("\n", 0, self.i) + 1
        return not self.text[start : self.i].strip()

    def _directive(self) -> None:
        start = self.i
        self.skip_to_line_end()
        words = self.text[start + 1 : self.i].split(None, 1)
        name, argument = words[0], (words[1].strip() if len(words) > 1 else "")
        if name == "if":
            self.conditions.append(argument)
        elif name in {"elif", "else"}:
            previous = self.conditions.pop()
            self.conditions.append(f"!({previous})" if name == "else" else argument)
        elif name == "endif":
            self.conditions.pop()

    def _is_conditional(self) -> bool:
        """A `:` inside a hole after `?` is the conditional operator, not a format spec."""
        return any(t.text == "?" for t in self.tokens[-8:])

    def _skip_format_spec(self) -> None:
        end = self.text.index("}", self.i)
        self.i = end + 1

    def _char_literal(self) -> None:
        match = re.compile(r"'(\\.|[^'\\])*'").match(self.text, self.i)
        assert match, f"unterminated character literal on line {self.line}"
        self.i = match.end()

    def _string(self) -> None:
        prefix = re.compile(r"[$@]*").match(self.text, self.i)
        assert prefix
        interpolated = "$" in prefix.group()
        # VB strings and C# verbatim strings escape a quote by doubling it; C# regular
        # strings use a backslash.
        doubled = self.vb or "@" in prefix.group()
        self.i = prefix.end() + 1
        text = self.text
        while True:
            char = text[self.i]
            if char == '"':
                if doubled and text.startswith('""', self.i):
                    self.i += 2
                    continue
                self.i += 1
                return
            escaped = char == "\\" and not doubled
            if escaped or (interpolated and text.startswith("{{", self.i)):
                self.i += 2
            elif interpolated and char == "{":
                self.i += 1
                self.run(until_brace=True)
            else:
                if char == "\n":
                    self.line += 1
                self.i += 1


def tokenize(text: str, *, vb: bool = False) -> list[Token]:
    lexer = _Lexer(text, vb)
    lexer.run()
    return lexer.tokens
