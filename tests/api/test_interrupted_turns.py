"""A server killed in the middle of a chat turn: at its next start the turn is closed,
keeping the text it had streamed up to about a second before the kill."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb

from tests.support.chat_live import ChatFake, openai_fake
from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY
from tests.support.fakes.llm_server import StreamReply
from tests.support.server import ServerProcess, start_server

USER = "kill-user"
QUESTION = "Tell me a long story"
CLOSED = "closed an interrupted turn"


def openai_server(data_dir: Path, fake: ChatFake) -> ServerProcess:
    return start_server(
        data_dir,
        *("--provider", "openai", "--provider-base-url", fake.url, "--provider-timeout", "30"),
        env={"CONTEXTD_OPENAI_API_KEY": FAKE_KEY},
    )


def request(text: str, session_id: str = "") -> Any:
    return cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=USER, session_id=session_id), user_message=text
    )


async def kill_during_turn(
    proc: ServerProcess, streamed_for: float | None
) -> tuple[str, list[tuple[float, str]], float]:
    """Start a turn and SIGKILL the server once its text has streamed for
    ``streamed_for`` seconds (None: at TurnStarted, before any text). Returns the
    session, each text delta with the time it arrived, and the time of the kill."""
    deltas: list[tuple[float, str]] = []
    sid, killed = "", 0.0
    async with grpc.aio.insecure_channel(proc.address) as channel:
        call = chat_pb2_grpc.ChatServiceStub(channel).StreamChat(request(QUESTION))
        try:
            async for event in call:
                kind = event.WhichOneof("event")
                if kind == "turn_started":
                    sid = event.turn_started.session_id
                elif kind == "text_delta":
                    deltas.append((time.monotonic(), event.text_delta.text))
                first = deltas[0][0] if deltas else None
                if streamed_for is None or (first and time.monotonic() - first >= streamed_for):
                    killed = time.monotonic()
                    proc.process.send_signal(signal.SIGKILL)
                    proc.process.wait(10)
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.UNAVAILABLE
        else:
            raise AssertionError("the stream outlived the server")
    return sid, deltas, killed


async def stored_and_logged(
    proc: ServerProcess, session_id: str
) -> tuple[list[tuple[int, str, int, str]], list[dict[str, Any]]]:
    async with grpc.aio.insecure_channel(proc.address) as channel:
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        page = await sessions.ListMessages(
            spb.ListMessagesRequest(user_id=USER, session_id=session_id, page_size=100)
        )
        exported = sessions.ExportEvents(
            spb.ExportEventsRequest(user_id=USER, session_id=session_id)
        )
        events = [json.loads(e.json) async for e in exported]
    messages = [(m.message.role, m.message.content, m.turn_index, m.status) for m in page.messages]
    return messages, events


async def next_turn(proc: ServerProcess, session_id: str) -> list[Any]:
    async with grpc.aio.insecure_channel(proc.address) as channel:
        chat = chat_pb2_grpc.ChatServiceStub(channel)
        return [e async for e in chat.StreamChat(request("Go on", session_id))]


def _prefixes(deltas: list[tuple[float, str]]) -> list[tuple[float, str]]:
    """Each delta's arrival time with the text received up to it."""
    text, found = "", []
    for at, piece in deltas:
        text += piece
        found.append((at, text))
    return found


async def restart(data_dir: Path, fake: ChatFake) -> ServerProcess:
    # In a thread: the fake, in this loop, serves the server's model calls meanwhile.
    return await asyncio.to_thread(openai_server, data_dir, fake)


async def stop(proc: ServerProcess) -> None:
    assert await asyncio.to_thread(proc.stop) == 0


async def test_a_killed_turn_keeps_what_it_streamed(tmp_path: Path) -> None:
    fake = openai_fake()
    async with fake:
        pieces = [f"word{k} " for k in range(30)]  # 3 s of text
        fake.script(StreamReply(oa.text_frames(pieces), frame_delay=0.1))
        proc = await restart(tmp_path, fake)
        try:
            sid, deltas, killed = await kill_during_turn(proc, streamed_for=1.6)
        finally:
            proc.stop(signal.SIGKILL)
        received = "".join(text for _, text in deltas)
        # What arrived until a second before the kill (and a margin for a busy machine).
        kept_at_least = "".join(text for at, text in deltas if at < killed - 1.3)
        assert kept_at_least

        fake.script(oa.text_reply(["Once more", "."]))
        proc = await restart(tmp_path, fake)
        try:
            assert len(proc.logs(CLOSED)) == 1
            [line] = proc.logs(CLOSED)
            assert line["session_id"] == sid and line["turn"] == 1 and line["level"] == "INFO"
            messages, events = await stored_and_logged(proc, sid)
            assert [m[:1] + m[2:] for m in messages] == [
                (pb.ROLE_USER, 1, ""),
                (pb.ROLE_ASSISTANT, 1, "interrupted"),
            ]
            kept = messages[1][1]
            assert received.startswith(kept) and kept.startswith(kept_at_least)
            assert [e["type"] for e in events] == [
                "session_start",
                "turn_start",
                "assistant",
                "turn_end",
            ]
            assert events[2]["content"] == kept and events[2]["turn"] == 1
            assert events[3]["turn"] == 1 and events[3]["meta"]["status"] == "interrupted"
            # Its duration: from its start to the last save of its text, which held
            # ``kept``; at most until the kill.
            kept_by = next(at for at, text in _prefixes(deltas) if text == kept)
            lasted = events[3]["meta"]["durationMs"] / 1000
            assert kept_by - deltas[0][0] - 0.2 <= lasted <= killed - deltas[0][0] + 2.0

            done = await next_turn(proc, sid)
            assert done[0].turn_started.turn_index == 2
            assert done[-1].turn_completed.status == cpb.TURN_STATUS_OK
            assert done[-1].turn_completed.final_text == "Once more."
            sent = fake.bodies()[-1]["messages"]
            assert {"role": "assistant", "content": kept} in [
                {"role": m["role"], "content": m["content"]} for m in sent
            ]
            after = await stored_and_logged(proc, sid)
        finally:
            await stop(proc)

        proc = await restart(tmp_path, fake)
        try:
            assert not proc.logs(CLOSED)
            assert await stored_and_logged(proc, sid) == after
        finally:
            await stop(proc)


async def test_a_turn_killed_before_any_text_is_closed(tmp_path: Path) -> None:
    fake = openai_fake()
    async with fake:
        fake.script(StreamReply([], ending="hang"))
        proc = await restart(tmp_path, fake)
        try:
            sid, deltas, _ = await kill_during_turn(proc, streamed_for=None)
        finally:
            proc.stop(signal.SIGKILL)
        assert not deltas

        fake.script(oa.text_reply(["Here now."]))
        proc = await restart(tmp_path, fake)
        try:
            assert len(proc.logs(CLOSED)) == 1
            messages, events = await stored_and_logged(proc, sid)
            assert messages == [(pb.ROLE_USER, QUESTION, 1, "")]
            assert [e["type"] for e in events] == ["session_start", "turn_start", "turn_end"]
            assert events[-1]["turn"] == 1 and events[-1]["meta"]["status"] == "interrupted"
            assert 0 <= events[-1]["meta"]["durationMs"] < 10_000
            done = await next_turn(proc, sid)
            assert done[0].turn_started.turn_index == 2
            assert done[-1].turn_completed.status == cpb.TURN_STATUS_OK
        finally:
            await stop(proc)

        proc = await restart(tmp_path, fake)
        try:
            assert not proc.logs(CLOSED)
            messages, events = await stored_and_logged(proc, sid)
            assert [m[2] for m in messages] == [1, 2, 2]
            assert [e["type"] for e in events][-4:] == [
                "turn_start",
                "assistant",
                "final",
                "turn_end",
            ]
        finally:
            await stop(proc)
