"""PostgreSQL against SQLite: the same server, the same calls, another engine.

Spawned ``contextd serve`` processes: one on a SQLite data directory, one on a throwaway
PostgreSQL (tests/support/postgres.py), and a second replica on that same PostgreSQL
database. Each engine gets the same sessions (a history of varied turns per session).
Two workloads, each from CONCURRENCY concurrent clients with a session of their own:
session-mode ``BuildMessages`` calls and ``StreamChat`` turns with the echo provider. The
sides run in alternating rounds (SQLite, one replica, two replicas with the clients spread
over both), and the table gives calls or turns per second.

The RESULT ratio is the lower of the two one-replica ratios (PostgreSQL ÷ SQLite); the
target is at least 0.7. Two replicas ÷ one is printed, without a target.

Beside the rates, per call: contextd's CPU (all threads of the serving processes) and
PostgreSQL's (every process of its server, from /proc), both over the measured rounds,
and the round trips to PostgreSQL, counted on the wire (tests/support/pg_round_trips.py)
by one more replica that serves a few sequential calls after the rounds. From those, the
throughput N replicas would reach against one PostgreSQL with cores to spare, and the N
from which PostgreSQL's CPU is the limit.
Run: ``python bench/pg_vs_sqlite.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support

import grpc
import grpc.aio
from _common import USER_MESSAGE, long_history, machine_note, median, print_table, result_line
from _server import ServerChild
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import chat_pb2_grpc, context_pb2_grpc, sessions_pb2, sessions_pb2_grpc
from contextd.v1 import context_pb2 as pb

from tests.support.pg_round_trips import RoundTripRelay, counting_relay
from tests.support.postgres import PostgresServer, running_postgres

NAME = "pg_vs_sqlite"
TARGET = 0.7
CONCURRENCY = 8
USER = "bench-user"
HISTORY = 100  # messages in each session before the rounds


def spawn(data_dir: Path, database_url: str = "") -> tuple[ServerChild, str]:
    """``contextd serve`` on a free port; on PostgreSQL when a URL is given."""
    command = [sys.executable, "-m", "contextd", "serve", "--port", "0"]
    command += ["--data-dir", str(data_dir)]
    if database_url:
        command += ["--database-url", database_url]
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    assert process.stderr is not None
    for line in process.stderr:
        entry = json.loads(line)
        if entry.get("msg") == "listening":
            address = str(entry["address"])
            break
    else:
        raise RuntimeError("the server exited before listening")
    # Keep draining the log so the server never blocks on a full pipe.
    threading.Thread(target=process.stderr.read, daemon=True).start()
    return ServerChild(process, int(address.rsplit(":", 1)[1])), address


def fill(address: str, sessions: int) -> list[str]:
    """``sessions`` new sessions of USER, each with HISTORY messages."""
    roles = {"user": pb.ROLE_USER, "assistant": pb.ROLE_ASSISTANT}
    made = []
    with grpc.insecure_channel(address) as channel:
        stub = sessions_pb2_grpc.SessionServiceStub(channel)
        for n in range(sessions):
            sid = stub.CreateSession(sessions_pb2.CreateSessionRequest(user_id=USER)).session.id
            turns = long_history(HISTORY, seed=n)
            stub.AppendMessages(
                sessions_pb2.AppendMessagesRequest(
                    user_id=USER,
                    session_id=sid,
                    messages=[pb.Message(role=roles[r], content=t) for r, t in turns],
                )
            )
            made.append(sid)
    return made


Call = Callable[[grpc.aio.Channel, str], Awaitable[None]]


async def build(channel: grpc.aio.Channel, session_id: str) -> None:
    await context_pb2_grpc.ContextServiceStub(channel).BuildMessages(
        pb.BuildMessagesRequest(
            user_message=USER_MESSAGE,
            token_budget=4000,
            session=pb.SessionContext(user_id=USER, session_id=session_id),
        )
    )


async def chat(channel: grpc.aio.Channel, session_id: str) -> None:
    last = None
    async for response in chat_pb2_grpc.ChatServiceStub(channel).StreamChat(
        cpb.StreamChatRequest(
            session=pb.SessionContext(user_id=USER, session_id=session_id),
            user_message=USER_MESSAGE,
        )
    ):
        last = response
    if last is None or last.turn_completed.status != cpb.TURN_STATUS_OK:
        raise SystemExit(f"a StreamChat turn did not end OK: {last}")


def postgres_cpu_seconds(postgres: PostgresServer) -> float:
    """CPU time so far of every process of the PostgreSQL server (its postmaster's
    children: backends, writers; a backend that ended takes its time with it)."""
    tick = os.sysconf("SC_CLK_TCK")
    pids = [p for p in os.listdir("/proc") if p.isdigit()]
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[1] is the parent; utime and stime are the 14th and 15th of the line.
        if postgres.postmaster_pid in (int(pid), int(fields[1])):
            total += int(fields[11]) + int(fields[12])
    return total / tick


@dataclass
class Side:
    """One engine set-up: its servers, and each client's session and server."""

    name: str
    servers: list[ServerChild]
    addresses: list[str]
    sessions: list[str]
    postgres: PostgresServer | None = None
    rates: dict[str, list[float]] = field(default_factory=dict)
    # Per workload: calls, contextd's CPU seconds and PostgreSQL's over the rounds.
    cpu: dict[str, list[float]] = field(default_factory=dict)

    def _cpu(self) -> tuple[float, float]:
        mine = sum(server.cpu_seconds() or 0.0 for server in self.servers)
        return mine, postgres_cpu_seconds(self.postgres) if self.postgres else 0.0

    async def round(self, workload: str, call: Call, calls: int) -> None:
        for server in self.servers:  # the last round's turns finish their background work
            await server.quiet()
        channels = [grpc.aio.insecure_channel(address) for address in self.addresses]
        remaining = calls

        async def client(k: int) -> None:
            nonlocal remaining
            # Clients spread over the replicas, each with a session of its own.
            channel, session_id = channels[k % len(channels)], self.sessions[k]
            while remaining > 0:
                remaining -= 1
                await call(channel, session_id)

        try:
            cpu_before = self._cpu()
            started = time.perf_counter()
            await asyncio.gather(*(client(k) for k in range(CONCURRENCY)))
            elapsed = time.perf_counter() - started
            for server in self.servers:  # the turns' work after them is theirs too
                await server.quiet()
            cpu_after = self._cpu()
        finally:
            for channel in channels:
                await channel.close(None)
        self.rates.setdefault(workload, []).append(calls / elapsed)
        spent = self.cpu.setdefault(workload, [0.0, 0.0, 0.0])
        spent[0] += calls
        spent[1] += cpu_after[0] - cpu_before[0]
        spent[2] += cpu_after[1] - cpu_before[1]

    def per_call_us(self, workload: str) -> tuple[float, float]:
        """contextd's and PostgreSQL's CPU per call, in µs."""
        calls, mine, postgres = self.cpu[workload]
        return mine / calls * 1e6, postgres / calls * 1e6


async def measure(sides: list[Side], rounds: int, counts: dict[str, int]) -> None:
    workloads: dict[str, Call] = {"BuildMessages": build, "StreamChat": chat}
    for side in sides:  # warm up: token counts, caches, connections
        for workload, call in workloads.items():
            await side.round(workload, call, CONCURRENCY * 2)
        side.rates.clear()
        side.cpu.clear()
    for r in range(rounds):
        order = sides if r % 2 == 0 else sides[::-1]
        for workload, call in workloads.items():
            for side in order:
                await side.round(workload, call, counts[workload])


async def count_round_trips(
    relay: RoundTripRelay, address: str, session_id: str, calls: int
) -> dict[str, float]:
    """Round trips per call of each workload, sequential calls on one warm replica; a
    turn's include its work after the turn (counted until the replica is quiet)."""
    workloads: dict[str, Call] = {"BuildMessages": build, "StreamChat": chat}
    found = {}
    async with grpc.aio.insecure_channel(address) as channel:
        for call in workloads.values():  # warm: prepared statements, kept reads
            for _ in range(3):
                await call(channel, session_id)
        for workload, call in workloads.items():
            total = 0
            for _ in range(calls):
                await asyncio.to_thread(relay.wait_quiet)
                before, _ = relay.snapshot()
                await call(channel, session_id)
                await asyncio.to_thread(relay.wait_quiet)
                total += relay.snapshot()[0] - before
            found[workload] = total / calls
    return found


def report_costs(sides: list[Side], trips: dict[str, float]) -> None:
    """CPU and round trips per call, and what they say of N replicas on one PostgreSQL."""
    sqlite, one, _ = sides
    rows = []
    for workload in ("BuildMessages", "StreamChat"):
        base, _ = sqlite.per_call_us(workload)
        mine, postgres = one.per_call_us(workload)
        rows.append(
            (workload, f"{base:.0f}", f"{mine:.0f}", f"{postgres:.0f}", f"{trips[workload]:.1f}")
        )
    print_table(
        [
            "workload",
            "SQLite contextd µs/call",
            "PG contextd µs/call",
            "PostgreSQL µs/call",
            "round trips/call",
        ],
        rows,
    )
    for workload in ("BuildMessages", "StreamChat"):
        mine, postgres = one.per_call_us(workload)
        if postgres <= 0:
            # Its CPU is read in clock ticks: a quick run can end within one.
            print(f"{workload}: PostgreSQL's CPU per call was below what this run could measure")
            continue
        # One core per replica, P cores for PostgreSQL: N/mine calls/s until P/postgres.
        print(
            f"{workload}: a replica on one core ~{1e6 / mine:.0f}/s; PostgreSQL on one core "
            f"~{1e6 / postgres:.0f}/s; PostgreSQL is the limit from N ~ {mine / postgres:.1f} "
            "replicas per PostgreSQL core"
        )


def report(sides: list[Side], rounds: int, counts: dict[str, int]) -> float:
    sqlite, one, two = sides
    print(
        f"{NAME}: {rounds} alternating rounds; {CONCURRENCY} concurrent clients, each with "
        f"its own session of {HISTORY}+ messages; {counts['BuildMessages']} BuildMessages "
        f"calls (budget 4000 tokens) and {counts['StreamChat']} StreamChat turns (echo "
        "provider) per round and side"
    )
    rows = []
    for workload in ("BuildMessages", "StreamChat"):
        for side in sides:
            rates = side.rates[workload]
            rows.append(
                (workload, side.name, f"{median(rates):.0f}", f"{min(rates):.0f}-{max(rates):.0f}")
            )
    print_table(["workload", "engine", "per second (median)", "range"], rows)
    ratios = {}
    for workload in ("BuildMessages", "StreamChat"):
        base = median(sqlite.rates[workload])
        ratios[workload] = median(one.rates[workload]) / base
        replicas = median(two.rates[workload]) / median(one.rates[workload])
        print(
            f"{workload}: PostgreSQL ÷ SQLite {ratios[workload]:.2f}; "
            f"two replicas ÷ one {replicas:.2f}"
        )
    return min(ratios.values())


async def run(args: argparse.Namespace) -> int:
    rounds = 2 if args.quick else args.rounds
    counts = (
        {"BuildMessages": 40, "StreamChat": 16}
        if args.quick
        else {
            "BuildMessages": 400,
            "StreamChat": 120,
        }
    )
    print(machine_note())
    with (
        running_postgres() as postgres,
        tempfile.TemporaryDirectory(prefix="contextd-bench-") as tmp,
    ):
        url = postgres.create_database("bench")
        root = Path(tmp)
        started: list[tuple[ServerChild, str]] = []
        try:
            for data_dir, database_url in (("sqlite", ""), ("pg-1", url), ("pg-2", url)):
                started.append(spawn(root / data_dir, database_url))
            servers = [server for server, _ in started]
            addresses = [address for _, address in started]
            # The two PostgreSQL sides share their database: each gets sessions of its own.
            sqlite_sessions = fill(addresses[0], CONCURRENCY)
            one_sessions = fill(addresses[1], CONCURRENCY)
            two_sessions = fill(addresses[1], CONCURRENCY)
            sides = [
                Side("SQLite", servers[:1], addresses[:1], sqlite_sessions),
                Side("PostgreSQL, 1 replica", servers[1:2], addresses[1:2], one_sessions, postgres),
                Side("PostgreSQL, 2 replicas", servers[1:], addresses[1:], two_sessions, postgres),
            ]
            await measure(sides, rounds, counts)
            for server, _ in started[1:]:  # the round trips' replica alone on PostgreSQL
                server.process.terminate()
                server.process.wait(15)
            with counting_relay("127.0.0.1", postgres.port) as relay:
                started.append(spawn(root / "pg-counted", relay.url("bench")))
                trips = await count_round_trips(
                    relay, started[-1][1], one_sessions[0], 3 if args.quick else 10
                )
        finally:
            for server, _ in started:
                server.process.terminate()
                server.process.wait(15)
    ratio = report(sides, rounds, counts)
    report_costs(sides, trips)
    print(result_line(NAME, ratio, TARGET, ratio >= TARGET))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts, a smoke test")
    parser.add_argument("--rounds", type=int, default=5)
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
