"""An atomic fact about the user, the memories it is checked against, and how a fact is
stored and labelled in the memory history."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from contextd.core.memory_facts.text import one_line

RULE_METHOD = "rule-fallback"
DEFAULT_MAX_FACTS = 5
DEFAULT_MAX_FACT_CHARS = 200


def llm_method(model: str) -> str:
    """The memory-history label of facts a model extracted."""
    return f"llm:{model or 'default'}"


@dataclass(frozen=True, slots=True)
class Fact:
    """One atomic fact about the user; ``replaces`` names the memory it supersedes."""

    text: str
    replaces: str = ""


@dataclass(frozen=True, slots=True)
class ExistingMemory:
    id: int
    text: str


def clean_fact_text(text: str, max_chars: int = DEFAULT_MAX_FACT_CHARS) -> str | None:
    """A fact as stored: on one line, without a list bullet; None if blank or too long.

    A fact over the limit is refused, not cut: half a fact can say something else.
    """
    flat = one_line(unicodedata.normalize("NFC", text))
    flat = re.sub(r"\A(?:[-*•·]|\d{1,2}[.)])\s+", "", flat).strip()
    if not flat or len(flat) > max_chars:
        return None
    return flat
