"""The ReAct tag protocol, for models without native tool calling (docs/chat.md).

Pure functions: the system-prompt addendum that describes the tools and the tags,
the parser of one step's text, and the observation message. The model answers a
step with an optional ``<thought>...</thought>`` and then either exactly one
``<action tool="name">input</action>`` or ``<final>answer</final>``; the result of
an action comes back as ``<observation>...</observation>``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from contextd.core import json_text
from contextd.core.errors import shown

# The addendum's first line; also how a test tells a ReAct turn's model call apart.
REACT_HEADER = "# Tools (ReAct protocol)"


@dataclass(frozen=True, slots=True)
class ReactTool:
    name: str
    description: str
    parameters: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class Final:
    """``<final>`` content, stripped."""

    text: str


@dataclass(frozen=True, slots=True)
class Action:
    """The first ``<action>`` of the step; ``input`` stripped."""

    tool: str
    input: str


@dataclass(frozen=True, slots=True)
class NoTags:
    """Neither action nor final: the text without thoughts, stripped."""

    text: str


Parsed = Final | Action | NoTags

_THOUGHT = re.compile(r"<thought\b[^>]*>.*?(?:</thought\s*>|\Z)", re.I | re.S)
_ACTION = re.compile(
    r"<action\b(?P<attrs>[^>]*)>(?P<input>.*?)(?:</action\s*>|<observation\b|<final\b|\Z)",
    re.I | re.S,
)
_TOOL_ATTR = re.compile(r"""\btool\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.I)
_FINAL = re.compile(r"<final\b[^>]*>(?P<text>.*?)(?:</final\s*>|\Z)", re.I | re.S)


def parse_step(text: str) -> Parsed:
    """One step's text. Thoughts are ignored (an unclosed one runs to the end); the
    first ``<action>`` wins over anything after it, a ``<final>`` included; closing
    tags may be missing at the end of the text."""
    body = _THOUGHT.sub("", text)
    action = _ACTION.search(body)
    final = _FINAL.search(body)
    if action is not None and (final is None or action.start() < final.start()):
        attr = _TOOL_ATTR.search(action.group("attrs"))
        tool = next((g for g in attr.groups() if g is not None), "") if attr else ""
        return Action(tool.strip(), action.group("input").strip())
    if final is not None:
        return Final(final.group("text").strip())
    return NoTags(body.strip())


def addendum(tools: Sequence[ReactTool]) -> str:
    """The text appended to the system prompt: the tools and the tag protocol."""
    lines = [
        REACT_HEADER,
        "",
        "You can use the tools below. You cannot call them natively; use these tags.",
        "",
        "Each reply is one step. In a step:",
        "1. Optionally think first: <thought>your reasoning</thought>",
        "2. Then either call exactly one tool:",
        '   <action tool="TOOL_NAME">INPUT</action>',
        "   and stop; the result comes back in the next message as",
        "   <observation>RESULT</observation>",
        "3. Or, when you can answer, give the answer to the user:",
        "   <final>YOUR ANSWER</final>",
        "",
        "Rules: at most one <action> per step; never write <observation> yourself; "
        "INPUT is a JSON object matching the tool's parameters (plain text is accepted "
        "for a tool that takes a single text input); always finish with <final>.",
        "",
        "Tools:",
    ]
    for tool in tools:
        schema = json.dumps(tool.parameters, ensure_ascii=False, separators=(",", ":"))
        lines.append(f"- {tool.name}: {tool.description or '(no description)'}")
        lines.append(f"  parameters (JSON schema): {schema}")
    return "\n".join(lines)


def observation(content: str) -> str:
    """The user message that carries a tool's result back to the model."""
    return f"<observation>{content}</observation>"


def unknown_tool(tool: str, known: Sequence[str]) -> str:
    """The observation for an action naming a tool that does not exist."""
    names = ", ".join(known) or "(none)"
    return f"Error: the tool {shown(tool)} does not exist. Available tools: {names}."


def tool_arguments(input_text: str) -> str:
    """JSON arguments for a tool call: the input itself when it is a JSON object,
    else ``{"input": input}``."""
    try:
        value = json_text.loads(input_text)
    except ValueError:  # TooDeep too: then it is plain input
        value = None
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps({"input": input_text}, ensure_ascii=False)


def query_of(input_text: str, key: str = "query") -> str:
    """A single-text tool's input: ``key`` of a JSON object input, else the text."""
    try:
        value = json_text.loads(input_text)
    except ValueError:
        return input_text
    if isinstance(value, dict):
        return str(value.get(key, ""))
    return input_text
