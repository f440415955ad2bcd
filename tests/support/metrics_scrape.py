"""Reading a test server's ``GET /metrics`` (``--metrics-port``) as parsed samples."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.support.server import ServerProcess


def logged_address(server: ServerProcess, msg: str) -> str:
    """The address of the one ``msg`` line the server logged (``metrics listening``, ...)."""
    [line] = server.logs(msg)
    return str(line["address"])


def scrape(server: ServerProcess) -> list[Sample]:
    url = f"http://{logged_address(server, 'metrics listening')}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        assert reply.headers["Content-Type"].startswith("text/plain")
        text = reply.read().decode()
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    return sum(
        s.value
        for s in samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def scrape_until(
    server: ServerProcess, ready: Callable[[list[Sample]], bool], timeout: float = 5.0
) -> list[Sample]:
    """A scrape ``ready`` accepts, or the last one after ``timeout``: a call is counted
    when it has ended on the server, which may be after its client saw the status."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(server)
        if ready(samples) or time.monotonic() > deadline:
            return samples
        time.sleep(0.02)
