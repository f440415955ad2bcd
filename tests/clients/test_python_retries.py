"""Opt-in retries of the Python SDK against a server that is UNAVAILABLE a set number of times."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from contextd_client import (
    AsyncContextClient,
    ContextClient,
    NotFoundError,
    RetryPolicy,
    UnavailableError,
    cpb,
    cpb_grpc,
    pb,
    pb_grpc,
)

FAST = RetryPolicy(attempts=3, initial_backoff=0.01, max_backoff=0.05, jitter=0)


class FlakyServer(pb_grpc.ContextServiceServicer, cpb_grpc.ChatServiceServicer):
    """Fails the first ``failures`` calls of each kind with ``code``, then answers; counts calls."""

    def __init__(self) -> None:
        self.failures = 0
        self.code = grpc.StatusCode.UNAVAILABLE
        self.calls = 0
        self.lock = threading.Lock()

    def _fail_or_pass(self, context: grpc.ServicerContext) -> None:
        with self.lock:
            self.calls += 1
            failing = self.calls <= self.failures
        if failing:
            context.abort(self.code, f"failure {self.calls}")

    def ListTokenizers(self, request: Any, context: grpc.ServicerContext) -> Any:
        self._fail_or_pass(context)
        return pb.ListTokenizersResponse(default_tokenizer="estimate")

    def StreamChat(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        self._fail_or_pass(context)
        yield cpb.StreamChatResponse(turn_completed=cpb.TurnCompleted(final_text="ok"))


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FlakyServer, str]]:
    flaky = FlakyServer()
    grpc_server = grpc.server(ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_ContextServiceServicer_to_server(flaky, grpc_server)
    cpb_grpc.add_ChatServiceServicer_to_server(flaky, grpc_server)
    port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    yield flaky, f"127.0.0.1:{port}"
    grpc_server.stop(None)


@pytest.fixture
def flaky(server: tuple[FlakyServer, str]) -> FlakyServer:
    fake = server[0]
    fake.failures, fake.calls, fake.code = 0, 0, grpc.StatusCode.UNAVAILABLE
    return fake


@pytest.fixture
def flaky_address(server: tuple[FlakyServer, str]) -> str:
    return server[1]


def test_unavailable_is_retried_until_it_succeeds(flaky: FlakyServer, flaky_address: str) -> None:
    flaky.failures = 2
    with ContextClient(flaky_address, retries=FAST) as client:
        assert client.list_tokenizers().default == "estimate"
    assert flaky.calls == 3


def test_the_last_attempt_raises(flaky: FlakyServer, flaky_address: str) -> None:
    flaky.failures = 3
    with (
        ContextClient(flaky_address, retries=FAST) as client,
        pytest.raises(UnavailableError) as error,
    ):
        client.list_tokenizers()
    assert error.value.message == "failure 3" and flaky.calls == 3


def test_retries_are_off_by_default(flaky: FlakyServer, flaky_address: str) -> None:
    flaky.failures = 1
    with ContextClient(flaky_address) as client, pytest.raises(UnavailableError):
        client.list_tokenizers()
    assert flaky.calls == 1


def test_other_codes_are_not_retried(flaky: FlakyServer, flaky_address: str) -> None:
    flaky.failures, flaky.code = 1, grpc.StatusCode.NOT_FOUND
    with ContextClient(flaky_address, retries=FAST) as client, pytest.raises(NotFoundError):
        client.list_tokenizers()
    assert flaky.calls == 1


def test_stream_chat_is_never_retried(flaky: FlakyServer, flaky_address: str) -> None:
    flaky.failures = 1
    with ContextClient(flaky_address, retries=FAST) as client, pytest.raises(UnavailableError):
        client.stream_chat("hi", user_id="ada").result()
    assert flaky.calls == 1


async def test_async_client_retries_too(flaky: FlakyServer, flaky_address: str) -> None:
    flaky.failures = 2
    async with AsyncContextClient(flaky_address, retries=FAST) as client:
        assert (await client.list_tokenizers()).default == "estimate"
    assert flaky.calls == 3
    flaky.failures, flaky.calls = 1, 0
    async with AsyncContextClient(flaky_address, retries=FAST) as client:
        with pytest.raises(UnavailableError):
            await client.stream_chat("hi", user_id="ada").result()
    assert flaky.calls == 1


def test_backoff_grows_to_its_cap() -> None:
    policy = RetryPolicy(initial_backoff=0.1, max_backoff=0.3, multiplier=2, jitter=0)
    assert [policy.backoff(n) for n in (1, 2, 3, 4)] == [0.1, 0.2, 0.3, 0.3]
    jittered = RetryPolicy(initial_backoff=1, jitter=0.5)
    assert all(0.5 <= jittered.backoff(1) <= 1.5 for _ in range(50))


@pytest.mark.parametrize(
    "kwargs",
    [{"attempts": 0}, {"initial_backoff": -1}, {"multiplier": 0.5}, {"jitter": 2}],
)
def test_policy_values_are_checked(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)
