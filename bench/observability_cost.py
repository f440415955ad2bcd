"""What metrics and tracing together cost BuildMessages: throughput with both on ÷ both off.

Two server children run side by side (this script with ``--serve``): one with neither,
one with ``--metrics-port`` on a free port and tracing on through ``OTEL_*`` (every call
sampled unless ``--sample RATIO`` says otherwise, exported over OTLP/HTTP to a local
sink in this process that reads and discards each batch). The client sends the same
serialized BuildMessagesRequest as build_vs_echo.py to both, in alternating rounds (off,
on, off, ...) after a warm-up, so every sampled on-side call pays for its server span,
its build span and their export, and every call for the metrics. With every call
sampled, the sink must have received spans. The result is the
median over round pairs of ``calls/s with both ÷ calls/s without``; the target is ≥ 0.95.
Run: ``python bench/observability_cost.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import os
import sys
import threading

from _common import free_port, machine_note
from _server import serve, spawn_server
from build_vs_echo import build_request, builds_off_and_on, cost_parser, report_cost, set_counts

NAME = "observability_cost"
TARGET = 0.95


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


async def run(args: argparse.Namespace) -> int:
    payload = build_request().SerializeToString()
    print(machine_note(), flush=True)
    sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{sink.server_address[1]}"
    off_server = spawn_server(__file__, args.log_level)
    on_server = spawn_server(
        __file__,
        args.log_level,
        *("--metrics-port", str(free_port()), "--otlp", endpoint, "--sample", str(args.sample)),
    )
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
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve_traced(args))
        return 0
    set_counts(args)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
