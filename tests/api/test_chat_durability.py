"""StreamChat under load and across a crash, on real contextd processes."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd.store.engine.sqlite import DB_FILENAME
from contextd.store.event_log.events import HISTORY_DIR
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb

from tests.support.chat_live import openai_fake
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.fakes.llm_server import FakeLLMServer, StreamReply
from tests.support.server import ServerProcess, start_server


def request(user: str, text: str, session_id: str = "") -> Any:
    return cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=session_id), user_message=text
    )


async def list_all(sessions: Any, user: str, session_id: str) -> list[Any]:
    out: list[Any] = []
    token = ""
    while True:
        page = await sessions.ListMessages(
            spb.ListMessagesRequest(
                user_id=user, session_id=session_id, page_size=500, page_token=token
            )
        )
        out += page.messages
        token = page.next_page_token
        if not token:
            return out


@pytest.fixture(scope="module")
def echo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(tmp_path_factory.mktemp("chat-echo"))
    yield proc
    assert proc.stop() == 0
    assert not [e for e in proc.log_lines if e.get("level") == "ERROR"]


async def test_fifty_concurrent_streams_all_complete_and_are_stored(
    echo_server: ServerProcess,
) -> None:
    proc = echo_server
    async with grpc.aio.insecure_channel(proc.address) as channel:
        chat = chat_pb2_grpc.ChatServiceStub(channel)
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        users = [f"load-{k}-{uuid.uuid4().hex[:6]}" for k in range(5)]

        async def converse(k: int) -> tuple[str, str, list[str], list[Any]]:
            user = users[k % len(users)]
            texts = [f"message {k}.{t} from {user}" for t in range(2)]
            sid = ""
            done = []
            for text in texts:
                events = [e async for e in chat.StreamChat(request(user, text, sid))]
                sid = sid or events[0].turn_started.session_id
                assert events[-1].WhichOneof("event") == "turn_completed"
                done.append(events[-1].turn_completed)
            return user, sid, texts, done

        results = await asyncio.wait_for(asyncio.gather(*map(converse, range(50))), 40)

        assert len({sid for _, sid, _, _ in results}) == 50
        for user, sid, texts, done in results:
            assert [d.status for d in done] == [cpb.TURN_STATUS_OK] * 2
            assert texts[1] in done[1].final_text
            stored = await list_all(sessions, user, sid)
            assert [
                (m.message.role, m.message.content, m.turn_index, m.status) for m in stored
            ] == [
                (pb.ROLE_USER, texts[0], 1, ""),
                (pb.ROLE_ASSISTANT, done[0].final_text, 1, ""),
                (pb.ROLE_USER, texts[1], 2, ""),
                (pb.ROLE_ASSISTANT, done[1].final_text, 2, ""),
            ]
            assert [m.message.id for m in stored][1::2] == [d.assistant_message_id for d in done]
            usage = done[1].session_usage
            assert usage.completion_tokens == sum(d.turn_usage.completion_tokens for d in done)
            log = proc.data_dir / HISTORY_DIR / f"{sid}.jsonl"
            lines = [json.loads(line) for line in log.read_text("utf-8").splitlines()]
            assert [e["type"] for e in lines] == [
                "session_start",
                *(["turn_start", "assistant", "final", "turn_end"] * 2),
            ]
        for user in users:
            listed = await sessions.ListSessions(spb.ListSessionsRequest(user_id=user))
            assert len(listed.sessions) == 10


async def test_concurrent_turns_of_one_session_run_one_after_another(
    echo_server: ServerProcess,
) -> None:
    async with grpc.aio.insecure_channel(echo_server.address) as channel:
        chat = chat_pb2_grpc.ChatServiceStub(channel)
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        user = f"same-{uuid.uuid4().hex[:6]}"
        first = [e async for e in chat.StreamChat(request(user, "first"))]
        sid = first[0].turn_started.session_id

        async def turn(text: str) -> list[Any]:
            return [e async for e in chat.StreamChat(request(user, text, sid))]

        texts = [f"at once {k}" for k in range(4)]
        results = await asyncio.gather(*map(turn, texts))
        indexes = [r[0].turn_started.turn_index for r in results]
        assert sorted(indexes) == [2, 3, 4, 5]
        assert all(r[-1].turn_completed.status == cpb.TURN_STATUS_OK for r in results)
        stored = await list_all(sessions, user, sid)
        roles = [m.message.role for m in stored]
        assert roles == [pb.ROLE_USER, pb.ROLE_ASSISTANT] * 5
        assert [m.turn_index for m in stored] == [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
        for result, text in zip(results, texts, strict=True):
            k = result[0].turn_started.turn_index
            assert stored[2 * k - 2].message.content == text
            # Each turn saw every turn before it: 1 system + 2 per earlier turn + its own.
            assert f"I received {2 * k} messages" in result[-1].turn_completed.final_text


def openai_server(data_dir: Path, fake: FakeLLMServer) -> ServerProcess:
    return start_server(
        data_dir,
        *("--provider", "openai", "--provider-base-url", fake.url, "--provider-timeout", "10"),
        env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
    )


async def test_sigkill_mid_stream_then_restart(tmp_path: Path) -> None:
    fake = openai_fake()
    async with fake:
        slow = StreamReply(oa.text_frames(["Once upon", " a time", " there was"]), frame_delay=0.5)
        fake.script(oa.text_reply(["Hi."]), slow)
        proc = openai_server(tmp_path, fake)
        user = "crash-user"
        got: list[Any] = []
        try:
            async with grpc.aio.insecure_channel(proc.address) as channel:
                chat = chat_pb2_grpc.ChatServiceStub(channel)
                first = [e async for e in chat.StreamChat(request(user, "Hello before"))]
                assert first[-1].turn_completed.status == cpb.TURN_STATUS_OK
                sid = first[0].turn_started.session_id
                call = chat.StreamChat(request(user, "Tell me a story", sid))
                try:
                    async for event in call:
                        got.append(event)
                        if event.WhichOneof("event") == "text_delta":
                            proc.process.send_signal(signal.SIGKILL)
                except grpc.aio.AioRpcError as error:
                    assert error.code() == grpc.StatusCode.UNAVAILABLE
                else:
                    raise AssertionError("the stream outlived the server")
        finally:
            proc.stop(signal.SIGKILL)
        assert [e.WhichOneof("event") for e in got] == ["turn_started", "text_delta"]
        assert got[0].turn_started.turn_index == 2

        with sqlite3.connect(tmp_path / DB_FILENAME) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)

        # Every line written before the kill is whole JSON; then a crash's torn line.
        history = tmp_path / HISTORY_DIR / f"{sid}.jsonl"
        raw = history.read_bytes()
        assert raw.endswith(b"\n")
        before = [json.loads(line) for line in raw.decode("utf-8").splitlines()]
        assert [e["type"] for e in before] == [
            "session_start",
            "turn_start",
            "assistant",
            "final",
            "turn_end",
            "turn_start",
        ]
        assert before[-1]["turn"] == 2 and before[-1]["content"] == "Tell me a story"
        with history.open("ab") as file:
            file.write(b'{"ts":"2030-01-01T00:00:00.000Z","session_id":"' + sid.encode())

        fake.script(oa.text_reply(["The end", "."]))
        n = len(fake.requests)
        restarted = openai_server(tmp_path, fake)
        try:
            async with grpc.aio.insecure_channel(restarted.address) as channel:
                chat = chat_pb2_grpc.ChatServiceStub(channel)
                sessions = sessions_pb2_grpc.SessionServiceStub(channel)
                exported = [
                    json.loads(e.json)
                    async for e in sessions.ExportEvents(
                        spb.ExportEventsRequest(user_id=user, session_id=sid)
                    )
                ]
                # The restart ended the killed turn: its turn_end replaced the torn line.
                assert exported[: len(before)] == before
                [closed] = exported[len(before) :]
                assert closed["type"] == "turn_end" and closed["turn"] == 2
                assert closed["meta"]["status"] == "interrupted"

                stored = await list_all(sessions, user, sid)
                assert [(m.message.role, m.message.content, m.turn_index) for m in stored] == [
                    (pb.ROLE_USER, "Hello before", 1),
                    (pb.ROLE_ASSISTANT, "Hi.", 1),
                    (pb.ROLE_USER, "Tell me a story", 2),
                ]

                events = [e async for e in chat.StreamChat(request(user, "Still there?", sid))]
                done = events[-1].turn_completed
                assert done.status == cpb.TURN_STATUS_OK and done.final_text == "The end."
                assert events[0].turn_started.turn_index == 3
                sent = [
                    (m["role"], m["content"]) for m in fake.bodies()[n]["messages"] if m["role"]
                ]
                assert sent[0][0] == "system"
                assert [text for role, text in sent[1:] if role == "user"] == [
                    "Hello before",
                    "Tell me a story",
                    "Still there?",
                ]
        finally:
            # In a thread: the fake, in this loop, serves the background calls meanwhile.
            assert await asyncio.to_thread(restarted.stop) == 0

        # The torn line was cut off before the next lines: whole JSON lines only.
        text = history.read_text("utf-8")
        assert text.endswith("\n")
        after = [json.loads(line) for line in text.splitlines()]
        assert after[: len(before) + 1] == exported
        assert [e["type"] for e in after[len(before) + 1 :]] == [
            "turn_start",
            "assistant",
            "final",
            "turn_end",
        ]
        assert all(e["turn"] == 3 for e in after[len(before) + 1 :])


def test_a_turns_messages_are_stored_with_its_tokenizers_counts(tmp_path: Path) -> None:
    """A turn whose tokenizer is not the server's default stores its messages counted
    under it too: the next turn builds with it and never tokenizes them again."""
    server = start_server(tmp_path, "--default-tokenizer", "estimate")
    try:
        with grpc.insecure_channel(server.address) as channel:
            chat = chat_pb2_grpc.ChatServiceStub(channel)
            turn = request(f"u-{uuid.uuid4().hex[:8]}", "How long is a marathon?")
            turn.tokenizer = "cl100k_base"
            events = list(chat.StreamChat(turn))
            assert events[-1].turn_completed.status == cpb.TURN_STATUS_OK
    finally:
        server.stop()
    with sqlite3.connect(tmp_path / DB_FILENAME) as db:
        rows = db.execute(
            "SELECT c.role, group_concat(t.tokenizer) FROM conversation c "
            "JOIN message_tokens t ON t.message_id = c.id GROUP BY c.id ORDER BY c.id"
        ).fetchall()
    assert [role for role, _ in rows] == ["user", "assistant"]
    for _, tokenizers in rows:
        assert set(tokenizers.split(",")) == {"estimate", "cl100k_base"}
