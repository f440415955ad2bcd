"""Which of a user's memories each use sees, by scope.

* A session's build (the ``memory`` layer) and its chat's ``memory_search`` tool see the
  user's memories of no scope and those of the session's host app (``Session.host``, e.g.
  "word"; the build request's host when it names one), of no agent: what the user told
  any host, and what this host noted for itself. Memories of an agent are seen only by
  calls that name the agent.
* The work after a turn weighs new facts against the user's memories of no scope, and
  writes its facts there: scoped memories are their host's to change.

How long a scope's memories are kept by default is app/memories.py's ExpiryDefaults.
"""

from __future__ import annotations

from contextd.store.memory.filters import MemoryFilter

USER_FACTS = MemoryFilter(agents=("",), apps=("",))


def session_memories(host: str) -> MemoryFilter:
    """The memories a session of ``host`` sees (see the module doc)."""
    return MemoryFilter(agents=("",), apps=("", host) if host else ("",))
