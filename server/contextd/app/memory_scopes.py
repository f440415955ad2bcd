"""Which of a user's memories each use sees, by scope, and how long a scope's memories
are kept by default.

* A session's build (the ``memory`` layer) and its chat's ``memory_search`` tool see the
  user's memories of no scope and those of the session's host app (``Session.host``, e.g.
  "word"), of no agent: what the user told any host, and what this host noted for itself.
  Memories of an agent are seen only by calls that name the agent.
* The work after a turn weighs new facts against the user's memories of no scope, and
  writes its facts there: scoped memories are their host's to change.

``--memory-expiry-days`` gives a scope's memories an expiry when AddMemory gives none:
``app:word=30,agent:planner=7``. A memory of an app and an agent that both have one gets
the sooner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from contextd.app.scope import is_user_id
from contextd.store.memory.filters import MemoryFilter
from contextd.store.memory.versions import MemoryDetails

DAY = 86400.0

USER_FACTS = MemoryFilter(agents=("",), apps=("",))


def session_memories(host: str) -> MemoryFilter:
    """The memories a session of ``host`` sees (see the module doc)."""
    return MemoryFilter(agents=("",), apps=("", host) if host else ("",))


@dataclass(frozen=True, slots=True)
class ExpiryDefaults:
    """Days a scope's memories are kept, by app and by agent."""

    apps: dict[str, float] = field(default_factory=dict)
    agents: dict[str, float] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> ExpiryDefaults:
        """``app:NAME=DAYS`` and ``agent:NAME=DAYS``, comma-separated; ValueError naming
        what is wrong."""
        apps: dict[str, float] = {}
        agents: dict[str, float] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            scope, _, days_text = item.partition("=")
            kind, _, name = scope.strip().partition(":")
            target = {"app": apps, "agent": agents}.get(kind)
            try:
                days = float(days_text)
            except ValueError:
                days = math.nan
            if target is None or not is_user_id(name) or not (math.isfinite(days) and days > 0):
                raise ValueError(
                    "--memory-expiry-days takes app:NAME=DAYS or agent:NAME=DAYS items, "
                    f"comma-separated, with a positive number of days (not {item[:80]!r})"
                )
            target[name] = days
        return cls(apps, agents)

    def apply(self, details: MemoryDetails, now: float) -> MemoryDetails:
        """``details`` with the expiry its scope's defaults give (the sooner of its app's
        and its agent's), when it has none."""
        days = [
            d for d in (self.apps.get(details.app), self.agents.get(details.agent)) if d is not None
        ]
        if details.expires_at is not None or not days:
            return details
        return replace(details, expires_at=now + min(days) * DAY)
