"""How the workers' figures add up into one ``/metrics`` (metrics/across.py): sums that
never go backwards when a worker is started again and count nothing twice, gauges of
the workers that answered only, one series per worker where asked."""

from __future__ import annotations

import json

import pytest
from contextd.metrics.across import Across, Answer, Totals, parse, snapshot
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric


def worker(
    pid: int, calls: float, pending: float, size: float, lag: list[float], index: int = 0
) -> Answer:
    """A worker's answer: a counter, a summed gauge, a gauge of the whole server, a
    histogram per worker; from a real registry through the wire format."""
    registry = CollectorRegistry()
    Counter("calls", "Calls.", ("method",), registry=registry).labels("Build").inc(calls)
    Gauge("pending", "Pending.", registry=registry).set(pending)
    Gauge("size_bytes", "Size.", registry=registry).set(size)
    histogram = Histogram("lag_seconds", "Lag.", buckets=(0.1,), registry=registry)
    for seconds in lag:
        histogram.observe(seconds)
    across = {"size_bytes": Across.SAME, "lag_seconds": Across.EACH}
    return parse(index, snapshot(registry, across, pid))


def samples(families: list[Metric]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


CALLS = ("calls_total", (("method", "Build"),))
PENDING = ("pending", ())
SIZE = ("size_bytes", ())


def lag_count(index: int) -> tuple[str, tuple[tuple[str, str], ...]]:
    return ("lag_seconds_count", (("worker", str(index)),))


def test_counters_and_gauges_add_up_and_a_gauge_of_the_server_is_read_once() -> None:
    totals = Totals()
    merged = samples(
        totals.merge(
            {0: worker(10, 3, 1, 500, [0.01]), 1: worker(11, 4, 2, 520, [0.2, 0.3], index=1)}
        )
    )
    assert merged[CALLS] == 7
    assert merged[PENDING] == 3
    assert merged[SIZE] == 520
    assert (merged[lag_count(0)], merged[lag_count(1)]) == (1, 2)
    assert merged[("lag_seconds_bucket", (("le", "0.1"), ("worker", "1")))] == 0
    assert ("lag_seconds_count", ()) not in merged


def test_a_worker_started_again_keeps_its_old_counts_once_and_its_gauges_go() -> None:
    totals = Totals()
    totals.merge({0: worker(10, 3, 1, 500, []), 1: worker(11, 4, 5, 500, [0.2], index=1)})
    # Worker 1 died and is being started again: its counts stay, its gauges are gone.
    between = samples(totals.merge({0: worker(10, 6, 1, 500, [])}))
    assert between[CALLS] == 6 + 4
    assert between[PENDING] == 1
    assert between[lag_count(1)] == 1
    # Started again as another process, from zero: the old process is counted once.
    after = samples(
        totals.merge({0: worker(10, 6, 1, 500, []), 1: worker(12, 2, 0, 500, [0.5], index=1)})
    )
    assert after[CALLS] == 6 + 4 + 2
    assert after[PENDING] == 1
    assert after[lag_count(1)] == 2
    # And again the next scrape: nothing moved, nothing counted twice.
    again = samples(
        totals.merge({0: worker(10, 6, 1, 500, []), 1: worker(12, 2, 0, 500, [0.5], index=1)})
    )
    assert again == after


def test_a_label_set_only_an_ended_worker_had_stays() -> None:
    totals = Totals()
    registry = CollectorRegistry()
    Counter("calls", "Calls.", ("method",), registry=registry).labels("Rare").inc()
    totals.merge({1: parse(1, snapshot(registry, {}, 11))})
    merged = samples(totals.merge({1: worker(12, 1, 0, 0, [], index=1)}))
    assert merged[("calls_total", (("method", "Rare"),))] == 1
    assert merged[CALLS] == 1


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"pid": 1}',
        json.dumps({"pid": 1, "families": [{"name": "x"}]}).encode(),
        json.dumps(
            {
                "pid": 1,
                "families": [
                    {"name": "x", "type": "gauge", "help": "", "across": "odd", "samples": []}
                ],
            }
        ).encode(),
    ],
)
def test_what_is_not_a_snapshot_is_refused(body: bytes) -> None:
    with pytest.raises(ValueError):
        parse(0, body)
