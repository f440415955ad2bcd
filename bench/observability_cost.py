"""What metrics and tracing together cost BuildMessages: throughput with both on ÷ both off.

Two server children run side by side (this script with ``--serve``): one with neither,
one with ``--metrics-port`` on a free port and tracing on through ``OTEL_*`` (every call
sampled unless ``--sample RATIO`` says otherwise, exported over OTLP/HTTP to a local
sink in this process that reads and discards each batch). The client sends the same
serialized BuildMessagesRequest as build_vs_echo.py to both, in alternating rounds (off,
on, off, ...) after a warm-up, so every sampled on-side call pays for its server span,
its build span and their export, and every call for the metrics. With every call
sampled, the sink must have received spans. The result is the
median over round pairs of ``calls/s with both ÷ calls/s without``; the target is ≥ 0.9.

``--instructions`` counts instead of timing, which the machine's load barely moves: each
side runs under ``valgrind --tool=callgrind`` with counting off; after a warm-up (and the
batch processor's delay, so that the warm-up's spans are out) counting is turned on for
``--calls`` calls made one at a time, and stays on until the batch processor has exported
them (its delay again), so that their encoding and export are counted too. Sides
alternate for ``--rounds`` pairs; the result is the median of ``instructions per call
off ÷ on``, the throughput ratio a CPU-bound server would show. Needs valgrind.
Run: ``python bench/observability_cost.py [--quick] [--instructions]``.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import grpc
from _common import free_port, machine_note, median, print_table, result_line
from _server import serve, spawn_server
from build_vs_echo import (
    BUILD_METHOD,
    build_request,
    builds_off_and_on,
    cost_parser,
    report_cost,
    set_counts,
)

NAME = "observability_cost"
INSTRUCTIONS_NAME = "observability_instructions"
TARGET = 0.9
# The batch processor's default delay (OTEL_BSP_SCHEDULE_DELAY), and a margin.
EXPORT_WAIT = 5 + 2


class _Sink(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that reads every export and keeps only its size."""

    received = 0

    def do_POST(self) -> None:
        _Sink.received += len(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def _start_sink() -> tuple[http.server.ThreadingHTTPServer, str]:
    sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    return sink, f"http://127.0.0.1:{sink.server_address[1]}"


def _on_args(endpoint: str, sample: float) -> tuple[str, ...]:
    return ("--metrics-port", str(free_port()), "--otlp", endpoint, "--sample", str(sample))


async def run(args: argparse.Namespace) -> int:
    payload = build_request().SerializeToString()
    print(machine_note(), flush=True)
    sink, endpoint = _start_sink()
    off_server = spawn_server(__file__, args.log_level)
    on_server = spawn_server(__file__, args.log_level, *_on_args(endpoint, args.sample))
    sampled = "every call" if args.sample >= 1 else f"{args.sample:g} of calls"
    names = ("both off", f"metrics+tracing on ({sampled} sampled)")
    try:
        off, on = await builds_off_and_on((off_server, on_server), names, payload, args)
    finally:
        off_server.stop()
        on_server.stop()  # the spans still waiting are exported as it stops
        sink.shutdown()
    if args.sample >= 1 and not _Sink.received:
        raise SystemExit("the OTLP sink received no spans")
    report_cost(NAME, payload, args, off, on, TARGET)
    return 0


def _same(data: bytes) -> bytes:
    return data


def _instructions_per_call(
    on_args: tuple[str, ...], args: argparse.Namespace, work: Path, warmup: int
) -> float:
    """One side under callgrind: instructions of all its threads per counted call."""
    out = work / "callgrind.out"
    out.unlink(missing_ok=True)
    command = [
        *("valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"),
        *(sys.executable, __file__, "--serve", "--log-level", args.log_level, *on_args),
    ]
    child = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    counting = ["callgrind_control", "-i"]
    try:
        port = int(child.stdout.readline().split()[1])
        payload = build_request().SerializeToString()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary(BUILD_METHOD, _same, _same)
            for _ in range(warmup):
                call(payload)
            time.sleep(EXPORT_WAIT)
            subprocess.run([*counting, "on", str(child.pid)], check=True, capture_output=True)
            for _ in range(args.calls):
                call(payload)
            time.sleep(EXPORT_WAIT)
            subprocess.run([*counting, "off", str(child.pid)], check=True, capture_output=True)
    finally:
        child.stdin.close()
        child.wait(300)
    found = re.search(r"^totals: (\d+)", out.read_text(), re.MULTILINE)
    if found is None:
        raise SystemExit(f"no instruction total in {out}")
    calls: int = args.calls
    return int(found.group(1)) / calls


def count_instructions(args: argparse.Namespace) -> int:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("--instructions needs valgrind (Debian: apt-get install valgrind)")
    rounds = args.rounds or (1 if args.quick else 3)
    args.calls = args.calls or (200 if args.quick else 1000)
    warmup = 100 if args.quick else 300
    print(machine_note(), flush=True)
    sink, endpoint = _start_sink()
    rows, ratios = [], []
    try:
        with tempfile.TemporaryDirectory(prefix="contextd-bench-") as tmp:
            for n in range(rounds):
                off = _instructions_per_call((), args, Path(tmp), warmup)
                on = _instructions_per_call(
                    _on_args(endpoint, args.sample), args, Path(tmp), warmup
                )
                ratios.append(off / on)
                rows.append(
                    [str(n + 1), f"{off:,.0f}", f"{on:,.0f}", f"{on - off:,.0f}", f"{off / on:.3f}"]
                )
                print(f"pair {n + 1}: off {off:,.0f}, on {on:,.0f} instructions a call", flush=True)
    finally:
        sink.shutdown()
    if args.sample >= 1 and not _Sink.received:
        raise SystemExit("the OTLP sink received no spans")
    print_table(["pair", "off Ir/call", "on Ir/call", "difference", "off ÷ on"], rows)
    ratio = median(ratios)
    print(result_line(INSTRUCTIONS_NAME, ratio, TARGET, ratio >= TARGET))
    return 0


async def _serve_traced(args: argparse.Namespace) -> None:
    from contextd.tracing.setup import install_from_env

    if args.otlp:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = args.otlp
    if args.sample < 1:
        # What a busy server would run: the caller's decision if it made one, else a ratio.
        os.environ["OTEL_TRACES_SAMPLER"] = "parentbased_traceidratio"
        os.environ["OTEL_TRACES_SAMPLER_ARG"] = str(args.sample)
    tracing = install_from_env()
    try:
        await serve(args.log_level, [], metrics_port=args.metrics_port)
    finally:
        if tracing is not None:
            tracing.shutdown()


def main() -> int:
    parser = cost_parser(__doc__)
    parser.add_argument("--metrics-port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--otlp", default="", help=argparse.SUPPRESS)
    parser.add_argument(
        "--sample",
        type=float,
        default=1.0,
        help="share of calls the traced server samples (default 1: every call)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions per call under callgrind instead of timing (needs valgrind)",
    )
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve_traced(args))
        return 0
    if args.instructions:
        return count_instructions(args)
    set_counts(args)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
