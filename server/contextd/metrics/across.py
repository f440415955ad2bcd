"""One ``/metrics`` for a server of several workers (``--workers N``): each worker hands
its figures over a private Unix socket as a snapshot (``snapshot``), and ``Totals``
merges the snapshots into the whole server's families.

How a family is merged is said where it is declared (``Across``): counters and
histograms are summed; a worker's last snapshot stays in the sums after it ends, so a
total never goes backwards when a worker is started again and nothing is counted twice.
Gauges are summed over the workers that answered this scrape (a gauge of a worker that
ended is gone with it), or are the largest when every worker reads the same figure of
the whole server; a family merged ``EACH`` keeps one series per worker (a ``worker``
label)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

WORKER_LABEL = "worker"
_CUMULATIVE = {"counter", "histogram", "summary"}

# A sample's identity: its name and its sorted labels.
_Key = tuple[str, tuple[tuple[str, str], ...]]


class Across(Enum):
    """How one family's figures add up across workers."""

    SUM = "sum"  # counters, histograms, and gauges of what each worker holds
    SAME = "same"  # a gauge every worker reads alike (the database's size): the largest
    EACH = "each"  # one series per worker, labelled ``worker``: a worker's own health


def snapshot(registry: CollectorRegistry, across: Mapping[str, Across], pid: int) -> bytes:
    """This worker's families as JSON, each with how it is merged (``across`` by family
    name; SUM when absent)."""
    families = [
        {
            "name": family.name,
            "type": family.type,
            "help": family.documentation,
            "across": across.get(family.name, Across.SUM).value,
            # ``_created`` is a time, not a figure that adds up (the server has none).
            "samples": [
                [s.name, s.labels, s.value]
                for s in family.samples
                if not s.name.endswith("_created")
            ],
        }
        for family in registry.collect()
    ]
    return json.dumps({"pid": pid, "families": families}).encode()


@dataclass
class _Family:
    name: str
    type: str
    help: str
    samples: dict[_Key, float] = field(default_factory=dict)
    across: Across = Across.SUM


@dataclass
class Answer:
    pid: int
    families: dict[str, _Family]


def parse(index: int, body: bytes) -> Answer:
    """Worker ``index``'s snapshot; ValueError when it is not one."""
    try:
        loaded: Any = json.loads(body)
        families: dict[str, _Family] = {}
        for raw in loaded["families"]:
            across = Across(raw["across"])
            family = _Family(str(raw["name"]), str(raw["type"]), str(raw["help"]), across=across)
            for name, labels, value in raw["samples"]:
                if across is Across.EACH:
                    labels = {**labels, WORKER_LABEL: str(index)}
                family.samples[(str(name), tuple(sorted(labels.items())))] = float(value)
            families[family.name] = family
        return Answer(int(loaded["pid"]), families)
    except (KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"not a snapshot: {error!r}") from None


class Totals:
    """The whole server's figures from the workers' snapshots, scrape after scrape."""

    def __init__(self) -> None:
        self._last: dict[int, Answer] = {}  # by worker index: its newest snapshot
        # The cumulative samples of workers that ended, by family (their last snapshot).
        self._ended: dict[str, _Family] = {}

    def merge(self, answers: Mapping[int, Answer]) -> list[Metric]:
        """Every family, from this scrape's ``answers`` (by worker index; a worker that
        did not answer is absent) and what earlier scrapes left."""
        for index, answer in answers.items():
            before = self._last.get(index)
            if before is not None and before.pid != answer.pid:  # started again
                self._retire(before)
            self._last[index] = answer
        merged: dict[str, _Family] = {}
        for name, ended in self._ended.items():
            merged[name] = _Family(ended.name, ended.type, ended.help, dict(ended.samples))
        for index, answer in self._last.items():
            for family in answer.families.values():
                if family.type in _CUMULATIVE or index in answers:
                    _add(merged, family)
        return [_metric(family) for family in merged.values()]

    def _retire(self, answer: Answer) -> None:
        for family in answer.families.values():
            if family.type in _CUMULATIVE:
                _add(self._ended, family)


def _add(into: dict[str, _Family], family: _Family) -> None:
    found = into.get(family.name)
    if found is None:
        found = into[family.name] = _Family(
            family.name, family.type, family.help, across=family.across
        )
    for key, value in family.samples.items():
        if family.across is Across.SAME:
            found.samples[key] = max(value, found.samples.get(key, value))
        else:
            found.samples[key] = found.samples.get(key, 0.0) + value


def _metric(family: _Family) -> Metric:
    metric = Metric(family.name, family.help, family.type)
    for (name, labels), value in family.samples.items():
        metric.add_sample(name, dict(labels), value)
    return metric


class Merged:
    """A collector that yields the families of the last merge."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self._families
