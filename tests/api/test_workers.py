"""``contextd serve --workers 2``: two processes serve every port, connections go to one
or the other, a worker killed under writers loses no acknowledged write and is started
again, SIGTERM drains every worker, and turns of one session served by both keep their
numbers. Another server cannot join their ports."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from contextd.app.retention import RetentionPurger
from contextd.config import Settings, SettingsError, usable_cores
from contextd.root.prepare import prepare
from contextd.root.server import public_ids
from contextd.root.wiring import build_services
from contextd.store.engine.open import open_database
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import (
    chat_pb2_grpc,
    context_pb2_grpc,
    memory_pb2_grpc,
    prompts_pb2_grpc,
    sessions_pb2_grpc,
)
from contextd.v1 import context_pb2 as pb
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import prompts_pb2 as ppb
from contextd.v1 import sessions_pb2 as spb

from tests.api.test_ports_taken import tcp_states
from tests.support.pg_databases import database_url_for
from tests.support.server import ServerProcess, start_server
from tests.support.workers import OWN_CONNECTION

pytestmark = pytest.mark.both_backends

LISTEN = "0A"
READY = "workers serving"


@pytest.fixture(scope="module")
def workers(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    server = start_server(
        tmp_path_factory.mktemp("workers"),
        "--workers",
        "2",
        "--web-port",
        "0",
        "--echo-delay-ms",
        "20",
        database_url=database_url_for(request, backend),
        ready=READY,
    )
    yield server
    server.stop()


def worker_pids(server: ServerProcess) -> dict[int, int]:
    """The pid of each worker index, from the newest "listening" line of each."""
    return {int(str(line["worker"])): int(str(line["pid"])) for line in server.logs("listening")}


def call_workers(server: ServerProcess, since: int) -> set[int]:
    return {int(str(line["worker"])) for line in server.logs("rpc")[since:]}


def test_every_port_has_one_listener_per_worker(workers: ServerProcess) -> None:
    [web] = {line["address"] for line in workers.logs("grpc-web listening")}
    for port in (workers.port, int(str(web).rsplit(":", 1)[1])):
        assert tcp_states(port).count(LISTEN) == 2


def test_connections_are_spread_over_the_workers(workers: ServerProcess) -> None:
    since = len(workers.logs("rpc"))
    for _ in range(24):  # one connection each: all on one worker has odds of 2 in 2**24
        with grpc.insecure_channel(workers.address, options=OWN_CONNECTION) as channel:
            sessions_pb2_grpc.SessionServiceStub(channel).CreateSession(
                spb.CreateSessionRequest(user_id="spread")
            )
    deadline = time.monotonic() + 10
    while call_workers(workers, since) != {0, 1}:
        assert time.monotonic() < deadline, call_workers(workers, since)
        time.sleep(0.05)


def test_another_server_cannot_join_the_workers_port(
    workers: ServerProcess, tmp_path: Path
) -> None:
    data_dir = ["--data-dir", str(tmp_path)]
    second = subprocess.run(
        [sys.executable, "-m", "contextd", "serve", "--port", str(workers.port), *data_dir],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode != 0
    assert f"127.0.0.1:{workers.port} (--port) is already in use by pid" in second.stderr
    assert tcp_states(workers.port).count(LISTEN) == 2


async def stored_contents(address: str, user: str) -> set[str]:
    found: set[str] = set()
    token = ""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        while True:
            page = await stub.ListMemories(
                mpb.ListMemoriesRequest(user_id=user, page_size=200, page_token=token)
            )
            found.update(m.content for m in page.memories)
            token = page.next_page_token
            if not token:
                return found


def wait_for_restart(server: ServerProcess, index: int, old_pid: int) -> int:
    deadline = time.monotonic() + 60
    while (pid := worker_pids(server).get(index)) == old_pid:
        assert time.monotonic() < deadline, "the killed worker was not started again"
        time.sleep(0.05)
    assert pid is not None
    return pid


async def test_a_worker_killed_under_writers_loses_no_acknowledged_write(
    workers: ServerProcess,
) -> None:
    """Writers on connections of their own: the killed worker's calls fail UNAVAILABLE,
    their clients connect again (to the other worker, then to both), and every write
    that was answered is stored."""
    user = f"writers-{uuid.uuid4().hex[:8]}"
    acknowledged: list[str] = []
    failures: list[grpc.StatusCode] = []
    stop, progress = asyncio.Event(), asyncio.Event()

    async def writer(n: int) -> None:
        count = 0
        while not stop.is_set():
            async with grpc.aio.insecure_channel(workers.address, options=OWN_CONNECTION) as ch:
                stub = memory_pb2_grpc.MemoryServiceStub(ch)
                for _ in range(10):
                    content = f"fact {n}-{count}"
                    count += 1
                    try:
                        await stub.AddMemory(
                            mpb.AddMemoryRequest(user_id=user, content=content), timeout=20
                        )
                    except grpc.aio.AioRpcError as error:
                        failures.append(error.code())
                        break  # a new connection
                    acknowledged.append(content)
                    progress.set()

    async def written(count: int) -> None:
        while len(acknowledged) < count:
            progress.clear()
            await progress.wait()

    victim = worker_pids(workers)[1]
    tasks = [asyncio.create_task(writer(n)) for n in range(4)]
    try:
        await written(40)
        os.kill(victim, signal.SIGKILL)
        restarted = await asyncio.to_thread(wait_for_restart, workers, 1, victim)
        await written(len(acknowledged) + 40)  # writes go on with the restarted worker
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    assert set(failures) <= {grpc.StatusCode.UNAVAILABLE}, failures
    assert set(acknowledged) <= await stored_contents(workers.address, user)
    [ended] = workers.logs("worker ended: starting it again")
    assert (ended["worker"], ended["pid"], ended["exit"]) == (1, victim, "SIGKILL")
    assert restarted != victim
    assert tcp_states(workers.port).count(LISTEN) == 2


def turn_request(user: str, text: str, session_id: str = "") -> cpb.StreamChatRequest:
    return cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=session_id), user_message=text
    )


async def turn_on_own_connection(address: str, request: cpb.StreamChatRequest) -> list[Any]:
    async with grpc.aio.insecure_channel(address, options=OWN_CONNECTION) as channel:
        call = chat_pb2_grpc.ChatServiceStub(channel).StreamChat(request, timeout=60)
        return [event async for event in call]


async def test_turns_of_one_session_on_both_workers_keep_numbers_and_leases(
    workers: ServerProcess,
) -> None:
    """Turns sent at once on connections of their own (so on both workers) run one
    after the other: numbers 1..n, each once, every message stored in turn order."""
    user = f"turns-{uuid.uuid4().hex[:8]}"
    [first] = [await turn_on_own_connection(workers.address, turn_request(user, "Hello"))]
    sid = first[0].turn_started.session_id
    since = len(workers.logs("rpc"))
    results = await asyncio.gather(
        *(
            turn_on_own_connection(workers.address, turn_request(user, f"message {k}", sid))
            for k in range(8)
        )
    )
    assert all(r[-1].turn_completed.status == cpb.TURN_STATUS_OK for r in results)
    assert sorted(r[0].turn_started.turn_index for r in results) == list(range(2, 10))
    assert call_workers(workers, since) == {0, 1}
    async with grpc.aio.insecure_channel(workers.address) as channel:
        stub = sessions_pb2_grpc.SessionServiceStub(channel)
        page = await stub.ListMessages(
            spb.ListMessagesRequest(user_id=user, session_id=sid, page_size=100)
        )
        export = stub.ExportEvents(spb.ExportEventsRequest(user_id=user, session_id=sid))
        events = [json.loads(e.json) async for e in export]  # every line whole
    turns = [(m.message.role, m.turn_index) for m in page.messages]
    assert turns == [(role, k) for k in range(1, 10) for role in (pb.ROLE_USER, pb.ROLE_ASSISTANT)]
    # The session's event log, written by both workers: each turn's lines in turn order.
    assert [e["turn"] for e in events if e["type"] == "turn_end"] == list(range(1, 10))


async def test_sigterm_drains_every_worker(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Turns in flight on both workers end OK after the parent's SIGTERM; then every
    worker and the parent exit, 0."""
    server = start_server(
        tmp_path,
        "--workers",
        "2",
        "--echo-delay-ms",
        "100",
        database_url=database_url_for(request, backend),
        ready=READY,
    )
    try:
        user = f"drain-{uuid.uuid4().hex[:8]}"
        channels = [
            grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION) for _ in range(8)
        ]
        calls = [
            chat_pb2_grpc.ChatServiceStub(ch).StreamChat(
                turn_request(user, "tell me a long story " * 5), timeout=60
            )
            for ch in channels
        ]
        firsts = [await call.read() for call in calls]  # every turn has started
        assert all(f.HasField("turn_started") for f in firsts)
        assert {int(str(x["worker"])) for x in server.logs("rpc")} <= {0, 1}
        server.process.send_signal(signal.SIGTERM)
        rests = []
        for call in calls:
            rest = []
            while (event := await call.read()) is not grpc.aio.EOF:
                rest.append(event)
            rests.append(rest)
        assert all(r[-1].turn_completed.status == cpb.TURN_STATUS_OK for r in rests)
        assert await asyncio.to_thread(server.process.wait, 30) == 0
        for ch in channels:
            await ch.close()
    finally:
        server.stop(signal.SIGKILL)
    assert not server.logs("worker ended: starting it again")
    assert server.logs("stopped")


@pytest.mark.parametrize("value", ["0", "-1", "two", "257", ""])
def test_a_bad_worker_count_is_named(value: str) -> None:
    with pytest.raises(
        SettingsError, match=f"--workers must be auto or a number from 1 to 256, not {value!r}"
    ):
        Settings(workers=value).check()


def test_auto_is_the_cores_this_process_may_use() -> None:
    assert Settings(workers="auto").worker_count() == usable_cores() >= 1
    assert usable_cores() <= len(os.sched_getaffinity(0))


async def channel_on(server: ServerProcess, index: int) -> grpc.aio.Channel:
    """A channel whose connection the kernel gave to worker ``index``."""
    for _ in range(64):
        channel = grpc.aio.insecure_channel(server.address, options=OWN_CONNECTION)
        since = len(server.logs("rpc"))
        await context_pb2_grpc.ContextServiceStub(channel).ListTokenizers(
            pb.ListTokenizersRequest()
        )
        deadline = time.monotonic() + 10
        while len(lines := server.logs("rpc")) <= since:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        if lines[since]["worker"] == index:
            return channel
        await channel.close()
    raise AssertionError(f"no connection reached worker {index}")


async def test_a_read_on_one_worker_sees_a_write_on_the_other(workers: ServerProcess) -> None:
    """What a worker keeps in memory (a session's newest messages, the prompt templates)
    is checked against the versions the other worker's writes move on."""
    a, b = await channel_on(workers, 0), await channel_on(workers, 1)
    user, scenario = f"kept-{uuid.uuid4().hex[:8]}", f"sc-{uuid.uuid4().hex[:8]}"
    prompts_a = prompts_pb2_grpc.PromptServiceStub(a)
    context_b = context_pb2_grpc.ContextServiceStub(b)

    async def build_on_b(sid: str) -> pb.BuildMessagesResponse:
        return await context_b.BuildMessages(
            pb.BuildMessagesRequest(
                user_message="next",
                token_budget=4000,
                session=pb.SessionContext(user_id=user, session_id=sid, scenario=scenario),
            )
        )

    try:
        await prompts_a.UpsertTemplate(
            ppb.UpsertTemplateRequest(scenario=scenario, system_prompt="Template one.")
        )
        turn = turn_request(user, "first words")
        [started, *_] = [e async for e in chat_pb2_grpc.ChatServiceStub(a).StreamChat(turn)]
        sid = started.turn_started.session_id
        before = await build_on_b(sid)  # worker 1 keeps the tail and the template
        assert "Template one." in before.messages[0].content
        assert "first words" in [m.content for m in before.messages]
        await prompts_a.UpsertTemplate(
            ppb.UpsertTemplateRequest(scenario=scenario, system_prompt="Template two.")
        )
        turn = turn_request(user, "second words", sid)
        assert [e async for e in chat_pb2_grpc.ChatServiceStub(a).StreamChat(turn)]
        after = await build_on_b(sid)
        assert "Template two." in after.messages[0].content
        assert "second words" in [m.content for m in after.messages]
    finally:
        await a.close()
        await b.close()


async def test_the_passes_over_the_whole_database_run_in_one_worker(tmp_path: Path) -> None:
    settings = Settings(port=0, data_dir=tmp_path)
    db = await open_database("", tmp_path)
    try:
        ids = await public_ids(db)
        for sweeps in (True, False):
            services = build_services(settings, db, prepare(settings), ids, sweeps=sweeps)
            runs = [type(work) for work in services.background]
            assert (RetentionPurger in runs) == sweeps
    finally:
        await db.close()


def test_workers_stop_when_their_parent_is_killed(tmp_path: Path) -> None:
    """A worker never serves on without its parent: killed, the parent takes its workers
    with it, and the data directory (SQLite) is free for the next server."""
    server = start_server(tmp_path, "--workers", "2", ready=READY)
    pids = list(worker_pids(server).values())
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(10)
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in pids):
        assert time.monotonic() < deadline, "a worker outlived its parent"
        time.sleep(0.05)
    start_server(tmp_path).stop()
