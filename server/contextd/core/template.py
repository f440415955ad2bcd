"""{{variable}} placeholders in prompt templates and skills."""

from __future__ import annotations

import re
from collections.abc import Mapping

from contextd.core.errors import Violations

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")


def placeholders(template: str) -> list[str]:
    """Variable names a template uses, in order of first use."""
    return list(dict.fromkeys(m.group(1) for m in _PLACEHOLDER.finditer(template)))


def render(template: str, variables: Mapping[str, str], violations: Violations, field: str) -> str:
    """Fill every placeholder; each missing variable is recorded as ``field.<name>``."""
    for name in placeholders(template):
        if name not in variables:
            violations.add(f"{field}.{name}", f"the template needs variable {name!r}")
    return _PLACEHOLDER.sub(lambda m: variables.get(m.group(1), m.group(0)), template)
