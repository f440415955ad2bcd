"""What ``--metrics-port`` costs BuildMessages: throughput with metrics on ÷ off.

Two server children run side by side (this script with ``--serve``): one without a
metrics port, one with ``--metrics-port`` on a free port. The client sends the same
serialized BuildMessagesRequest as build_vs_echo.py to both, in alternating rounds
(off, on, off, ...) after a warm-up, so every on-side call pays all that the metrics
add to it: the gRPC counters and histogram, the build's kept and dropped figures. At the
end the on side's ``/metrics`` is scraped once, to check it counted the calls. The
result is the median over round pairs of ``calls/s with metrics ÷ calls/s without``;
the target is ≥ 0.95 (metrics cost ≤ 5 %).
Run: ``python bench/metrics_cost.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import urllib.request

from _common import free_port, machine_note
from _server import serve, spawn_server
from build_vs_echo import build_request, builds_off_and_on, cost_parser, report_cost, set_counts

NAME = "metrics_cost"
TARGET = 0.95


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text: str = reply.read().decode()
        return text


async def run(args: argparse.Namespace) -> int:
    payload = build_request().SerializeToString()
    print(machine_note(), flush=True)
    metrics_port = free_port()
    off_server = spawn_server(__file__, args.log_level)
    on_server = spawn_server(__file__, args.log_level, "--metrics-port", str(metrics_port))
    try:
        servers = (off_server, on_server)
        names = ("metrics off", "metrics on")
        off, on = await builds_off_and_on(servers, names, payload, args)
        scraped = await asyncio.to_thread(_scrape, metrics_port)
    finally:
        off_server.stop()
        on_server.stop()
    if 'grpc_method="BuildMessages"' not in scraped:
        raise SystemExit("the metrics port did not count BuildMessages")

    report_cost(NAME, payload, args, off, on, TARGET)
    return 0


def main() -> int:
    parser = cost_parser(__doc__)
    parser.add_argument("--metrics-port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.log_level, [], metrics_port=args.metrics_port))
        return 0
    set_counts(args)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
