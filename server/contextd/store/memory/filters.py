"""Which of a user's memories a search or a listing considers, as SQL conditions.

Every read of memories goes through :func:`conditions`, so that "current" means one
thing everywhere: not superseded, not ended (``valid_to`` passed) and not expired. A
memory whose ``valid_from`` is still to come counts as current (the host said it; a
plan, say). A filter with ``as_of`` asks for what was true then instead: ``valid_from``
at or before it, ``valid_to`` after it, superseded memories included. An expired memory
is left out either way: it is as good as deleted, until the retention task deletes it.

Scope and time conditions are columns of ``memories``; a metadata pair is looked up in
``memory_metadata`` (its (tenant, user, key, value) index), one pair at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class MemoryFilter:
    """Conditions that must all hold. ``agents`` / ``apps``: any of these (None: any);
    ``metadata``: pairs the memory must have; times in epoch seconds, ``*_after``
    inclusive and ``*_before`` exclusive; ``as_of``: true at that time (None: now)."""

    agents: tuple[str, ...] | None = None
    apps: tuple[str, ...] | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    created_after: float | None = None
    created_before: float | None = None
    updated_after: float | None = None
    updated_before: float | None = None
    as_of: float | None = None

    @property
    def narrows(self) -> bool:
        """Whether it asks for more than the memories true now: then a search checks it
        on every match, not only on the best ones."""
        return self != CURRENT

    @property
    def reads_past(self) -> bool:
        """Whether superseded memories may meet it."""
        return self.as_of is not None


# Every memory of the user that is true now.
CURRENT = MemoryFilter()

_TIMES = (
    ("created_after", "created_at", ">="),
    ("created_before", "created_at", "<"),
    ("updated_after", "updated_at", ">="),
    ("updated_before", "updated_at", "<"),
)


def conditions(
    memory_filter: MemoryFilter, now: float, alias: str = "m"
) -> tuple[str, dict[str, Any]]:
    """The SQL condition (``:f_*`` parameters, columns of ``alias``; "" for none) that a
    memory of the user named by ``:tenant_id`` and ``:user_id`` meets the filter at
    ``now``, and its parameters (the caller adds ``tenant_id`` and ``user_id``)."""
    m = f"{alias}." if alias else ""
    f = memory_filter
    params: dict[str, Any] = {"f_now": now}
    if f.as_of is None:
        parts = [
            f"{m}superseded_by = 0",
            f"({m}valid_to IS NULL OR {m}valid_to > :f_now)",
        ]
    else:
        parts = [
            f"({m}valid_from IS NULL OR {m}valid_from <= :f_at)",
            f"({m}valid_to IS NULL OR {m}valid_to > :f_at)",
        ]
        params["f_at"] = f.as_of
    parts.append(f"({m}expires_at IS NULL OR {m}expires_at > :f_now)")
    for column, values in (("agent", f.agents), ("app", f.apps)):
        if values is None:
            continue
        names = [f"f_{column}{i}" for i in range(len(values))]
        params.update(zip(names, values, strict=True))
        parts.append(f"{m}{column} IN ({', '.join(':' + n for n in names)})")
    for name, column, operator in _TIMES:
        value = getattr(f, name)
        if value is not None:
            parts.append(f"{m}{column} {operator} :f_{name}")
            params[f"f_{name}"] = value
    for i, (key, value) in enumerate(f.metadata):
        parts.append(
            f"{m}id IN (SELECT memory_id FROM memory_metadata WHERE tenant_id = :tenant_id"
            f" AND user_id = :user_id AND key = :f_key{i} AND value = :f_value{i})"
        )
        params[f"f_key{i}"] = key
        params[f"f_value{i}"] = value
    return " AND ".join(parts), params
