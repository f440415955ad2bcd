"""A counter for the event loop's thread only, cheaper per increment than
prometheus_client's (which takes a lock and checks the label set each time): like
``LoopHistogram``, written and read on the loop's thread only."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client.metrics_core import CounterMetricFamily, Metric


class LoopCounterChild:
    """One label set's total."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        self.value += amount


class LoopCounter:
    """A collector: register it in a registry, then ``labels(...)`` once per label set.
    ``name`` without ``_total``, as prometheus_client's ``Counter`` takes it."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str]) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = list(labelnames)
        self._children: dict[tuple[str, ...], LoopCounterChild] = {}

    def labels(self, *values: str) -> LoopCounterChild:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = LoopCounterChild()
        return child

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for values, child in self._children.items():
            family.add_metric(list(values), child.value)
        yield family
