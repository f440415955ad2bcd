"""Response ids of the Responses API: where in contextd a response lives, so that
``GET``, ``DELETE`` and ``previous_response_id`` need nothing stored besides the session.

An id names the user, the session, the turn and the point of the turn the response
answered from: its start (the user message) or the host's results for a call. It is
``resp_`` and that, in URL-safe base64 of a JSON array. A response that was not stored
(``store: false``) gets an id that names nothing (``unstored_id``).
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from dataclasses import dataclass

from contextd.core import json_text

PREFIX = "resp_"
# Far longer than any id made here: a longer one is refused before it is decoded.
_LONGEST = 1024


@dataclass(frozen=True, slots=True)
class ResponseId:
    user_id: str
    session_id: str
    turn_index: int
    # The call whose result the response went on from; "" for a turn's start.
    after_call: str = ""

    def text(self) -> str:
        fields = [self.user_id, self.session_id, self.turn_index, self.after_call]
        raw = json.dumps(fields, separators=(",", ":")).encode()
        return PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @staticmethod
    def parse(text: str) -> ResponseId | None:
        """The id ``text`` names, or None when it is not one of this server's."""
        if not text.startswith(PREFIX) or len(text) > _LONGEST:
            return None
        encoded = text[len(PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            fields = json_text.loads(raw)
        except (binascii.Error, ValueError):
            return None
        if not (
            isinstance(fields, list)
            and len(fields) == 4
            and all(isinstance(f, str) for f in (fields[0], fields[1], fields[3]))
            and isinstance(fields[2], int)
            and not isinstance(fields[2], bool)
            and fields[1]
        ):
            return None
        return ResponseId(fields[0], fields[1], fields[2], fields[3])


def unstored_id() -> str:
    """An id for a response nothing was stored of: lowercase hex after the prefix is
    never base64 of a JSON array (which begins "W", or "I", "C" or "D" for the
    whitespace JSON allows before it), so ``ResponseId.parse`` finds nothing in it."""
    return PREFIX + secrets.token_hex(24)
