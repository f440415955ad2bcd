"""What ``--auth api-key`` costs BuildMessages: throughput with a key ÷ without auth.

Two server children run side by side (this script with ``--serve``): one with
``--auth none``, one with ``--auth api-key`` and a key made at its start. The client
sends the same serialized BuildMessagesRequest as build_vs_echo.py to both, in
alternating rounds (off, on, off, ...) after a warm-up; the on-side calls carry
``authorization: Bearer <key>``, so every call pays the whole check: reading the
metadata, the key's row from SQLite, the hash, the identity handed to the servicer,
and the longer log line. The result is the median over round pairs of
``calls/s with auth ÷ calls/s without``; the target is ≥ 0.95 (auth costs ≤ 5 %).
Run: ``python bench/auth_cost.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import grpc.aio
from _common import machine_note
from _server import serve, spawn_server
from build_vs_echo import BUILD_METHOD, Side, alternating_rounds, build_request, report_cost

if TYPE_CHECKING:
    from contextd.server import RunningServer

NAME = "auth_cost"
TARGET = 0.95


def _same(data: bytes) -> bytes:
    return data


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def _read(path: Path) -> str:
    return path.read_text()


async def _serve(args: argparse.Namespace) -> None:
    if not args.key_file:
        await serve(args.log_level, [])
        return
    from contextd.store.api_keys import ApiKeyRepo

    async def make_key(running: RunningServer) -> None:
        _, parts = await ApiKeyRepo(running.db).create("bench-user", name="bench")
        _write(Path(args.key_file), parts.token)

    await serve(args.log_level, [], setup=make_key, auth="api-key")


async def run(args: argparse.Namespace) -> int:
    payload = build_request().SerializeToString()
    print(machine_note(), flush=True)
    with tempfile.TemporaryDirectory(prefix="contextd-bench-") as tmp:
        key_file = Path(tmp) / "key"
        off_server = spawn_server(__file__, args.log_level)
        on_server = spawn_server(__file__, args.log_level, "--key-file", str(key_file))
        metadata = (("authorization", f"Bearer {_read(key_file)}"),)
        try:
            async with (
                grpc.aio.insecure_channel(f"127.0.0.1:{off_server.port}") as off_channel,
                grpc.aio.insecure_channel(f"127.0.0.1:{on_server.port}") as on_channel,
            ):
                plain = off_channel.unary_unary(BUILD_METHOD, _same, _same)
                keyed = on_channel.unary_unary(BUILD_METHOD, _same, _same)

                async def with_key(data: bytes) -> bytes:
                    reply: bytes = await keyed(data, metadata=metadata)
                    return reply

                # Both sides must answer the same before anything is timed.
                if await plain(payload) != await with_key(payload):
                    raise SystemExit("BuildMessages answered differently with auth on")
                off = Side("auth none", plain)
                on = Side("auth api-key", with_key)
                pairs = ((off, off_server), (on, on_server))
                await alternating_rounds(pairs, payload, args.warmup, args.rounds, args.calls)
        finally:
            off_server.stop()
            on_server.stop()

    report_cost(NAME, payload, args, off, on, TARGET)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--key-file", help=argparse.SUPPRESS)
    parser.add_argument(
        "--log-level", default="INFO", help="server log level, or OFF (default INFO, as served)"
    )
    parser.add_argument("--rounds", type=int, help="rounds per side (default 10, quick 2)")
    parser.add_argument("--calls", type=int, help="calls per round (default 2000, quick 400)")
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args))
        return 0
    args.rounds = args.rounds or (2 if args.quick else 10)
    args.calls = args.calls or (400 if args.quick else 2000)
    args.warmup = 200 if args.quick else 2000
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
