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

from _common import machine_note
from _server import serve, spawn_server
from build_vs_echo import build_request, builds_off_and_on, cost_parser, report_cost, set_counts

if TYPE_CHECKING:
    from contextd.root.server import RunningServer

NAME = "auth_cost"
TARGET = 0.95


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
        servers = (off_server, on_server)
        try:
            off, on = await builds_off_and_on(
                servers, ("auth none", "auth api-key"), payload, args, metadata
            )
        finally:
            off_server.stop()
            on_server.stop()

    report_cost(NAME, payload, args, off, on, TARGET)
    return 0


def main() -> int:
    parser = cost_parser(__doc__)
    parser.add_argument("--key-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args))
        return 0
    set_counts(args)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
