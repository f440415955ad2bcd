"""{{variable}} placeholders in prompt templates and skills."""

from __future__ import annotations

import re
from collections.abc import Mapping

from contextd.core.errors import Violations

# The scenario a session or request names to have no template at all, not even the one
# of the scenario named like its host; no template can have this name.
NO_SCENARIO = "-"

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")


def placeholders(template: str) -> list[str]:
    """Variable names a template uses, in order of first use."""
    return list(dict.fromkeys(m.group(1) for m in _PLACEHOLDER.finditer(template)))


class MissingVariables:
    """Variables without a value, each with the texts that need it.

    The template and several skills can need the same variable; the caller gets one
    violation per variable that names all of them, not one per text.
    """

    def __init__(self) -> None:
        self._needed_by: dict[str, list[str]] = {}

    def note(self, name: str, needed_by: str) -> None:
        users = self._needed_by.setdefault(name, [])
        if needed_by not in users:
            users.append(needed_by)

    def report(self, violations: Violations, field: str) -> None:
        """One violation ``field.<name>`` per missing variable, in order of first use."""
        for name, users in self._needed_by.items():
            violations.add(f"{field}.{name}", f"no value; needed by {_listed(users)}")


def render(
    template: str, variables: Mapping[str, str], missing: MissingVariables, needed_by: str
) -> str:
    """Fill every placeholder; a variable with no value is noted in ``missing`` as needed
    by ``needed_by`` (such as ``the template`` or ``skill 'sumif'``) and left as it is."""
    for name in placeholders(template):
        if name not in variables:
            missing.note(name, needed_by)
    return _PLACEHOLDER.sub(lambda m: variables.get(m.group(1), m.group(0)), template)


def _listed(users: list[str]) -> str:
    if len(users) == 1:
        return users[0]
    return ", ".join(users[:-1]) + " and " + users[-1]
