"""What a worker costs in memory: ``contextd serve`` idle as one process and with
``--workers 4``; besides (not with ``--quick``) ``--workers 2``, ``--workers 2`` with
``--metrics-port`` (whose gatherer is one more process), and one process and 4 workers
of a server that calls an OpenAI-compatible model and serves MCP (two more SDKs).

Each server is started (SQLite, a fresh data directory, no setting beyond the flags, so
the default local embedding model is not loaded: nothing used memory), left idle two
seconds, and each of its processes read from ``/proc/PID/smaps_rollup``: the
proportional set size (PSS: a page shared by k processes counts 1/k in each, so the sum
over the processes is what the server takes from the machine) and what is its own
(private pages). Then (not with ``--quick``), in fresh interpreters, what the packages
an idle server might import cost (resident MB of importing each alone) and which of them
it loads.

With ``--baseline-src DIR`` the same servers also run the server code under ``DIR`` (an
older tree's ``server/``): before and after in one run.

Target: each worker past the first adds at most 15 MB (PSS), and 4 workers take at
most 0.45 of what 4 separate servers take. RESULT ratio: the total PSS of
``--workers 4`` ÷ 4 times that of one process.

    .venv/bin/python bench/worker_memory.py [--rounds 3] [--baseline-src DIR] [--quick]
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
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import grpc
from _common import free_port, machine_note, median, print_table, result_line
from build_vs_echo import build_request
from contextd.v1 import context_pb2_grpc

PER_WORKER_TARGET = 15.0  # MB each worker past the first adds
RATIO_TARGET = 0.45  # --workers 4 against 4 separate servers
IDLE_SECONDS = 2.0
CALLS, CONNECTIONS = 2000, 8
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
# Packages worth knowing the weight of, in the order an idle server would load them.
PACKAGES = (
    "grpc",
    "aiohttp",
    "prometheus_client",
    "opentelemetry.sdk.trace",
    "numpy",
    "tiktoken",
    "cryptography.hazmat.primitives.ciphers",
    "jwt",
    "asyncpg",
    "openai",
    "anthropic",
    "mcp",
)


@dataclass
class Process:
    role: str
    pss: float  # MB
    private: float  # MB
    rss: float  # MB


def smaps(pid: int) -> dict[str, float]:
    """smaps_rollup's figures in MB."""
    found = {}
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
        for line in rollup:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                found[parts[0].rstrip(":")] = int(parts[1]) / 1024
    return found


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return sorted(found)


def measure(process: subprocess.Popen[str], roles: dict[int, str]) -> list[Process]:
    found = []
    for pid in [process.pid, *children(process.pid)]:
        figures = smaps(pid)
        private = figures["Private_Clean"] + figures["Private_Dirty"]
        role = "parent" if pid == process.pid and roles else roles.get(pid, "server")
        found.append(Process(role, figures["Pss"], private, figures["Rss"]))
    return found


def serve(flags: list[str], env: dict[str, str]) -> tuple[list[Process], list[Process]]:
    """Start ``contextd serve`` with ``flags``, wait until it serves and IDLE_SECONDS
    more, measure each process; again after CALLS calls over several connections; stop
    it."""
    ready = "workers serving" if "--workers" in flags else "listening"
    with tempfile.TemporaryDirectory() as data_dir:
        command = [sys.executable, "-m", "contextd", "serve", "--port", "0"]
        command += ["--data-dir", data_dir, *flags]
        process = subprocess.Popen(
            command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
        )
        roles: dict[int, str] = {}
        addresses: list[str] = []
        serving = threading.Event()

        def pump() -> None:
            assert process.stderr is not None
            for raw in process.stderr:
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if "worker" in line and "pid" in line and line.get("msg", "").endswith("listening"):
                    worker = line["worker"]
                    roles[int(line["pid"])] = (
                        "metrics" if worker == "metrics" else f"worker {worker}"
                    )
                if line.get("msg") == "listening":
                    addresses.append(str(line["address"]))
                if line.get("msg") == ready:
                    serving.set()
            serving.set()

        threading.Thread(target=pump, daemon=True).start()
        try:
            if not serving.wait(120) or process.poll() is not None:
                raise SystemExit(f"the server did not start: {command}")
            time.sleep(IDLE_SECONDS)
            idle = measure(process, roles)
            address = next(a for a in addresses if a)
            asyncio.run(calls(address))
            time.sleep(IDLE_SECONDS)
            return idle, measure(process, roles)
        finally:
            process.terminate()
            process.wait(60)


async def calls(address: str) -> None:
    """CALLS BuildMessages calls, on CONNECTIONS connections of their own at once."""
    request = build_request()

    async def one_connection(count: int) -> None:
        async with grpc.aio.insecure_channel(address, options=OWN_CONNECTION) as channel:
            stub = context_pb2_grpc.ContextServiceStub(channel)
            for _ in range(count):
                await stub.BuildMessages(request)

    await asyncio.gather(*(one_connection(CALLS // CONNECTIONS) for _ in range(CONNECTIONS)))


IMPORTS = """
import json, sys
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
before = rss()
if sys.argv[1] == "-":
    from contextd.root import server, workers
    print(json.dumps([rss() - before, sorted(sys.modules)]))
else:
    __import__(sys.argv[1])
    print(json.dumps([rss() - before, []]))
"""


def imports(env: dict[str, str]) -> tuple[float, set[str], dict[str, float]]:
    """RSS of the serve path's imports, the modules they load, and each package's RSS
    imported alone."""

    def run(name: str) -> tuple[float, list[str]]:
        out = subprocess.run(
            [sys.executable, "-c", IMPORTS, name], capture_output=True, text=True, env=env
        )
        if out.returncode != 0:
            return float("nan"), []
        mb, modules = json.loads(out.stdout)
        return float(mb), modules

    total, modules = run("-")
    return total, set(modules), {name: run(name)[0] for name in PACKAGES}


SHAPES = {
    "1 process": [],
    "--workers 4": ["--workers", "4"],
}
MORE_SHAPES = {
    "--workers 2": ["--workers", "2"],
    # The gatherer of the metrics port is one more process ("" is a free port).
    "--workers 2 --metrics-port": ["--workers", "2", "--metrics-port", ""],
    # A server that calls an OpenAI-compatible model and serves MCP: two more SDKs.
    "1 process, openai, MCP": ["--provider", "openai", "--mcp-port", "0"],
    "--workers 4, openai, MCP": ["--workers", "4", "--provider", "openai", "--mcp-port", "0"],
}


Totals = dict[tuple[str, str, str], list[float]]  # (tree, shape, state): PSS MB per round
STATES = ("idle", f"after {CALLS} calls")


def added_per_worker(totals: Totals, tree: str, kind: str, state: str) -> float:
    """MB each worker past the first adds: (4 workers - 1 process) / 3."""
    one = median(totals[(tree, f"1 process{kind}", state)])
    return (median(totals[(tree, f"--workers 4{kind}", state)]) - one) / 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round, no import table")
    parser.add_argument("--baseline-src", default=None, help="older server code (PYTHONPATH)")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    print(machine_note())
    trees = {"now": {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}}
    if args.baseline_src:
        trees["before"] = {**trees["now"], "PYTHONPATH": args.baseline_src}
    shapes = SHAPES if args.quick else {**SHAPES, **MORE_SHAPES}
    totals: Totals = {}
    detail: dict[tuple[str, str], list[Process]] = {}
    for _ in range(rounds):
        for tree, env in trees.items():
            for shape, flags in shapes.items():
                if tree == "before" and "--metrics-port" in flags:
                    continue  # refused with workers before
                measured = serve([f or str(free_port()) for f in flags], env)
                for state, processes in zip(STATES, measured, strict=True):
                    pss = sum(p.pss for p in processes)
                    totals.setdefault((tree, shape, state), []).append(pss)
                detail[(tree, shape)] = measured[0]
    rows = [
        [
            tree,
            shape,
            *(f"{median(totals[(tree, shape, state)]):.1f}" for state in STATES),
            ", ".join(f"{p.role} {p.pss:.0f} ({p.private:.0f} own)" for p in processes),
        ]
        for (tree, shape), processes in sorted(detail.items())
    ]
    headers = ["tree", "server", *(f"PSS MB {state}" for state in STATES)]
    print_table([*headers, "each process idle: PSS (own), last round"], rows)
    for tree in trees:
        for kind in ("", ", openai, MCP") if not args.quick else ("",):
            added = [added_per_worker(totals, tree, kind, state) for state in STATES]
            print(
                f"{tree}{kind}: each worker past the first adds {added[0]:.1f} MB idle, "
                f"{added[1]:.1f} MB {STATES[1]}"
            )
    if not args.quick:
        plain = median(totals[("now", "--workers 2", "idle")])
        gathering = median(totals[("now", "--workers 2 --metrics-port", "idle")]) - plain
        print(f"the gatherer of --metrics-port: {gathering:.1f} MB")
    if not args.quick:
        for tree, env in trees.items():
            total, modules, alone = imports(env)
            print(f"\n{tree}: the serve path's imports {total:.1f} MB resident")
            rows = [
                [name, f"{mb:.1f}", "yes" if name in modules else "no"]
                for name, mb in alone.items()
            ]
            print_table(["package", "MB imported alone", "loaded by an idle server"], rows)
    per_worker = added_per_worker(totals, "now", "", "idle")
    one, four = (median(totals[("now", shape, "idle")]) for shape in SHAPES)
    ratio = four / (4 * one)
    print(f"each extra worker {per_worker:.1f} MB (target ≤ {PER_WORKER_TARGET:g})")
    passed = ratio <= RATIO_TARGET and per_worker <= PER_WORKER_TARGET
    print(result_line("worker_memory", ratio, RATIO_TARGET, passed))


if __name__ == "__main__":
    main()
