"""A histogram for the event loop's thread only, cheaper per observation than
prometheus_client's (which takes a lock and walks its buckets in Python): the metrics
endpoint is served on the same loop, so nothing reads it while it is written."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

from prometheus_client.metrics_core import HistogramMetricFamily, Metric


class LoopHistogramChild:
    """One label set's buckets (each counted alone; made cumulative when scraped)."""

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float]) -> None:
        self._bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self._bounds, value)] += 1
        self.sum += value


class LoopHistogram:
    """A collector: register it in a registry, then ``labels(...)`` once per label set."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float]
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = list(labelnames)
        self._bounds = sorted(buckets)
        self._children: dict[tuple[str, ...], LoopHistogramChild] = {}

    def labels(self, *values: str) -> LoopHistogramChild:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = LoopHistogramChild(self._bounds)
        return child

    def collect(self) -> Iterable[Metric]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for values, child in self._children.items():
            total = 0
            buckets: list[tuple[str, float]] = []
            for bound, count in zip([*self._bounds, float("inf")], child.counts, strict=True):
                total += count
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), total))
            family.add_metric(list(values), buckets, child.sum)
        yield family
