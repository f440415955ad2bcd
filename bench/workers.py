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
(/proc). ``calls per CPU-second`` with 2 workers against 1 says what a worker costs in
sharing; N times the 2-worker figure is the throughput N workers would give on N cores
with nothing else running. Rounds alternate 1 and 2 workers; the figures are medians.

A worker is not one thread: gRPC's own threads (its event engine and the poller that
wakes the event loop) read and write the sockets beside the Python thread, so a worker
that keeps its Python thread busy uses more than one core. The run prints the cores each
side used, the main threads' share of the server's CPU, and h2load's own CPU; from them,
the most 2 ÷ 1 can reach on this machine: the cores h2load leaves, divided by the cores
one worker used.

Run: ``python bench/workers.py [--quick] [--database-url URL]`` (SQLite by default).
Targets: 2 workers / 1 >= 1.7 for BuildMessages (``RESULT workers``); derived N=8 >= 0.9
x 8 x one worker's calls per CPU-second, i.e. calls per CPU-second with 2 workers / 1 >=
0.9 (``workers_derived_8``); the same two for turns (``workers_turns...``).
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


def h2load(port: int, path: str, frame: Path, *, requests: int = 0, seconds: int = 0) -> float:
    """Calls per second h2load measured over ``requests`` calls or for ``seconds``;
    SystemExit when any failed."""
    load = ["h2load", "-c", str(CONNECTIONS), "-m", str(STREAMS)]
    load += ["-D", str(seconds)] if seconds else ["-n", str(requests)]
    grpc_post = ["-H", "content-type: application/grpc", "-H", "te: trailers", "-d", str(frame)]
    out = subprocess.run(
        [*load, *grpc_post, f"http://127.0.0.1:{port}{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    done = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out)
    rate = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out)
    if done is None or rate is None or done.group(1) != done.group(2):
        raise SystemExit(f"h2load: calls failed\n{out}")
    return float(rate.group(1))


def run(args: argparse.Namespace) -> int:
    if shutil.which("h2load") is None:
        raise SystemExit("h2load is missing: apt-get install nghttp2-client")
    seconds = 3 if args.quick else 10
    rounds = 2 if args.quick else 4
    print(machine_note())
    print(f"h2load: {CONNECTIONS} connections x {STREAMS} streams, {seconds} s a run")
    rates: dict[tuple[str, int], list[float]] = {}
    per_cpu: dict[tuple[str, int], list[float]] = {}
    cores: dict[tuple[str, int], list[float]] = {}  # the server's CPU-seconds per second
    main_share: dict[tuple[str, int], list[float]] = {}  # of that, its main threads'
    generator: dict[tuple[str, int], list[float]] = {}  # h2load's, likewise
    busier: dict[str, list[float]] = {}  # with 2 workers, the busier one's share of their CPU
    with tempfile.TemporaryDirectory(prefix="contextd-workers-") as tmp:
        for name, (path, make) in CALLS.items():
            body = make()
            frame = Path(tmp, f"{name}.frame")
            frame.write_bytes(b"\0" + len(body).to_bytes(4, "big") + body)
            for r in range(rounds):
                for workers in (1, 2):
                    server = start(
                        workers, Path(tmp, f"data-{name}-{r}-{workers}"), args.database_url
                    )
                    try:
                        check_once(server.port, path, body)
                        h2load(server.port, path, frame, requests=1000)  # warm-up
                        cpu, main_cpu, each = server.cpu_seconds()
                        loader = _generator_seconds()
                        began = time.perf_counter()
                        rate = h2load(server.port, path, frame, seconds=seconds)
                        elapsed = time.perf_counter() - began
                        loader = _generator_seconds() - loader
                        after, main_after, each_after = server.cpu_seconds()
                        cpu, main_cpu = after - cpu, main_after - main_cpu
                        used = sorted(t - each.get(pid, 0.0) for pid, t in each_after.items())
                    finally:
                        server.stop()
                    key = (name, workers)
                    rates.setdefault(key, []).append(rate)
                    per_cpu.setdefault(key, []).append(rate * elapsed / cpu)
                    cores.setdefault(key, []).append(cpu / elapsed)
                    main_share.setdefault(key, []).append(main_cpu / cpu)
                    generator.setdefault(key, []).append(loader / elapsed)
                    if workers == 2:  # the two busiest processes are the workers
                        busier.setdefault(name, []).append(used[-1] / (used[-1] + used[-2]))
    rows = []
    for name in CALLS:
        for workers in (1, 2):
            rows.append(
                [
                    f"{name}, {workers} worker{'s' if workers > 1 else ''}",
                    f"{median(rates[(name, workers)]):,.0f}",
                    f"{1000 / median(per_cpu[(name, workers)]):.3f}",
                    f"{median(per_cpu[(name, workers)]):,.0f}",
                    f"{median(cores[(name, workers)]):.2f}",
                    f"{100 * median(main_share[(name, workers)]):.0f} %",
                    f"{median(generator[(name, workers)]):.2f}",
                ]
            )
    headers = ["calls", "calls/s", "server CPU ms/call", "calls per CPU-second"]
    headers += ["server cores", "main threads' share", "h2load cores"]
    print_table(headers, rows)
    for name in CALLS:
        derived = 8 * median(per_cpu[(name, 2)])
        print(f"{name}: derived for 8 workers on 8 cores: {derived:,.0f} calls/s")
        share = 100 * median(busier[name])
        print(f"{name}: with 2 workers the busier took {share:.0f} % of their CPU")
        free = (os.cpu_count() or 1) - median(generator[(name, 2)])
        print(
            f"{name}: 2 ÷ 1 can reach at most {free / median(cores[(name, 1)]):.2f} here "
            f"({free:.2f} cores left by h2load ÷ {median(cores[(name, 1)]):.2f} used by one worker)"
        )
    lines = [
        (
            "workers",
            "BuildMessages",
            median(rates[("BuildMessages", 2)]) / median(rates[("BuildMessages", 1)]),
            1.7,
        ),
        (
            "workers_derived_8",
            "BuildMessages",
            median(per_cpu[("BuildMessages", 2)]) / median(per_cpu[("BuildMessages", 1)]),
            0.9,
        ),
        (
            "workers_turns",
            "StreamChat",
            median(rates[("StreamChat", 2)]) / median(rates[("StreamChat", 1)]),
            1.7,
        ),
        (
            "workers_turns_derived_8",
            "StreamChat",
            median(per_cpu[("StreamChat", 2)]) / median(per_cpu[("StreamChat", 1)]),
            0.9,
        ),
    ]
    for label, _, ratio, target in lines:
        print(result(label, ratio, target, ratio >= target))
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    parser.add_argument("--database-url", default="", help="PostgreSQL instead of SQLite")
    sys.exit(run(parser.parse_args()))


if __name__ == "__main__":
    main()
