"""A server killed mid-write restarts cleanly; a broken memory store degrades the build."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

import grpc
from contextd.store.engine.sqlite import DB_FILENAME
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc, memory_pb2_grpc, sessions_pb2_grpc
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import sessions_pb2 as spb

from tests.support.server import start_server


async def _write_until_killed(
    address: str, acknowledged: dict[str, list[str]], enough: asyncio.Event
) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = sessions_pb2_grpc.SessionServiceStub(channel)
        sessions = [
            (await stub.CreateSession(spb.CreateSessionRequest(user_id="crash"))).session.id
            for _ in range(8)
        ]

        async def writer(sid: str) -> None:
            i = 0
            while True:
                message = pb.Message(role=pb.ROLE_USER, content=f"{sid}-{i}")
                try:
                    reply = await stub.AppendMessages(
                        spb.AppendMessagesRequest(
                            user_id="crash", session_id=sid, messages=[message]
                        )
                    )
                except grpc.aio.AioRpcError:
                    return  # the server is gone
                acknowledged.setdefault(sid, []).append(reply.messages[0].message.id)
                if sum(map(len, acknowledged.values())) >= 200:
                    enough.set()
                i += 1

        await asyncio.gather(*[writer(s) for s in sessions])


async def test_sigkill_mid_write_loses_no_acknowledged_message(tmp_path: Path) -> None:
    for _attempt in range(3):
        proc = start_server(tmp_path)
        acknowledged: dict[str, list[str]] = {}
        enough = asyncio.Event()
        writing = asyncio.create_task(_write_until_killed(proc.address, acknowledged, enough))
        await asyncio.wait_for(enough.wait(), 60)
        proc.process.send_signal(signal.SIGKILL)
        proc.process.wait(10)
        await asyncio.wait_for(writing, 30)

        with sqlite3.connect(tmp_path / DB_FILENAME) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)

        restarted = start_server(tmp_path)
        try:
            with grpc.insecure_channel(restarted.address) as channel:
                stub = sessions_pb2_grpc.SessionServiceStub(channel)
                for sid, ids in acknowledged.items():
                    stored: list[str] = []
                    token = ""
                    while True:
                        page = stub.ListMessages(
                            spb.ListMessagesRequest(
                                user_id="crash", session_id=sid, page_size=500, page_token=token
                            )
                        )
                        stored += [m.message.id for m in page.messages]
                        token = page.next_page_token
                        if not token:
                            break
                    assert set(ids) <= set(stored)
        finally:
            assert restarted.stop() == 0


def test_broken_memory_store_degrades_the_build(tmp_path: Path) -> None:
    proc = start_server(tmp_path)
    try:
        with grpc.insecure_channel(proc.address) as channel:
            sessions = sessions_pb2_grpc.SessionServiceStub(channel)
            memory = memory_pb2_grpc.MemoryServiceStub(channel)
            context = context_pb2_grpc.ContextServiceStub(channel)
            sid = sessions.CreateSession(spb.CreateSessionRequest(user_id="u")).session.id
            memory.AddMemory(mpb.AddMemoryRequest(user_id="u", content="likes green tea"))
            request = pb.BuildMessagesRequest(
                user_message="tea?",
                token_budget=1000,
                session=pb.SessionContext(user_id="u", session_id=sid),
            )
            healthy = context.BuildMessages(request)
            assert "likes green tea" in healthy.messages[0].content

            with sqlite3.connect(tmp_path / DB_FILENAME) as db:
                db.execute("DROP TABLE memories")

            degraded = context.BuildMessages(request)
            layers = {x.name: x for x in degraded.report.context_layers}
            assert not layers["memory"].included
            assert layers["memory"].note.startswith("memory unavailable")
            assert [m.content for m in degraded.messages][-1] == "tea?"
    finally:
        assert proc.stop() == 0
    assert any(x.get("msg") == "memory unavailable, building without it" for x in proc.logs())
