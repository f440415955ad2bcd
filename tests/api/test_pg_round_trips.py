"""Round trips to PostgreSQL per call, counted on the wire (tests/support/pg_round_trips.py)
between a real ``contextd serve`` and its database: a session-mode BuildMessages and a
StreamChat turn (its work after the turn included) must not make more than they make now.
Counts are taken once the server's connections and caches are warm, as a running server's
are."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, context_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

from tests.support.pg_databases import fresh_database
from tests.support.pg_round_trips import RoundTripRelay, counting_relay
from tests.support.postgres import PostgresServer
from tests.support.server import start_server

# At most, per call: the session with all a build reads beside it, whether its user has
# memories included (one statement); a user with memories adds the search by terms (one
# statement: the terms' counts, their choice and the ranking).
BUILD_ROUND_TRIPS = 1
BUILD_WITH_MEMORIES_ROUND_TRIPS = 2
# At most, per turn: see bench/README.md ("pg_vs_sqlite.py") for where they go.
TURN_ROUND_TRIPS = 6
# The first turn of a session it creates: the session (one statement) and its log's first
# line besides, and no read of its messages (it has none).
FIRST_TURN_ROUND_TRIPS = 7
USER = "round-trips"
REMEMBERED = "remembered"  # a user with memories
# Messages in the session: more than a build's window, which the session's first is not in.
HISTORY = 100


@pytest.fixture
def relay(postgres: PostgresServer) -> Iterator[tuple[RoundTripRelay, str]]:
    with fresh_database(postgres) as url, counting_relay("127.0.0.1", postgres.port) as relay:
        yield relay, relay.url(url.rsplit("/", 1)[1])


def build(channel: grpc.Channel, session_id: str, user: str = USER) -> None:
    context_pb2_grpc.ContextServiceStub(channel).BuildMessages(
        pb.BuildMessagesRequest(
            user_message="What did we say about the budget?",
            token_budget=4000,
            session=pb.SessionContext(user_id=user, session_id=session_id),
        )
    )


def turn(channel: grpc.Channel, session_id: str) -> None:
    responses = list(
        chat_pb2_grpc.ChatServiceStub(channel).StreamChat(
            cpb.StreamChatRequest(
                session=pb.SessionContext(user_id=USER, session_id=session_id),
                user_message="And the travel costs?",
            )
        )
    )
    assert responses[-1].turn_completed.status == cpb.TURN_STATUS_OK


def round_trips(relay: RoundTripRelay, call: object, *args: object) -> int:
    relay.wait_quiet()
    before, _ = relay.snapshot()
    call(*args)  # type: ignore[operator]
    relay.wait_quiet()  # the turn's work after it is counted with it
    return relay.snapshot()[0] - before


def test_build_and_turn_round_trips(relay: tuple[RoundTripRelay, str], tmp_path: Path) -> None:
    counter, url = relay
    server = start_server(tmp_path, database_url=url)
    try:
        with grpc.insecure_channel(server.address) as channel:
            sessions = sessions_pb2_grpc.SessionServiceStub(channel)
            sid = sessions.CreateSession(spb.CreateSessionRequest(user_id=USER)).session.id
            sessions.AppendMessages(
                spb.AppendMessagesRequest(
                    user_id=USER,
                    session_id=sid,
                    messages=[
                        pb.Message(role=pb.ROLE_USER, content=f"question {n}")
                        if n % 2 == 0
                        else pb.Message(role=pb.ROLE_ASSISTANT, content=f"answer {n}")
                        for n in range(HISTORY)
                    ],
                )
            )
            memories = memory_pb2_grpc.MemoryServiceStub(channel)
            for fact in ("The travel budget is 2,000 euros", "旅行预算是两千欧元", "I like tea"):
                memories.AddMemory(mpb.AddMemoryRequest(user_id=REMEMBERED, content=fact))
            remembered = sessions.CreateSession(
                spb.CreateSessionRequest(user_id=REMEMBERED)
            ).session.id
            for _ in range(3):  # warm: prepared statements, pooled connections, caches
                build(channel, sid)
                build(channel, remembered, REMEMBERED)
                turn(channel, sid)
            builds = [round_trips(counter, build, channel, sid) for _ in range(3)]
            recalled = [
                round_trips(counter, build, channel, remembered, REMEMBERED) for _ in range(3)
            ]
            turns = [round_trips(counter, turn, channel, sid) for _ in range(3)]
            firsts = [round_trips(counter, turn, channel, "") for _ in range(3)]
    finally:
        server.stop()
    print(f"round trips: builds {builds}, with memories {recalled}, turns {turns}, first {firsts}")
    assert max(builds) <= BUILD_ROUND_TRIPS, builds
    assert max(recalled) <= BUILD_WITH_MEMORIES_ROUND_TRIPS, recalled
    assert max(turns) <= TURN_ROUND_TRIPS, turns
    assert max(firsts) <= FIRST_TURN_ROUND_TRIPS, firsts
