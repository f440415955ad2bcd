"""Starting a child that must take Ctrl-C (SIGINT) as a terminal's foreground job does.

A shell without job control (``make test &``, nohup, CI runners) starts background
commands with SIGINT and SIGQUIT ignored; exec keeps an ignored signal ignored and
Python then installs no Ctrl-C handler, so a test's SIGINT would never reach the child.
The child is therefore started through a small Python program that takes the
dispositions a shell gives its foreground job and then execs the command.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

# Run in the child, before the command: what a shell does for its foreground job.
DEFAULT_DISPOSITIONS = (
    "import os, signal, sys\n"
    "for number in (signal.SIGINT, signal.SIGQUIT):\n"
    "    signal.signal(number, signal.SIG_DFL)\n"
)
_EXEC = "os.execv(sys.argv[1], sys.argv[1:])\n"


def as_foreground_job(command: Sequence[str], before: str = "") -> list[str]:
    """``command`` (its program a path) run with the default dispositions; ``before``:
    Python to run in the child first (it may use os, signal and sys)."""
    return [sys.executable, "-c", DEFAULT_DISPOSITIONS + before + _EXEC, *command]
