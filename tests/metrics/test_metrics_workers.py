"""``--metrics-port`` with ``--workers 2``: one scrape holds the calls every worker
served, passes ``promtool check metrics``, reads the database's size once, shows each
worker's event loop apart, and a worker killed and started again leaves its counts in
the totals once."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.api.test_workers import READY, call_workers, wait_for_restart, worker_pids
from tests.support.metrics_scrape import logged_address, scrape, scrape_until, value
from tests.support.sdk import free_port
from tests.support.server import ServerProcess, start_server
from tests.support.workers import OWN_CONNECTION, channel_to_worker, count_tokens


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(
        tmp_path_factory.mktemp("metrics-workers"),
        *("--workers", "2", "--metrics-port", str(free_port())),
        ready=READY,
    )
    yield proc
    assert proc.stop() == 0
    assert not [e for e in proc.log_lines if e.get("level") == "ERROR"]


def counted(samples: list[Sample], method: str) -> float:
    labels = {"grpc_method": method, "grpc_code": "OK"}
    return value(samples, "grpc_server_handled_total", **labels)


def test_one_scrape_holds_the_calls_of_every_worker(server: ServerProcess) -> None:
    before = counted(scrape(server), "CountTokens")
    since = len(server.logs("rpc"))
    calls = 24  # one connection each: all on one worker has odds of 2 in 2**24
    for _ in range(calls):
        with grpc.insecure_channel(server.address, options=OWN_CONNECTION) as channel:
            count_tokens(channel)
    deadline = time.monotonic() + 10
    while call_workers(server, since) != {0, 1}:
        assert time.monotonic() < deadline, call_workers(server, since)
        time.sleep(0.05)
    samples = scrape_until(server, lambda s: counted(s, "CountTokens") >= before + calls)
    assert counted(samples, "CountTokens") == before + calls
    # The calls are summed, not shown per worker.
    assert not any("worker" in s.labels for s in samples if s.name.startswith("grpc_server"))
    assert value(samples, "contextd_workers") == 2


def test_gauges_are_read_once_or_summed_and_each_loop_is_shown_apart(
    server: ServerProcess,
) -> None:
    samples = scrape_until(
        server,
        lambda s: all(
            value(s, "contextd_event_loop_lag_seconds_count", worker=w) >= 1 for w in "01"
        ),
    )
    [size] = [s for s in samples if s.name == "contextd_database_size_bytes"]
    on_disk = sum(
        path.stat().st_size
        for path in server.data_dir.iterdir()
        if path.name.startswith("contextd.sqlite3")
    )
    assert 0 < size.value <= on_disk * 1.5  # the one database's size, not the sum of two
    [info] = [s for s in samples if s.name == "contextd_build_info"]
    assert info.value == 1
    assert value(samples, "contextd_after_turn_pending") == 0
    lag = [s for s in samples if s.name == "contextd_event_loop_lag_seconds_count"]
    assert sorted(s.labels["worker"] for s in lag) == ["0", "1"]


def test_promtool_accepts_the_scrape(server: ServerProcess) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        reason = "promtool (Debian: the prometheus package) is not installed"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    url = f"http://{logged_address(server, 'metrics listening')}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        text = reply.read()
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    names = [f.name for f in text_string_to_metric_families(text.decode())]
    assert len(names) == len(set(names))


def test_a_worker_killed_and_started_again_is_counted_once(server: ServerProcess) -> None:
    """What the killed worker counted up to the last scrape stays in the totals, once;
    its replacement counts from there on."""
    start = counted(scrape(server), "CountTokens")
    channel, calls = channel_to_worker(server, 1)
    with channel:
        for _ in range(5):
            count_tokens(channel)
    calls += 5
    seen = scrape_until(server, lambda s: counted(s, "CountTokens") >= start + calls)
    assert counted(seen, "CountTokens") == start + calls
    lag = value(seen, "contextd_event_loop_lag_seconds_count", worker="1")
    victim = worker_pids(server)[1]
    os.kill(victim, signal.SIGKILL)
    wait_for_restart(server, 1, victim)
    after = scrape_until(server, lambda s: value(s, "contextd_workers") == 2, timeout=20)
    assert value(after, "contextd_workers") == 2
    assert counted(after, "CountTokens") == start + calls  # not lost, not counted twice
    assert value(after, "contextd_event_loop_lag_seconds_count", worker="1") >= lag
    channel, more = channel_to_worker(server, 1)
    channel.close()
    calls += more
    moved = scrape_until(server, lambda s: counted(s, "CountTokens") >= start + calls)
    assert counted(moved, "CountTokens") == start + calls
