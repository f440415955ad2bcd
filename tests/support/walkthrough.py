"""Reads the grpcurl walkthrough (docs/grpcurl.md): its commands and the outputs shown after them.

A walkthrough section is a run of fenced blocks: each ```sh block holds one command,
and the ```json or ```text block that follows it (if any) is the output it prints.
Expected outputs use these conventions, which `match_json` and `match_text` apply:

- a line `...` in JSON stands for fields (in an object) or items (in a list) left
  out; in a stream of JSON values, for any number of values;
- `"..."` as a value matches any value, and `...` inside a string any text;
- `"$NAME"` (capitals) as a string value is an id the server made up: its first
  appearance binds NAME to the actual value, later ones must equal it, and later
  commands get it as the shell variable NAME;
- in text, every line shown must appear, in order (`...` lines are skipped).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ELIDED = "..."
VARIABLE = re.compile(r"\$([A-Z][A-Z0-9_]*)")
OUTPUT_FENCES = ("json", "text")


class Mismatch(AssertionError):
    pass


@dataclass(frozen=True)
class Step:
    line: int  # line of the command's opening fence in docs/grpcurl.md
    command: str
    output_kind: str | None  # "json", "text" or None (no output shown)
    output: str


def section(readme: str, heading: str) -> tuple[int, list[str]]:
    """The lines under a level-2 heading up to the next one, and the first's line number."""
    lines = readme.splitlines()
    start = lines.index(heading) + 1
    end = next(
        (i for i in range(start, len(lines)) if lines[i].startswith("## ")),
        len(lines),
    )
    return start + 1, lines[start:end]


def steps(readme: str, heading: str) -> list[Step]:
    first_line, lines = section(readme, heading)
    blocks: list[tuple[int, str, str]] = []  # (line, fence language, body)
    fence: str | None = None
    body: list[str] = []
    opened = 0
    for number, line in enumerate(lines, first_line):
        if fence is None and line.startswith("```"):
            fence, opened, body = line[3:].strip(), number, []
        elif fence is not None and line.startswith("```"):
            blocks.append((opened, fence, "\n".join(body)))
            fence = None
        elif fence is not None:
            body.append(line)
    if fence is not None:
        raise ValueError(f"docs/grpcurl.md line {opened}: unclosed code fence")

    out: list[Step] = []
    for index, (line, language, text) in enumerate(blocks):
        if language == "sh":
            after = blocks[index + 1] if index + 1 < len(blocks) else None
            if after is not None and after[1] in OUTPUT_FENCES:
                out.append(Step(line, text, after[1], after[2]))
            else:
                out.append(Step(line, text, None, ""))
        elif language not in OUTPUT_FENCES:
            raise ValueError(f"docs/grpcurl.md line {line}: unexpected ```{language} block")
        elif index == 0 or blocks[index - 1][1] != "sh":
            raise ValueError(
                f"docs/grpcurl.md line {line}: an output block with no command before it"
            )
    return out


# Expected JSON ----------------------------------------------------------------------


def expected_values(text: str) -> list[Any]:
    """The JSON values of an expected-output block, its bare `...` made into JSON."""
    out: list[str] = []
    stack: list[str] = []  # open brackets
    in_string = escaped = False
    position = 0
    while position < len(text):
        char = text[position]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif text.startswith(ELIDED, position):
            inside = bool(stack)
            before = "".join(out).rstrip()[-1:]
            after = text[position + len(ELIDED) :].lstrip()[:1]
            if inside and before not in (",", "[", "{"):
                out.append(",")
            out.append('"...": "..."' if stack[-1:] == ["{"] else '"..."')
            if inside and after not in (",", "]", "}"):
                out.append(",")
            position += len(ELIDED)
            continue
        elif char == '"':
            in_string = True
        elif char in "[{":
            stack.append(char)
        elif char in "]}":
            stack.pop()
        out.append(char)
        position += 1
    return parse_stream("".join(out))


def parse_stream(text: str) -> list[Any]:
    """Consecutive JSON values, as grpcurl prints a stream (one value per message)."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return values
        value, position = decoder.raw_decode(text, position)
        values.append(value)


# Matching ---------------------------------------------------------------------------


def _glob(pattern: str, text: str) -> bool:
    regex = ".*".join(re.escape(part) for part in pattern.split(ELIDED))
    return re.fullmatch(regex, text, re.DOTALL) is not None


def match_json(expected: Any, actual: Any, bound: dict[str, str], path: str = "$") -> None:
    """Check ``actual`` against ``expected``; binds ``$NAME`` placeholders into ``bound``."""
    if expected == ELIDED:
        return
    if isinstance(expected, str):
        variable = VARIABLE.fullmatch(expected)
        if not isinstance(actual, str):
            raise Mismatch(f"{path}: expected a string {expected!r}, got {actual!r}")
        if variable is not None:
            name = variable[1]
            if bound.setdefault(name, actual) != actual:
                raise Mismatch(f"{path}: ${name} is {bound[name]!r}, got {actual!r}")
        elif not _glob(expected, actual):
            raise Mismatch(f"{path}: expected {expected!r}, got {actual!r}")
    elif isinstance(expected, dict):
        if not isinstance(actual, dict):
            raise Mismatch(f"{path}: expected an object, got {actual!r}")
        shown = {key: value for key, value in expected.items() if key != ELIDED}
        missing = sorted(set(shown) - set(actual))
        extra = sorted(set(actual) - set(shown))
        if missing:
            raise Mismatch(f"{path}: missing {missing} in {actual!r}")
        if extra and ELIDED not in expected:
            raise Mismatch(f"{path}: fields {extra} not shown (add them or a `...` line)")
        for key, value in shown.items():
            match_json(value, actual[key], bound, f"{path}.{key}")
    elif isinstance(expected, list):
        if not isinstance(actual, list):
            raise Mismatch(f"{path}: expected a list, got {actual!r}")
        match_sequence(expected, actual, bound, path)
    elif type(expected) is not type(actual) or expected != actual:
        raise Mismatch(f"{path}: expected {expected!r}, got {actual!r}")


def match_sequence(
    expected: list[Any], actual: list[Any], bound: dict[str, str], path: str, start: int = 0
) -> None:
    """Items in order; an ``"..."`` item matches any number of actual items."""
    if not expected:
        if actual:
            raise Mismatch(f"{path}: {len(actual)} more items than shown, from {actual[0]!r}")
        return
    head, rest = expected[0], expected[1:]
    if head == ELIDED:
        for skip in range(len(actual) + 1):
            attempt = dict(bound)
            try:
                match_sequence(rest, actual[skip:], attempt, path, start + skip)
            except Mismatch:
                continue
            bound.update(attempt)
            return
        raise Mismatch(f"{path}[{start}:]: no items match what follows the `...`: {rest[:1]!r}")
    if not actual:
        raise Mismatch(f"{path}: fewer items than shown; missing {head!r}")
    match_json(head, actual[0], bound, f"{path}[{start}]")
    match_sequence(rest, actual[1:], bound, path, start + 1)


def match_text(expected: str, actual: str) -> None:
    """Every shown line appears in ``actual``, in order (whitespace at the ends ignored)."""
    remaining = [line.strip() for line in actual.splitlines()]
    for line in expected.splitlines():
        wanted = line.strip()
        if not wanted or wanted == ELIDED:
            continue
        for index, candidate in enumerate(remaining):
            if _glob(wanted, candidate):
                remaining = remaining[index + 1 :]
                break
        else:
            raise Mismatch(f"line not in the output (or out of order): {wanted!r}")


def read(path: Path, heading: str) -> list[Step]:
    return steps(path.read_text(encoding="utf-8"), heading)
