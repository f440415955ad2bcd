"""/v1 under --rate-limit: the native limit answers, as 429 with Retry-After, which the
SDK raises as its RateLimitError; a refused turn stores nothing."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest
from contextd.store.event_log.events import HISTORY_DIR

from tests.support.grpc_web import web_address
from tests.support.server import ServerProcess, start_server

# Stored turns, each in a session of its own: an inline turn stores nothing to count.
NEW = {"X-Contextd-Session": "new"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(
        tmp_path_factory.mktemp("openai-limits"),
        *("--web-port", "0", "--openai-api", "--rate-limit", "0.05", "--rate-limit-burst", "2"),
    )
    yield proc
    assert proc.stop() == 0


def client(proc: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"http://{web_address(proc)}/v1", api_key="unused", max_retries=0)


def test_over_the_rate_a_request_is_429_with_retry_after(server: ServerProcess) -> None:
    with client(server) as c:
        for _ in range(2):  # the burst (keyed by the client's address: no user named)
            c.models.list()
        with pytest.raises(openai.RateLimitError) as limited:
            c.models.list()
    assert int(limited.value.response.headers["retry-after"]) >= 1
    assert limited.value.code == "rate_limit_exceeded"


def test_a_turn_over_the_rate_stores_nothing(server: ServerProcess) -> None:
    messages = [{"role": "user", "content": "count me"}]
    with client(server) as c:
        for _ in range(2):  # the burst of user rob
            c.chat.completions.create(
                model="echo", messages=messages, user="rob", extra_headers=NEW
            )  # type: ignore[arg-type]
        with pytest.raises(openai.RateLimitError):
            c.chat.completions.create(
                model="echo", messages=messages, user="rob", extra_headers=NEW
            )  # type: ignore[arg-type]
    # Counted on disk: any call naming rob would be over the rate too. Each stored turn
    # started a session, whose event log is a file of its own.
    assert len(list((server.data_dir / HISTORY_DIR).glob("*.jsonl"))) == 2
