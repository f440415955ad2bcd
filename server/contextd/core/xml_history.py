"""A session's event log as the XML history: one element per turn with its steps.

The document, piece by piece (``XmlHistory``), so that an export streams it as it reads
the log instead of holding the whole log::

    <?xml version="1.0" encoding="UTF-8"?>
    <history session_id="...">
      <session_start ts="..."><meta name="mode">interactive</meta>...</session_start>
      <turn index="1">
        <turn_start ts="..." role="user"><content>...</content>...</turn_start>
        <step index="0">
          <assistant ts="..." role="assistant"><content>...</content>...</assistant>
        </step>
        <final ts="..." role="assistant">...</final>
        <turn_end ts="...">...</turn_end>
      </turn>
      <session_end ts="...">...</session_end>
    </history>

Every event is an element named by its type, with ``ts`` and ``role`` as attributes, its
content in ``<content>`` and each meta entry in ``<meta name="key">``: a string as it is,
anything else as its JSON text. A turn's consecutive events share its ``<turn>`` element
(a turn continued with tool results included); its events of one model call share a
``<step>``. Characters XML cannot carry at all (most control characters) become U+FFFD;
a carriage return is written as a character reference so that a parser gives it back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'
TAIL = "</history>\n"

# Outside XML 1.0's Char production: not even a character reference can carry these.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_TEXT = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
# In an attribute a parser turns tabs and line breaks into spaces unless they are
# references.
_ATTRIBUTE = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\t": "&#9;", "\n": "&#10;"}
    | {"\r": "&#13;"}
)


def text(value: str) -> str:
    """``value`` as element content."""
    return _NOT_XML.sub("\ufffd", value).translate(_TEXT)


def attribute(value: str) -> str:
    """``value`` as a double-quoted attribute value (without the quotes)."""
    return _NOT_XML.sub("\ufffd", value).translate(_ATTRIBUTE)


def event_element(event: Mapping[str, Any], indent: str) -> str:
    """One event as its element, on one line."""
    name = str(event.get("type", "event"))
    attrs = f' ts="{attribute(str(event.get("ts", "")))}"'
    if event.get("role") is not None:
        attrs += f' role="{attribute(str(event["role"]))}"'
    body = ""
    if event.get("content") is not None:
        body += f"<content>{text(str(event['content']))}</content>"
    meta = event.get("meta")
    if isinstance(meta, Mapping):
        for key, value in meta.items():
            shown = value if isinstance(value, str) else _json(value)
            body += f'<meta name="{attribute(str(key))}">{text(shown)}</meta>'
    if not body:
        return f"{indent}<{name}{attrs}/>\n"
    return f"{indent}<{name}{attrs}>{body}</{name}>\n"


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class XmlHistory:
    """Turns events, in log order, into the document's pieces: ``head`` first, then
    ``add`` for every event (a finished piece when one is), then ``end``."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._turn: int | None = None
        self._step: int | None = None
        self._open = ""  # the open turn element so far

    def head(self) -> str:
        return f'{HEAD}<history session_id="{attribute(self.session_id)}">\n'

    def add(self, event: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """(type, piece) pairs finished by ``event``: a turn it follows, and the event
        itself when it belongs to no turn."""
        turn = event.get("turn")
        if turn != self._turn and self._turn is not None:
            yield "turn", self._close_turn()
        if not isinstance(turn, int):
            yield str(event.get("type", "")), event_element(event, "  ")
            return
        if self._turn is None:
            self._turn = turn
            self._open = f'  <turn index="{turn}">\n'
        step = event.get("step")
        if step != self._step:
            self._close_step()
            if isinstance(step, int):
                self._open += f'    <step index="{step}">\n'
                self._step = step
        self._open += event_element(event, "      " if self._step is not None else "    ")

    def end(self) -> Iterator[tuple[str, str]]:
        """The open turn, if any, and the document's end."""
        if self._turn is not None:
            yield "turn", self._close_turn()
        yield "tail", TAIL

    def _close_step(self) -> None:
        if self._step is not None:
            self._open += "    </step>\n"
            self._step = None

    def _close_turn(self) -> str:
        self._close_step()
        piece = self._open + "  </turn>\n"
        self._turn = None
        self._open = ""
        return piece
