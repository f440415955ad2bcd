"""Throughput of ``contextd serve --workers N``: BuildMessages and short StreamChat turns
per second with 1 and 2 workers, the server's CPU per call, and from those the
throughput N workers would give on N cores.

The load comes from ``h2load`` (Debian ``nghttp2-client``), a load generator in C that
costs the machine little: it posts one prepared gRPC frame (``0x00``, the 4-byte length,
the serialized request) with ``content-type: application/grpc`` and ``te: trailers`` over
several HTTP/2 connections (one connection stays on one worker, so several are needed
for the kernel to spread them). Before each run the same frame is sent once through
grpcio and must answer OK (h2load counts HTTP statuses, not gRPC ones).

Each run lasts a set time (``h2load -D``), every connection sending all along. A set
number of calls would be shared out evenly among the connections, and the kernel rarely
gives two workers four connections each: the worker with fewer would finish its share
and stand idle while the other worked through the rest, so the run would time the
split, not the workers. The run prints each worker's share of the server's CPU.

Server CPU is the parent's and every worker's user and system time over the run
(/proc). ``calls per CPU-second`` with 2 workers against 1 says what a second worker
costs; N times the 2-worker figure is the throughput N workers would give on N cores
with nothing else running. A third side is the control: two separate servers of one
worker each, on data of their own, each given half the connections at once. What they
lose per call against one server is what two busy processes cost each other on this
machine (its cores share caches, and on a virtual machine more); what two workers lose
against them is what sharing one server costs (its SQLite file and its versions, its
port). Rounds alternate the three sides; the figures are medians.

A worker is not one thread: gRPC's own threads (its event engine and the poller that
wakes the event loop) read and write the sockets beside the Python thread, so a worker
that keeps its Python thread busy uses more than one core. The run prints the cores each
side used, the main threads' share of the server's CPU, and h2load's own CPU; from them,
the most 2 ÷ 1 can reach on this machine: the cores h2load leaves, divided by the cores
one worker used.

Run: ``python bench/workers.py [--quick] [--database-url URL]`` (SQLite by default).
Targets: 2 workers / 1 >= 1.7 for BuildMessages (``RESULT workers``); derived N=8 >= 0.9
x 8 x one worker's calls per CPU-second, i.e. calls per CPU-second with 2 workers / 1 >=
0.9 (``workers_derived_8``), and the same against two separate servers
(``workers_sharing``); the same three for turns (``workers_turns...``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
from _common import SHORT_HISTORY, SYSTEM_PROMPT, USER_MESSAGE, machine_note, median, print_table
from _common import free_port as pick_port
from _common import result_line as result
from contextd.v1 import chat_pb2, context_pb2

ROLES = {"user": context_pb2.ROLE_USER, "assistant": context_pb2.ROLE_ASSISTANT}
CONNECTIONS = 8
STREAMS = 8  # per connection


def build_request() -> bytes:
    return context_pb2.BuildMessagesRequest(
        system_prompts=[SYSTEM_PROMPT],
        history=[context_pb2.Message(role=ROLES[r], content=t) for r, t in SHORT_HISTORY],
        user_message=USER_MESSAGE,
        token_budget=4000,
    ).SerializeToString()


def turn_request() -> bytes:
    """A short turn of a new session each time (the echo provider answers)."""
    return chat_pb2.StreamChatRequest(
        session=context_pb2.SessionContext(user_id="bench"), user_message="Hello there"
    ).SerializeToString()


CALLS = {
    "BuildMessages": ("/contextd.v1.ContextService/BuildMessages", build_request),
    "StreamChat": ("/contextd.v1.ChatService/StreamChat", turn_request),
}


@dataclass
class Server:
    process: subprocess.Popen[str]
    port: int

    def cpu_seconds(self) -> tuple[float, float, dict[int, float]]:
        """User and system time of the parent and every worker so far, of that the time
        of the processes' main (Python) threads, and each process's."""
        total = main = 0.0
        each = {}
        for pid in [self.process.pid, *_children(self.process.pid)]:
            try:
                each[pid] = _cpu(f"/proc/{pid}/stat")
                main += _cpu(f"/proc/{pid}/task/{pid}/stat")
            except OSError:
                continue
            total += each[pid]
        return total, main, each

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(60)


def _cpu(stat: str) -> float:
    fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _generator_seconds() -> float:
    """CPU time of this process's finished children (each h2load run)."""
    times = os.times()
    return times.children_user + times.children_system


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if stat[1] == str(pid):
                found.append(int(entry))
    return found


def start(workers: int, data_dir: Path, database_url: str) -> Server:
    port = pick_port()
    command = [sys.executable, "-m", "contextd", "serve", "--port", str(port)]
    command += ["--workers", str(workers), "--data-dir", str(data_dir), "--log-level", "WARNING"]
    if database_url:
        command += ["--database-url", database_url]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 60
    while True:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=1)
                break
            except grpc.FutureTimeoutError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"contextd --workers {workers} did not start") from None
    time.sleep(1.0 if workers > 1 else 0.2)  # every worker listening
    return Server(process, port)


def check_once(port: int, path: str, body: bytes) -> None:
    """The frame h2load will send answers OK when sent through grpcio."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        if path.endswith("StreamChat"):
            list(channel.unary_stream(path, None, None)(body, timeout=30))
        else:
            channel.unary_unary(path, None, None)(body, timeout=30)


def h2load(
    port: int, path: str, frame: Path, *, requests: int = 0, seconds: int = 0, connections: int = 0
) -> subprocess.Popen[str]:
    """h2load started on ``requests`` calls or for ``seconds`` (``rate`` reads its
    answer), over ``connections`` (CONNECTIONS by default)."""
    load = ["h2load", "-c", str(connections or CONNECTIONS), "-m", str(STREAMS)]
    load += ["-D", str(seconds)] if seconds else ["-n", str(requests)]
    grpc_post = ["-H", "content-type: application/grpc", "-H", "te: trailers", "-d", str(frame)]
    command = [*load, *grpc_post, f"http://127.0.0.1:{port}{path}"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def rate(run: subprocess.Popen[str]) -> float:
    """Calls per second the h2load run measured; SystemExit when any call failed."""
    out, _ = run.communicate()
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
    found = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    if run.returncode or done is None or found is None or done.group(1) != done.group(2):
        raise SystemExit(f"h2load: calls failed\n{out}")
    return float(found.group(1))


@dataclass(frozen=True)
class Side:
    """One way of serving: ``servers`` servers of ``workers`` workers each, the load's
    connections shared among the servers."""

    label: str
    workers: int
    servers: int = 1


# The control: two servers of one worker each, on data of their own, loaded at once.
# What they lose per call against one server alone is what two busy processes cost
# each other on this machine; what two workers lose against them is what sharing one
# server (its SQLite file, its port) costs.
SIDES = (Side("1 worker", 1), Side("2 workers", 2), Side("two separate servers", 1, 2))


@dataclass
class Sample:
    rate: float  # calls per second, every server's
    cpu: float  # the servers' CPU-seconds over the run
    main_cpu: float  # of that, their main threads'
    loader: float  # h2load's CPU-seconds
    elapsed: float
    used: list[float]  # each process's CPU-seconds, ascending


def measure(
    side: Side, path: str, body: bytes, frame: Path, data: Path, args: argparse.Namespace
) -> Sample:
    servers = [
        start(side.workers, data / f"server-{n}", args.database_url) for n in range(side.servers)
    ]
    connections = CONNECTIONS // side.servers
    try:
        for server in servers:
            check_once(server.port, path, body)
            rate(h2load(server.port, path, frame, requests=1000, connections=connections))  # warm
        before = [server.cpu_seconds() for server in servers]
        loader = _generator_seconds()
        began = time.perf_counter()
        runs = [
            h2load(server.port, path, frame, seconds=args.seconds, connections=connections)
            for server in servers
        ]
        rates = [rate(run) for run in runs]
        elapsed = time.perf_counter() - began
        loader = _generator_seconds() - loader
        after = [server.cpu_seconds() for server in servers]
    finally:
        for server in servers:
            server.stop()
    used = sorted(
        t - b[2].get(pid, 0.0)
        for a, b in zip(after, before, strict=True)
        for pid, t in a[2].items()
    )
    return Sample(
        sum(rates),
        sum(a[0] - b[0] for a, b in zip(after, before, strict=True)),
        sum(a[1] - b[1] for a, b in zip(after, before, strict=True)),
        loader,
        elapsed,
        used,
    )


def run(args: argparse.Namespace) -> int:
    if shutil.which("h2load") is None:
        raise SystemExit("h2load is missing: apt-get install nghttp2-client")
    args.seconds = 3 if args.quick else 10
    rounds = 2 if args.quick else 4
    print(machine_note())
    print(f"h2load: {CONNECTIONS} connections x {STREAMS} streams, {args.seconds} s a run")
    samples: dict[tuple[str, str], list[Sample]] = {}
    with tempfile.TemporaryDirectory(prefix="contextd-workers-") as tmp:
        for name, (path, make) in CALLS.items():
            body = make()
            frame = Path(tmp, f"{name}.frame")
            frame.write_bytes(b"\0" + len(body).to_bytes(4, "big") + body)
            for r in range(rounds):
                for n, side in enumerate(SIDES):
                    data = Path(tmp, f"data-{name}-{r}-{n}")
                    sample = measure(side, path, body, frame, data, args)
                    samples.setdefault((name, side.label), []).append(sample)

    def mid(name: str, side: Side, value: Callable[[Sample], float]) -> float:
        return median([value(s) for s in samples[(name, side.label)]])

    def per_cpu(name: str, side: Side) -> float:
        return mid(name, side, lambda s: s.rate * s.elapsed / s.cpu)

    rows = []
    for name in CALLS:
        for side in SIDES:
            rows.append(
                [
                    f"{name}, {side.label}",
                    f"{mid(name, side, lambda s: s.rate):,.0f}",
                    f"{1000 / per_cpu(name, side):.3f}",
                    f"{per_cpu(name, side):,.0f}",
                    f"{mid(name, side, lambda s: s.cpu / s.elapsed):.2f}",
                    f"{100 * mid(name, side, lambda s: s.main_cpu / s.cpu):.0f} %",
                    f"{mid(name, side, lambda s: s.loader / s.elapsed):.2f}",
                ]
            )
    headers = ["calls", "calls/s", "server CPU ms/call", "calls per CPU-second"]
    headers += ["server cores", "main threads' share", "h2load cores"]
    print_table(headers, rows)
    one, two, apart = SIDES
    for name in CALLS:
        print(f"{name}: derived for 8 workers on 8 cores: {8 * per_cpu(name, two):,.0f} calls/s")
        share = 100 * mid(name, two, lambda s: s.used[-1] / (s.used[-1] + s.used[-2]))
        print(f"{name}: with 2 workers the busier took {share:.0f} % of their CPU")
        free = (os.cpu_count() or 1) - mid(name, two, lambda s: s.loader / s.elapsed)
        cores = mid(name, one, lambda s: s.cpu / s.elapsed)
        print(
            f"{name}: 2 ÷ 1 can reach at most {free / cores:.2f} here "
            f"({free:.2f} cores left by h2load ÷ {cores:.2f} used by one worker)"
        )
        print(
            f"{name}: calls per CPU-second, two separate servers ÷ one: "
            f"{per_cpu(name, apart) / per_cpu(name, one):.2f} (what two busy processes cost "
            f"each other here); 2 workers ÷ two separate servers: "
            f"{per_cpu(name, two) / per_cpu(name, apart):.2f} (what sharing one server costs)"
        )
    lines = []
    for name, label in (("BuildMessages", "workers"), ("StreamChat", "workers_turns")):
        lines.append(
            (label, mid(name, two, lambda s: s.rate) / mid(name, one, lambda s: s.rate), 1.7)
        )
        lines.append((f"{label}_derived_8", per_cpu(name, two) / per_cpu(name, one), 0.9))
        lines.append((f"{label}_sharing", per_cpu(name, two) / per_cpu(name, apart), 0.9))
    for label, ratio, target in lines:
        print(result(label, ratio, target, ratio >= target))
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    parser.add_argument("--database-url", default="", help="PostgreSQL instead of SQLite")
    sys.exit(run(parser.parse_args()))


if __name__ == "__main__":
    main()
