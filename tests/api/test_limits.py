"""Per-caller limits on a real server: ``--rate-limit`` per credential (per user or address
with ``--auth none``) and ``--max-concurrent-turns`` per user. Over a limit a call gets
RESOURCE_EXHAUSTED with a RetryInfo delay at once, does nothing, and succeeds after it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, context_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.auth import bearer, create_key
from tests.support.chat_live import ChatFake, new_user, openai_fake, request
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.fakes.llm_server import JSONReply, StreamReply
from tests.support.server import ServerProcess, start_server
from tests.support.status import retry_delay, status_of

# One request per second, three at once: a burst of calls runs out within the first few.
RATE = ("--rate-limit", "1", "--rate-limit-burst", "3")


def exhaust(call: Any) -> grpc.RpcError:
    """Calls ``call()`` until it is refused (the first three must pass); the refusal."""
    return exhaust_counted(call)[0]


def exhaust_counted(call: Any) -> tuple[grpc.RpcError, int]:
    """The refusal and how many calls passed before it."""
    for passed in range(10):
        try:
            call()
        except grpc.RpcError as error:
            assert passed >= 3, f"refused after {passed} calls, the burst is 3"
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
            return error, passed
    raise AssertionError("never refused")


def check_refusal(error: grpc.RpcError, most_s: float) -> float:
    assert "rate limit" in (error.details() or "")
    delay = retry_delay(status_of(error))
    assert 0 < delay <= most_s
    return delay


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str, str]]:
    data_dir = tmp_path_factory.mktemp("limits")
    alice, bob = create_key(data_dir, "alice"), create_key(data_dir, "bob")
    proc = start_server(data_dir, "--auth", "api-key", *RATE)
    try:
        yield proc, alice, bob
    finally:
        assert proc.stop() == 0


def test_a_burst_over_the_rate_is_refused_then_served(
    keyed: tuple[ServerProcess, str, str],
) -> None:
    proc, alice, bob = keyed
    with grpc.insecure_channel(proc.address) as channel:
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)

        def list_alice() -> Any:
            return sessions.ListSessions(spb.ListSessionsRequest(), metadata=bearer(alice))

        started = time.monotonic()
        delay = check_refusal(exhaust(list_alice), most_s=1.0)
        assert time.monotonic() - started < 5, "a refusal must not wait"
        # Another credential has its own bucket; health is never limited.
        sessions.ListSessions(spb.ListSessionsRequest(), metadata=bearer(bob))
        health = health_pb2_grpc.HealthStub(channel)
        for _ in range(10):
            health.Check(health_pb2.HealthCheckRequest())
        time.sleep(delay + 0.05)
        list_alice()


def test_a_refused_call_stores_nothing(keyed: tuple[ServerProcess, str, str]) -> None:
    proc, alice, _ = keyed
    with grpc.insecure_channel(proc.address) as channel:
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        time.sleep(3)  # a full bucket again
        before = len(
            sessions.ListSessions(spb.ListSessionsRequest(), metadata=bearer(alice)).sessions
        )

        def create() -> Any:
            return sessions.CreateSession(spb.CreateSessionRequest(), metadata=bearer(alice))

        time.sleep(3)
        _, passed = exhaust_counted(create)
        time.sleep(3)
        after = sessions.ListSessions(spb.ListSessionsRequest(), metadata=bearer(alice)).sessions
        # Each create before the refusal made a session; the refused one none.
        assert len(after) - before == passed


def test_unauthenticated_calls_fail_first_and_get_no_bucket(
    keyed: tuple[ServerProcess, str, str],
) -> None:
    proc, _, _ = keyed
    with grpc.insecure_channel(proc.address) as channel:
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        for n in range(8):
            with pytest.raises(grpc.RpcError) as error:
                sessions.ListSessions(
                    spb.ListSessionsRequest(), metadata=bearer(f"ctxd_{n:012x}_made-up")
                )
            assert error.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_auth_none_counts_per_user_and_per_address(tmp_path: Path) -> None:
    proc = start_server(tmp_path, *RATE)
    try:
        with grpc.insecure_channel(proc.address) as channel:
            sessions = sessions_pb2_grpc.SessionServiceStub(channel)
            context = context_pb2_grpc.ContextServiceStub(channel)
            check_refusal(
                exhaust(lambda: sessions.ListSessions(spb.ListSessionsRequest(user_id="a"))), 1.0
            )
            sessions.ListSessions(spb.ListSessionsRequest(user_id="b"))
            # Calls naming no user count per address (a made-up web-port header changes
            # nothing: only the web port's own, with the server's secret, is believed).
            spoofed = [("contextd-web-peer", "guess 10.0.0.1")]
            check_refusal(exhaust(lambda: context.ListTokenizers(pb.ListTokenizersRequest())), 1.0)
            with pytest.raises(grpc.RpcError) as error:
                context.ListTokenizers(pb.ListTokenizersRequest(), metadata=spoofed)
            assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        assert proc.stop() == 0


@pytest.mark.parametrize(
    "flags",
    [
        ("--rate-limit", "-1"),
        ("--rate-limit", "1", "--rate-limit-burst", "0.5"),
        ("--max-concurrent-turns", "-2"),
    ],
)
def test_bad_limits_refuse_to_start(tmp_path: Path, flags: tuple[str, ...]) -> None:
    with pytest.raises(RuntimeError, match="exited before listening"):
        start_server(tmp_path, *flags)


# -- chat turns at once ------------------------------------------------------------------


def hanging_reply() -> StreamReply:
    """A model answer that sends its first words, then nothing until the client goes away."""
    return StreamReply(oa.text_frames(["Thinking"], with_done=False)[:2], ending="hang")


@pytest.fixture(scope="module")
async def turns(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[ChatFake, Any, Any]]:
    data_dir = tmp_path_factory.mktemp("turns")
    async with openai_fake() as fake:
        proc = start_server(
            data_dir,
            *("--provider", "openai", "--provider-base-url", fake.url),
            *("--provider-model", "gpt-test", "--max-concurrent-turns", "1"),
            env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
        )
        try:
            async with grpc.aio.insecure_channel(proc.address) as channel:
                yield fake, chat_pb2_grpc.ChatServiceStub(channel), channel
        finally:
            assert await asyncio.to_thread(proc.stop) == 0


async def start_turn(chat: Any, user: str) -> Any:
    """A turn left running: its call, once the model's first words arrived."""
    call = chat.StreamChat(request(user, "Take your time"))
    async for event in call:
        if event.WhichOneof("event") == "text_delta":
            return call
    raise AssertionError("the turn ended early")


async def refused(chat: Any, user: str) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        [event async for event in chat.StreamChat(request(user, "Me too"))]
    assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    return error.value


async def completes(chat: Any, user: str) -> cpb.StreamChatResponse:
    events = [event async for event in chat.StreamChat(request(user, "Quick one"))]
    return events[-1]


async def eventually_completes(fake: ChatFake, chat: Any, user: str) -> cpb.StreamChatResponse:
    """The slot of an ended call is freed as the server's handler ends, a moment later."""
    deadline = time.monotonic() + 5
    while True:
        fake.script(oa.text_reply(["Done."]))
        try:
            return await completes(chat, user)
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert time.monotonic() < deadline, "the turn's slot was not freed"
            await asyncio.sleep(0.1)


async def test_a_second_turn_of_one_user_is_refused(turns: tuple[ChatFake, Any, Any]) -> None:
    fake, chat, _ = turns
    user, other = new_user(), new_user()
    fake.script(hanging_reply())
    running = await start_turn(chat, user)
    error = await refused(chat, user)
    assert "turn" in (error.details() or "")
    assert retry_delay(status_of(error)) > 0
    # Another user is not affected.
    fake.script(oa.text_reply(["Hi."]))
    assert (await completes(chat, other)).turn_completed.status == cpb.TURN_STATUS_OK
    # A cancelled turn frees its slot.
    running.cancel()
    done = await eventually_completes(fake, chat, user)
    assert done.turn_completed.status == cpb.TURN_STATUS_OK
    # So does one that ended: the next turn runs at once.
    fake.script(oa.text_reply(["Again."]))
    assert (await completes(chat, user)).turn_completed.status == cpb.TURN_STATUS_OK


async def test_a_failed_turn_frees_its_slot(turns: tuple[ChatFake, Any, Any]) -> None:
    fake, chat, _ = turns
    user = new_user()
    fake.script(JSONReply(400, oa.error_body("bad request", "invalid_request_error")))
    failed = await completes(chat, user)
    assert failed.turn_completed.status == cpb.TURN_STATUS_ERROR
    fake.script(oa.text_reply(["Fine."]))
    assert (await completes(chat, user)).turn_completed.status == cpb.TURN_STATUS_OK
    # A call the servicer refuses (no user message) frees it too.
    with pytest.raises(grpc.aio.AioRpcError) as error:
        [event async for event in chat.StreamChat(request(user, ""))]
    assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    fake.script(oa.text_reply(["Still fine."]))
    assert (await completes(chat, user)).turn_completed.status == cpb.TURN_STATUS_OK


async def test_a_refused_turn_stores_nothing(turns: tuple[ChatFake, Any, Any]) -> None:
    fake, chat, channel = turns
    user = new_user()
    fake.script(hanging_reply())
    running = await start_turn(chat, user)
    requests_before = len(fake.requests)
    await refused(chat, user)
    running.cancel()
    assert len(fake.requests) == requests_before, "a refused turn called the model"
    await eventually_completes(fake, chat, user)
    sessions = sessions_pb2_grpc.SessionServiceStub(channel)
    listed = await sessions.ListSessions(spb.ListSessionsRequest(user_id=user))
    assert len(listed.sessions) == 2  # the cancelled turn's and the last one's


async def test_naming_another_user_takes_none_of_their_turns(tmp_path: Path) -> None:
    alice, bob = create_key(tmp_path, "alice"), create_key(tmp_path, "bob")
    async with openai_fake() as fake:
        proc = start_server(
            tmp_path,
            *("--auth", "api-key", "--provider", "openai", "--provider-base-url", fake.url),
            *("--provider-model", "gpt-test", "--max-concurrent-turns", "1"),
            env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
        )
        try:
            async with grpc.aio.insecure_channel(proc.address) as channel:
                chat = chat_pb2_grpc.ChatServiceStub(channel)
                fake.script(hanging_reply())
                call = chat.StreamChat(request("", "Take your time"), metadata=bearer(bob))
                async for event in call:
                    if event.WhichOneof("event") == "text_delta":
                        break
                # Bob's slot is taken; Alice naming Bob is denied for that, not counted.
                with pytest.raises(grpc.aio.AioRpcError) as error:
                    [e async for e in chat.StreamChat(request("bob", "hi"), metadata=bearer(alice))]
                assert error.value.code() == grpc.StatusCode.PERMISSION_DENIED
                # Bob's own second turn is refused, also when it leaves the session out.
                with pytest.raises(grpc.aio.AioRpcError) as error:
                    bare = cpb.StreamChatRequest(user_message="again")
                    [e async for e in chat.StreamChat(bare, metadata=bearer(bob))]
                assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                fake.script(oa.text_reply(["Hi."]))
                own = [e async for e in chat.StreamChat(request("", "hi"), metadata=bearer(alice))]
                assert own[-1].turn_completed.status == cpb.TURN_STATUS_OK
                call.cancel()
        finally:
            assert await asyncio.to_thread(proc.stop) == 0
