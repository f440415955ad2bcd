"""Two ``contextd serve`` processes on one PostgreSQL database behave as one server: a
session's turns alternate between them and number on, what one stores the other reads at
once, concurrent writers lose nothing, two turns of one session sent to both run one
after the other, and a replica killed mid-turn leaves a session the other goes on with
once the turn's lease expired, the killed turn closed as interrupted."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, context_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

from tests.support.chat_live import ChatFake, openai_fake
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.fakes.llm_server import StreamReply
from tests.support.pg_databases import fresh_database
from tests.support.postgres import PostgresServer
from tests.support.server import ServerProcess, start_server

CLOSED = "closed an interrupted turn"
LEASE_S = 2.0  # the killed replica's turn is closed this long after its last renewal


@dataclass
class Replica:
    proc: ServerProcess
    chat: chat_pb2_grpc.ChatServiceStub
    sessions: sessions_pb2_grpc.SessionServiceStub
    memory: memory_pb2_grpc.MemoryServiceStub
    context: context_pb2_grpc.ContextServiceStub


@asynccontextmanager
async def replica(proc: ServerProcess) -> AsyncIterator[Replica]:
    async with grpc.aio.insecure_channel(proc.address) as channel:
        yield Replica(
            proc,
            chat_pb2_grpc.ChatServiceStub(channel),
            sessions_pb2_grpc.SessionServiceStub(channel),
            memory_pb2_grpc.MemoryServiceStub(channel),
            context_pb2_grpc.ContextServiceStub(channel),
        )


@pytest.fixture(scope="module")
def database(postgres: PostgresServer) -> Iterator[str]:
    """One database (a copy of the template) for the module's echo replicas."""
    with fresh_database(postgres) as url:
        yield url


@pytest.fixture(scope="module")
async def pair(
    database: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Replica, Replica]]:
    """Two echo replicas on ``database``, each with a data directory of its own."""
    procs = [start_server(tmp_path_factory.mktemp("replica"), database_url=database)]
    procs.append(start_server(tmp_path_factory.mktemp("replica"), database_url=database))
    try:
        async with replica(procs[0]) as a, replica(procs[1]) as b:
            yield a, b
    finally:
        for proc in procs:
            assert await asyncio.to_thread(proc.stop) == 0


def new_user() -> str:
    return f"user-{uuid.uuid4().hex[:8]}"


def turn_request(user: str, text: str, session_id: str = "") -> cpb.StreamChatRequest:
    return cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=session_id), user_message=text
    )


async def turn(r: Replica, user: str, text: str, session_id: str = "") -> list[Any]:
    call = r.chat.StreamChat(turn_request(user, text, session_id), timeout=60)
    events = [e async for e in call]
    assert events[-1].turn_completed.status == cpb.TURN_STATUS_OK
    return events


async def messages(r: Replica, user: str, session_id: str) -> list[tuple[int, int, str]]:
    """(role, turn, status) of every stored message, in order."""
    found: list[tuple[int, int, str]] = []
    token = ""
    while True:
        page = await r.sessions.ListMessages(
            spb.ListMessagesRequest(
                user_id=user, session_id=session_id, page_size=100, page_token=token
            )
        )
        found += [(m.message.role, m.turn_index, m.status) for m in page.messages]
        token = page.next_page_token
        if not token:
            return found


async def exported(r: Replica, user: str, session_id: str) -> list[dict[str, Any]]:
    call = r.sessions.ExportEvents(spb.ExportEventsRequest(user_id=user, session_id=session_id))
    return [json.loads(e.json) async for e in call]


async def test_turns_alternate_between_replicas_and_number_on(
    pair: tuple[Replica, Replica],
) -> None:
    a, b = pair
    user = new_user()
    first = await turn(a, user, "Hello")
    sid = first[0].turn_started.session_id
    assert first[0].turn_started.turn_index == 1
    for k in range(2, 7):
        events = await turn(pair[(k - 1) % 2], user, f"message {k}", sid)
        assert events[0].turn_started.turn_index == k
    expected = [(role, k, "") for k in range(1, 7) for role in (pb.ROLE_USER, pb.ROLE_ASSISTANT)]
    assert await messages(a, user, sid) == expected
    assert await messages(b, user, sid) == expected
    # Every turn is in the log, whichever replica ran it and whichever reads it.
    on_a, on_b = await exported(a, user, sid), await exported(b, user, sid)
    assert on_a == on_b
    ends = [e["turn"] for e in on_a if e["type"] == "turn_end"]
    assert ends == [1, 2, 3, 4, 5, 6]


async def test_memories_added_through_one_are_found_through_the_other(
    pair: tuple[Replica, Replica],
) -> None:
    a, b = pair
    user = new_user()
    await a.memory.AddMemory(mpb.AddMemoryRequest(user_id=user, content="I collect old maps"))
    found = await b.memory.SearchMemories(mpb.SearchMemoriesRequest(user_id=user, query="maps"))
    assert [r.memory.content for r in found.results] == ["I collect old maps"]
    # The other way too, for a user the first search found without memories.
    other = new_user()
    assert not (
        await a.memory.SearchMemories(mpb.SearchMemoriesRequest(user_id=other, query="x"))
    ).results
    await b.memory.AddMemory(mpb.AddMemoryRequest(user_id=other, content="I like x-rays"))
    found = await a.memory.SearchMemories(mpb.SearchMemoriesRequest(user_id=other, query="x-rays"))
    assert len(found.results) == 1


async def test_both_give_out_and_take_the_same_ids(pair: tuple[Replica, Replica]) -> None:
    """The replicas share the key of the ids callers see: one's ids are the other's."""
    a, b = pair
    user = new_user()
    events = await turn(a, user, "Hello")
    sid = events[0].turn_started.session_id
    answer = events[-1].turn_completed.assistant_message_id
    listed = await b.sessions.ListMessages(spb.ListMessagesRequest(user_id=user, session_id=sid))
    assert listed.messages[-1].message.id == answer
    collected = await b.context.Collect(
        pb.CollectRequest(user_id=user, message_id=answer, remember=True)
    )
    assert collected.message_id == answer
    on_a = await a.memory.ListMemories(mpb.ListMemoriesRequest(user_id=user))
    assert collected.memory_id in [m.id for m in on_a.memories]
    await a.memory.DeleteMemory(
        mpb.DeleteMemoryRequest(user_id=user, memory_id=collected.memory_id)
    )


async def eventually(check: Any, seconds: float = 15.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = await check()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.1)


async def test_after_turn_work_of_one_is_used_by_the_other(
    pair: tuple[Replica, Replica],
) -> None:
    a, b = pair
    user = new_user()
    events = await turn(a, user, "I live in Lisbon")
    first_session = events[0].turn_started.session_id

    async def memory_made() -> bool:
        query = mpb.SearchMemoriesRequest(user_id=user, query="Lisbon")
        return bool((await b.memory.SearchMemories(query)).results)

    assert await eventually(memory_made)
    fresh = await b.sessions.CreateSession(spb.CreateSessionRequest(user_id=user))
    request = pb.BuildMessagesRequest(
        user_message="Where do I live?",
        token_budget=4000,
        session=pb.SessionContext(user_id=user, session_id=fresh.session.id),
    )

    async def summary_shown() -> pb.BuildMessagesResponse | None:
        built = await b.context.BuildMessages(request)
        layers = {x.name: x for x in built.report.context_layers}
        return built if layers["recent_sessions"].items_kept == 1 else None

    built = await eventually(summary_shown)
    assert built is not None, "the first session's summary never reached the other replica"
    layers = {x.name: x for x in built.report.context_layers}
    assert layers["memory"].items_kept >= 1
    assert "I live in Lisbon" in built.messages[0].content
    assert first_session != fresh.session.id


async def test_concurrent_writers_on_both_lose_nothing(pair: tuple[Replica, Replica]) -> None:
    user = new_user()
    sids = []
    for k in range(4):
        created = await pair[k % 2].sessions.CreateSession(spb.CreateSessionRequest(user_id=user))
        sids.append(created.session.id)

    async def write(k: int) -> None:
        r, sid = pair[k % 2], sids[k % len(sids)]
        if k % 3 == 0:
            await r.sessions.AppendMessages(
                spb.AppendMessagesRequest(
                    user_id=user,
                    session_id=sid,
                    messages=[
                        pb.Message(role=pb.ROLE_USER, content=f"appended {k}"),
                        pb.Message(role=pb.ROLE_ASSISTANT, content=f"noted {k}"),
                    ],
                ),
                timeout=60,
            )
        else:
            await turn(r, user, f"turn {k}", sid)

    await asyncio.gather(*(write(k) for k in range(20)))
    total = 0
    for n, sid in enumerate(sids):
        stored = await messages(pair[n % 2], user, sid)
        writes = [k for k in range(20) if k % len(sids) == n]
        assert len(stored) == 2 * len(writes)
        turns = [k for k in writes if k % 3]
        log = await exported(pair[(n + 1) % 2], user, sid)
        ends = [e["turn"] for e in log if e["type"] == "turn_end"]
        assert len(ends) == len(set(ends)) == len(turns)
        total += len(stored)
    assert total == 40


@pytest.fixture
async def openai_pair(
    postgres_url: str, tmp_path: Path
) -> AsyncIterator[tuple[ChatFake, Replica, Replica]]:
    """Two replicas talking to one fake OpenAI server, with a short session lease."""
    fake = openai_fake()
    async with fake:
        procs = [
            await asyncio.to_thread(
                start_server,
                tmp_path / name,
                *("--provider", "openai", "--provider-base-url", fake.url),
                *("--provider-timeout", "30", "--turn-lease-seconds", str(LEASE_S)),
                env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
                database_url=postgres_url,
            )
            for name in ("a", "b")
        ]
        try:
            async with replica(procs[0]) as a, replica(procs[1]) as b:
                yield fake, a, b
        finally:
            for proc in procs:
                await asyncio.to_thread(proc.stop, signal.SIGKILL)


def slow_reply(words: int) -> StreamReply:
    return StreamReply(oa.text_frames([f"word{k} " for k in range(words)]), frame_delay=0.1)


async def timed_turn(r: Replica, user: str, sid: str) -> list[tuple[float, Any]]:
    call = r.chat.StreamChat(turn_request(user, "Tell me a story", sid), timeout=60)
    return [(time.monotonic(), e) async for e in call]


async def test_two_turns_of_one_session_on_both_run_one_after_the_other(
    openai_pair: tuple[ChatFake, Replica, Replica],
) -> None:
    fake, a, b = openai_pair
    user = new_user()
    sid = (await a.sessions.CreateSession(spb.CreateSessionRequest(user_id=user))).session.id
    fake.script(slow_reply(10), slow_reply(10))
    first, second = await asyncio.gather(timed_turn(a, user, sid), timed_turn(b, user, sid))
    for events in (first, second):
        assert events[-1][1].turn_completed.status == cpb.TURN_STATUS_OK
    earlier, later = sorted((first, second), key=lambda ev: ev[0][1].turn_started.turn_index)
    assert earlier[0][1].turn_started.turn_index == 1
    assert later[0][1].turn_started.turn_index == 2
    deltas = [
        [at for at, e in ev if e.WhichOneof("event") == "text_delta"] for ev in (earlier, later)
    ]
    assert deltas[0] and deltas[1] and min(deltas[1]) > max(deltas[0])
    roles = (pb.ROLE_USER, pb.ROLE_ASSISTANT)
    assert await messages(b, user, sid) == [(role, k, "") for k in (1, 2) for role in roles]


async def test_a_replica_killed_mid_turn_leaves_a_session_the_other_goes_on_with(
    openai_pair: tuple[ChatFake, Replica, Replica],
) -> None:
    fake, a, b = openai_pair
    user = new_user()
    sid = (await a.sessions.CreateSession(spb.CreateSessionRequest(user_id=user))).session.id
    fake.script(slow_reply(40))
    streamed = ""
    call = a.chat.StreamChat(turn_request(user, "Tell me a long story", sid), timeout=60)
    first_delta = 0.0
    with pytest.raises(grpc.aio.AioRpcError) as cut:
        async for event in call:
            if event.WhichOneof("event") == "text_delta":
                streamed += event.text_delta.text
                first_delta = first_delta or time.monotonic()
                if time.monotonic() - first_delta >= 1.6:
                    a.proc.process.send_signal(signal.SIGKILL)
                    await asyncio.to_thread(a.proc.process.wait, 10)
    assert cut.value.code() == grpc.StatusCode.UNAVAILABLE
    killed = time.monotonic()

    fake.script(oa.text_reply(["Where ", "was I?"]))
    events = await turn(b, user, "Go on", sid)
    # It waited for the lease to run out (renewed until the kill), not longer.
    assert time.monotonic() - killed < LEASE_S + 10
    assert events[0].turn_started.turn_index == 2
    assert events[-1].turn_completed.final_text == "Where was I?"
    assert len(b.proc.wait_for_logs(CLOSED, lambda line: line["session_id"] == sid)) == 1

    stored = await messages(b, user, sid)
    assert stored == [
        (pb.ROLE_USER, 1, ""),
        (pb.ROLE_ASSISTANT, 1, "interrupted"),
        (pb.ROLE_USER, 2, ""),
        (pb.ROLE_ASSISTANT, 2, ""),
    ]
    log = await exported(b, user, sid)
    turn_one = [(e["type"], e.get("meta", {}).get("status")) for e in log if e.get("turn") == 1]
    assert turn_one[-2:] == [("assistant", None), ("turn_end", "interrupted")]
    kept = next(e["content"] for e in log if e.get("turn") == 1 and e["type"] == "assistant")
    assert kept and streamed.startswith(kept)


async def test_a_session_ended_through_one_starts_again_at_the_others_next_turn(
    pair: tuple[Replica, Replica],
) -> None:
    a, b = pair
    user = new_user()
    sid = (await turn(a, user, "Hello"))[0].turn_started.session_id
    await turn(a, user, "Again", sid)  # a's log of the session is open, as a knows it
    ended = await b.sessions.EndSession(spb.EndSessionRequest(user_id=user, session_id=sid))
    assert ended.ended
    await turn(a, user, "Back", sid)
    types = [e["type"] for e in await exported(b, user, sid)]
    assert types.count("session_start") == 2
    assert types.index("session_end") < len(types) - 1 - types[::-1].index("session_start")
