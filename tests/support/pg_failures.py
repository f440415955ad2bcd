"""Helpers for the PostgreSQL failure tests: callers that write without pause and record
every write the server acknowledged, and a table locked from outside the server."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import asyncpg
import grpc
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2, memory_pb2_grpc, sessions_pb2, sessions_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

_CALL_TIMEOUT_S = 15.0


def health(channel: grpc.Channel, service: str = "") -> int:
    request = health_pb2.HealthCheckRequest(service=service)
    return int(health_pb2_grpc.HealthStub(channel).Check(request, timeout=5).status)


def wait_for_health(channel: grpc.Channel, status: int, services: tuple[str, ...]) -> float:
    """Seconds until every one of ``services`` reports ``status`` (at most 10)."""
    start = time.monotonic()
    while any(health(channel, service) != status for service in services):
        assert time.monotonic() - start < 10, f"health never became {status}"
        time.sleep(0.05)
    return time.monotonic() - start


@dataclass
class Writer:
    """Writes sessions, messages and memories for one user until stopped; keeps what
    the server acknowledged, and every failure's status code."""

    address: str
    user: str
    sessions: list[str] = field(default_factory=list)
    messages: dict[str, list[str]] = field(default_factory=dict)
    memories: list[str] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    acknowledged_at: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout=2 * _CALL_TIMEOUT_S)

    def _run(self) -> None:
        with grpc.insecure_channel(self.address) as channel:
            sessions = sessions_pb2_grpc.SessionServiceStub(channel)
            memories = memory_pb2_grpc.MemoryServiceStub(channel)
            n = 0
            while not self._stop.is_set():
                n += 1
                try:
                    self._write(sessions, memories, n)
                except grpc.RpcError as error:
                    name = error.code().name
                    self.failures[name] = self.failures.get(name, 0) + 1
                    time.sleep(0.02)

    def _write(
        self,
        sessions: sessions_pb2_grpc.SessionServiceStub,
        memories: memory_pb2_grpc.MemoryServiceStub,
        n: int,
    ) -> None:
        if not self.sessions or n % 5 == 0:
            reply = sessions.CreateSession(
                sessions_pb2.CreateSessionRequest(user_id=self.user), timeout=_CALL_TIMEOUT_S
            )
            self.sessions.append(reply.session.id)
            self.messages[reply.session.id] = []
            self.acknowledged_at.append(time.monotonic())
        elif n % 3 == 0:
            content = f"memory {self.user} {n}"
            memories.AddMemory(
                memory_pb2.AddMemoryRequest(user_id=self.user, content=content),
                timeout=_CALL_TIMEOUT_S,
            )
            self.memories.append(content)
            self.acknowledged_at.append(time.monotonic())
        else:
            session_id = self.sessions[-1]
            content = f"message {n}"
            sessions.AppendMessages(
                sessions_pb2.AppendMessagesRequest(
                    user_id=self.user,
                    session_id=session_id,
                    messages=[pb.Message(role=pb.ROLE_USER, content=content)],
                ),
                timeout=_CALL_TIMEOUT_S,
            )
            self.messages[session_id].append(content)
            self.acknowledged_at.append(time.monotonic())

    def missing(self, channel: grpc.Channel) -> list[str]:
        """The acknowledged writes the server no longer has."""
        sessions = sessions_pb2_grpc.SessionServiceStub(channel)
        memories = memory_pb2_grpc.MemoryServiceStub(channel)
        stored_sessions: set[str] = set()
        token = ""
        while True:
            page = sessions.ListSessions(
                sessions_pb2.ListSessionsRequest(user_id=self.user, page_size=200, page_token=token)
            )
            stored_sessions.update(s.id for s in page.sessions)
            token = page.next_page_token
            if not token:
                break
        gone = [f"session {s}" for s in self.sessions if s not in stored_sessions]
        for session_id, contents in self.messages.items():
            if session_id not in stored_sessions:
                continue
            stored = [
                m.message.content
                for m in sessions.ListMessages(
                    sessions_pb2.ListMessagesRequest(
                        user_id=self.user, session_id=session_id, page_size=500
                    )
                ).messages
            ]
            # In order, with nothing acknowledged left out (an unacknowledged write may
            # still have been stored: its answer was lost, not the write).
            kept = iter(stored)
            gone += [f"message {c!r} of {session_id}" for c in contents if c not in kept]
        stored_memories: set[str] = set()
        token = ""
        while True:
            listed = memories.ListMemories(
                memory_pb2.ListMemoriesRequest(user_id=self.user, page_size=200, page_token=token)
            )
            stored_memories.update(m.content for m in listed.memories)
            token = listed.next_page_token
            if not token:
                break
        gone += [f"memory {c!r}" for c in self.memories if c not in stored_memories]
        return gone


@contextmanager
def table_locked(url: str, table: str) -> Iterator[None]:
    """``table`` locked against every other statement (ACCESS EXCLUSIVE) by a
    transaction of another connection, until the block ends."""
    locked = threading.Event()
    release = threading.Event()
    failed: list[BaseException] = []

    async def hold() -> None:
        conn = await asyncpg.connect(url)
        try:
            async with conn.transaction():
                await conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
                locked.set()
                await asyncio.to_thread(release.wait)
        finally:
            await conn.close()

    def run() -> None:
        try:
            asyncio.run(hold())
        except BaseException as error:
            failed.append(error)
            locked.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    locked.wait(10)
    if failed:
        raise failed[0]
    try:
        yield
    finally:
        release.set()
        thread.join(10)


def waiting_for_locks(url: str) -> int:
    """How many statements of the database wait for a lock."""

    async def count() -> int:
        conn = await asyncpg.connect(url)
        try:
            sql = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            return int(await conn.fetchval(sql))
        finally:
            await conn.close()

    return asyncio.run(count())
