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

import grpc.aio
from _common import machine_note
from _server import serve, spawn_server
from build_vs_echo import BUILD_METHOD, Side, alternating_rounds, build_request, report_cost
from metrics_cost import _free_port, _same

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
        *("--metrics-port", str(_free_port()), "--otlp", endpoint, "--sample", str(args.sample)),
    )
    try:
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{off_server.port}") as off_channel,
            grpc.aio.insecure_channel(f"127.0.0.1:{on_server.port}") as on_channel,
        ):
            plain = off_channel.unary_unary(BUILD_METHOD, _same, _same)
            observed = on_channel.unary_unary(BUILD_METHOD, _same, _same)
            if await plain(payload) != await observed(payload):
                raise SystemExit("BuildMessages answered differently with metrics and tracing on")
            off = Side("both off", plain)
            sampled = "every call" if args.sample >= 1 else f"{args.sample:g} of calls"
            on = Side(f"metrics+tracing on ({sampled} sampled)", observed)
            pairs = ((off, off_server), (on, on_server))
            await alternating_rounds(pairs, payload, args.warmup, args.rounds, args.calls)
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--metrics-port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--otlp", default="", help=argparse.SUPPRESS)
    parser.add_argument(
        "--sample",
        type=float,
        default=1.0,
        help="share of calls the traced server samples (default 1: every call)",
    )
    parser.add_argument(
        "--log-level", default="INFO", help="server log level, or OFF (default INFO, as served)"
    )
    parser.add_argument("--rounds", type=int, help="rounds per side (default 10, quick 2)")
    parser.add_argument("--calls", type=int, help="calls per round (default 2000, quick 400)")
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve_traced(args))
        return 0
    args.rounds = args.rounds or (2 if args.quick else 10)
    args.calls = args.calls or (400 if args.quick else 2000)
    args.warmup = 200 if args.quick else 2000
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
