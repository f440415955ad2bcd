"""A full disk: writes answer RESOURCE_EXHAUSTED saying so, health turns NOT_SERVING while
they fail, nothing stored is lost, and the server recovers by itself once there is room.
The data directory is a small tmpfs mounted for the test (skipped where mounting is not
allowed)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.server import ServerProcess, start_server
from tests.support.workers import channel_to_worker


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs is not allowed here")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(directory: Path) -> Path:
    """A file taking every free byte of the disk."""
    filler = directory / "filler"
    # Unbuffered: a buffered file would raise again on close, flushing what did not fit.
    with filler.open("wb", buffering=0) as out:
        block = b"\0" * 65536
        try:
            while out.write(block):
                pass
        except OSError:
            pass
    return filler


def _health(channel: grpc.Channel) -> int:
    reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    return int(reply.status)


def _wait_for(channel: grpc.Channel, status: int, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while _health(channel) != status:
        assert time.monotonic() < deadline, f"health never became {status}"
        time.sleep(0.1)


@pytest.fixture
def server(small_disk: Path) -> Iterator[ServerProcess]:
    proc = start_server(small_disk / "data")
    yield proc
    proc.stop()


def test_a_full_disk_refuses_writes_and_recovers(small_disk: Path, server: ServerProcess) -> None:
    proc = server
    user = f"disk-{uuid.uuid4().hex[:6]}"
    serving = health_pb2.HealthCheckResponse.SERVING
    with grpc.insecure_channel(proc.address) as channel:
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        session = sessions.CreateSession(spb.CreateSessionRequest(user_id=user)).session

        def append(text: str) -> spb.AppendMessagesResponse:
            message = pb.Message(role=pb.ROLE_USER, content=text)
            request = spb.AppendMessagesRequest(
                user_id=user, session_id=session.id, messages=[message]
            )
            return sessions.AppendMessages(request, timeout=10)

        append("kept before the disk filled")
        filler = _fill(small_disk)
        with pytest.raises(grpc.RpcError) as raised:
            for _ in range(20):  # until the database's files must grow
                append("x" * 400_000)
        assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "disk is full" in (raised.value.details() or "")
        _wait_for(channel, health_pb2.HealthCheckResponse.NOT_SERVING)

        filler.unlink()
        _wait_for(channel, serving)
        append("stored once there was room")
        listed = sessions.ListMessages(
            spb.ListMessagesRequest(user_id=user, session_id=session.id, page_size=200)
        )
    contents = [m.message.content for m in listed.messages]
    assert contents[0] == "kept before the disk filled"
    assert contents[-1] == "stored once there was room"
    assert proc.stop() == 0
    assert proc.logs("the disk is full: writes fail") and proc.logs("the disk has room again")


def _turn(
    chat: chat_pb2_grpc.ChatServiceStub, user: str, session_id: str, text: str
) -> list[cpb.StreamChatResponse]:
    request = cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=session_id), user_message=text
    )
    return list(chat.StreamChat(request, timeout=30))


def test_a_full_disk_under_two_workers_refuses_turns_and_recovers(small_disk: Path) -> None:
    """Turns of one session on both workers of ``--workers 2``: once the disk is full each
    worker refuses them, saying so, and answers NOT_SERVING; once there is room, both
    serve again, and the session's messages and event log hold every acknowledged turn,
    its log in whole lines."""
    proc = start_server(small_disk / "data", "--workers", "2", ready="workers serving")
    user = f"disk-{uuid.uuid4().hex[:6]}"
    not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
    channels = [channel_to_worker(proc, index)[0] for index in (0, 1)]
    try:
        chats = [chat_pb2_grpc.ChatServiceStub(channel) for channel in channels]
        first = _turn(chats[0], user, "", "kept before the disk filled")
        sid = first[0].turn_started.session_id
        ok = [first, _turn(chats[1], user, sid, "and on the other worker")]
        filler = _fill(small_disk)
        for chat, channel in zip(chats, channels, strict=True):
            with pytest.raises(grpc.RpcError) as raised:
                for _ in range(20):  # until a write must grow a file
                    ok.append(_turn(chat, user, sid, "x" * 400_000))
            assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "disk is full" in (raised.value.details() or "")
            _wait_for(channel, not_serving)

        filler.unlink()
        for chat, channel in zip(chats, channels, strict=True):
            _wait_for(channel, health_pb2.HealthCheckResponse.SERVING)
            ok.append(_turn(chat, user, sid, "stored once there was room"))
        sessions = sessions_pb2_grpc.SessionServiceStub(channels[0])
        listed = sessions.ListMessages(
            spb.ListMessagesRequest(user_id=user, session_id=sid, page_size=200)
        )
        export = sessions.ExportEvents(spb.ExportEventsRequest(user_id=user, session_id=sid))
        events = [json.loads(line.json) for line in export]  # every line whole
    finally:
        for channel in channels:
            channel.close()
    assert all(turn[-1].turn_completed.status == cpb.TURN_STATUS_OK for turn in ok)
    acknowledged = [turn[0].turn_started.turn_index for turn in ok]
    ended = [e["turn"] for e in events if e["type"] == "turn_end"]
    assert set(acknowledged) <= set(ended), (acknowledged, ended)
    assert ended == sorted(ended)
    contents = [m.message.content for m in listed.messages]
    assert contents[0] == "kept before the disk filled"
    assert contents[-2] == "stored once there was room"
    assert proc.stop() == 0
    assert proc.logs("the disk is full: writes fail") and proc.logs("the disk has room again")
