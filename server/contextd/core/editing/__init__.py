"""Context editing: a history's tool results capped and old ones cleared, before the budget.

Where things are:

- ``settings``: what a request asks for (``EditingOptions``, each field unset for the
  server's default) and what a build applies (``EditingSettings``), with their checks;
- ``capping``: one tool result kept to its head and tail around a marker that says how
  much was left out;
- ``clearing``: which old tool results are replaced by a placeholder, decided by
  replaying the history, so that the answer only changes when a trigger is crossed;
- ``edit``: the two applied to a history (``edit_history``), each change reported as a
  ``MessageEdit``.

Editing is pure: the same history and settings give the same bytes, on every path
(inline, session mode, chat), and a cleared result stays in the store.
"""

from contextd.core.editing.edit import EditedHistory, edit_history, has_tool_results
from contextd.core.editing.report import EditKind, MessageEdit
from contextd.core.editing.settings import (
    EditingOptions,
    EditingSettings,
    check_editing,
)

__all__ = [
    "EditKind",
    "EditedHistory",
    "EditingOptions",
    "EditingSettings",
    "MessageEdit",
    "check_editing",
    "edit_history",
    "has_tool_results",
]
