"""An ephemeral turn's recorder: nothing of the turn is stored (no message, partial
answer or usage), its steps are kept in memory only (``kept``, which its prebuilt
contexts go on from), and its usage is its session's, the session being one never
stored. Its log writes no line (event_log.TurnLog of a session without an id) and its
end hands nothing to the after-turn work (turn_end.TurnEnd)."""

from __future__ import annotations

from collections.abc import Sequence

from contextd.app.chat.recorder import TurnRecorder
from contextd.core.messages import ChatMessage
from contextd.store.event_log.events import LogLines
from contextd.store.models import NewMessage, StoredMessage


class EphemeralRecorder(TurnRecorder):
    """A ``TurnRecorder`` that keeps and never stores."""

    __slots__ = ()

    def begin_step(self, prompt_tokens_estimate: int) -> None:
        self._turn.begin_step(prompt_tokens_estimate)  # no partial answer to save

    async def store(
        self, rows: Sequence[NewMessage], *, step: bool = True, logged: LogLines | None = None
    ) -> list[StoredMessage]:
        self.kept.extend(row.message for row in rows)
        return []

    async def store_step(self, message: ChatMessage) -> StoredMessage | None:
        self.kept.append(message)
        return None

    async def store_answer(
        self, message: ChatMessage, status: str = "", logged: LogLines | None = None
    ) -> StoredMessage | None:
        usage = self._turn.usage
        usage.stored(usage.turn.totals())
        return None
