"""A full disk: writes answer RESOURCE_EXHAUSTED saying so, health turns NOT_SERVING while
they fail, nothing stored is lost, and the server recovers by itself once there is room.
The data directory is a small tmpfs mounted for the test (skipped where mounting is not
allowed)."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from contextd.v1 import context_pb2 as pb
from contextd.v1 import sessions_pb2 as spb
from contextd.v1 import sessions_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.server import ServerProcess, start_server


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
