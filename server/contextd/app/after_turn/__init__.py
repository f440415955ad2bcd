"""Background work after a chat turn: atomic memories, compression and session summaries.

Where things are:

- ``runner``: ``AfterTurnRunner``, which schedules the work of each turn that ended ok
  (a queue, its limits, shutdown, the counters) and runs its jobs in order;
- one module per job: ``memories`` (facts about the user, from the turn),
  ``compression`` (the session's older messages folded into a summary) and
  ``session_summary`` (what the user's other sessions show of this one);
- ``model``: the model as the jobs call it, and their one way to fall back to their
  rule-based result when it is not used or fails;
- ``work``: what every job is given (the finished turn, its exchange, the settings,
  the counters) and the guard each part runs in.

Where other processes share the database, the writes stay safe when theirs run at the
same time: a user's memory writes take a lock in the database
(``Database.lock_in_transaction``), a session's compression writes hold its session's row
(``Database.next_session_version``), a replacement applies only to the text it read, and
a compression summary is written only over the one it was made from. Every
failure is logged on ``contextd.after_turn`` and never reaches the chat.

The session's event log is not written: its event types describe a turn, and this work
happens after the turn's ``turn_end``. Its record is ``memory_history``.
"""

from contextd.app.after_turn.runner import AfterTurnRunner
from contextd.app.after_turn.work import AfterTurnSettings, AfterTurnStats, FinishedTurn

__all__ = ["AfterTurnRunner", "AfterTurnSettings", "AfterTurnStats", "FinishedTurn"]
