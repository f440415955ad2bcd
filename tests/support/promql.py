"""Just enough of PromQL to check a dashboard's expressions against a scrape: the
metric selectors and the grouping labels of an expression.

The dashboard writes every metric with a ``{...}`` matcher list (its ``job`` and
``instance`` variables), so a selector is a name followed by braces; ``bare_names``
finds any other identifier that is not a PromQL function or keyword, so that a metric
written without braces cannot slip past the checks."""

from __future__ import annotations

import re
from dataclasses import dataclass

_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_RANGE = re.compile(r"\[[^\]]*\]")
_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_:]*")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b")
# The functions and keywords the dashboard may use around its selectors.
_KEYWORDS = (
    "sum avg min max count topk bottomk quantile by without on ignoring group_left "
    "group_right and or unless bool rate irate increase delta histogram_quantile "
    "scalar vector abs clamp_min clamp_max offset"
)
KEYWORDS = frozenset(_KEYWORDS.split())


@dataclass(frozen=True)
class Selector:
    metric: str
    labels: tuple[str, ...]


def selectors(expr: str) -> list[Selector]:
    found = []
    for name, body in _SELECTOR.findall(expr):
        matchers = _MATCHER.findall(body)
        assert "".join(m.group(0) for m in _MATCHER.finditer(body)).strip() == body.strip(), (
            f"cannot read the matchers {body!r} of {expr!r}"
        )
        found.append(Selector(name, tuple(label for label, _, _ in matchers)))
    return found


def grouping_labels(expr: str) -> set[str]:
    return {
        label.strip() for group in _GROUPING.findall(expr) for label in group.split(",") if label
    }


def bare_names(expr: str) -> set[str]:
    """Identifiers outside selectors and grouping clauses that PromQL does not define."""
    rest = _RANGE.sub(" ", _GROUPING.sub(" ", _SELECTOR.sub(" ", expr)))
    return set(_NAME.findall(_NUMBER.sub(" ", rest))) - KEYWORDS
