"""An MCP tool call's latency against the same call on the native gRPC port.

Two processes: this client and contextd (``python -m contextd serve --mcp-port 0``,
``--auth none``, log level INFO). The user has ``--memories`` memories (added over gRPC
first). Two sides, alternating by rounds, calls one at a time:

- gRPC: ``MemoryService/SearchMemories`` (limit 10) on a ``grpc.aio`` channel;
- MCP: the ``search_memories`` tool (limit 10) with the official ``mcp`` SDK's client over
  streamable HTTP (the tool makes that same native call), in the stateless 2026-07-28
  form (``--mode 2026-07-28``, the default: each call a request of its own) or with the
  initialize handshake (``--mode legacy``: one MCP session, 2025-11-25).

Both sides must return the same memories in the same order. Each call is timed from just
before it is sent to its answer in hand (``time.perf_counter``). **RESULT ratio = MCP
p50 ÷ gRPC p50** (target none: the figure says what the translation costs). Run:
``python bench/mcp_tool_call.py [--quick] [--mode legacy]``.
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
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc.aio
from _common import SHORT_HISTORY, machine_note, median, print_table
from contextd.v1 import memory_pb2 as mpb
from contextd.v1 import memory_pb2_grpc
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

NAME = "mcp_tool_call"
USER = "bench-user"
QUERY = "measure the server under load"


def spawn_contextd(data_dir: Path) -> tuple[subprocess.Popen[str], str, str]:
    """contextd with the MCP port on; its native address and the MCP URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTD_")}
    command = [sys.executable, "-m", "contextd", "serve", "--port", "0", "--mcp-port", "0"]
    process = subprocess.Popen(
        [*command, "--data-dir", str(data_dir), "--log-level", "INFO"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert process.stderr is not None
    url = ""
    for line in process.stderr:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("msg") == "mcp listening":
            url = f"http://{entry['address']}{entry['path']}"
        if entry.get("msg") == "listening":
            native = str(entry["address"])
            break
    else:
        raise RuntimeError("contextd exited before listening")
    threading.Thread(target=process.stderr.read, daemon=True).start()
    return process, native, url


async def seed(stub: memory_pb2_grpc.MemoryServiceStub, count: int) -> None:
    """``count`` distinct memories of the user, from the benchmark's chat texts."""
    texts = [text for _, text in SHORT_HISTORY]
    for k in range(count):
        content = f"Note {k}: {texts[k % len(texts)]}"
        await stub.AddMemory(mpb.AddMemoryRequest(user_id=USER, content=content))


async def measure(args: argparse.Namespace, native: str, url: str) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {"gRPC SearchMemories": [], "MCP search_memories": []}
    http = create_mcp_http_client(headers={"X-Contextd-User": USER})
    async with (
        grpc.aio.insecure_channel(native) as channel,
        http,
        Client(streamable_http_client(url, http_client=http), mode=args.mode) as client,
    ):
        print(f"MCP protocol version {client.protocol_version}", flush=True)
        stub = memory_pb2_grpc.MemoryServiceStub(channel)
        await seed(stub, args.memories)
        request = mpb.SearchMemoriesRequest(user_id=USER, query=QUERY, limit=10)

        async def grpc_call() -> list[str]:
            reply = await stub.SearchMemories(request)
            return [r.memory.id for r in reply.results]

        async def mcp_call() -> list[str]:
            result = await client.call_tool("search_memories", {"query": QUERY, "limit": 10})
            assert result.structured_content is not None, result.content
            return [m["id"] for m in result.structured_content["memories"]]

        expected = await grpc_call()
        if not expected or await mcp_call() != expected:
            raise SystemExit("the two sides do not return the same memories")
        sides: list[tuple[str, Callable[[], Awaitable[list[str]]]]] = [
            ("gRPC SearchMemories", grpc_call),
            ("MCP search_memories", mcp_call),
        ]
        for _name, side_call in sides:  # warm-up
            for _ in range(args.warmup):
                await side_call()
        for r in range(args.rounds):
            for name, side_call in sides if r % 2 == 0 else sides[::-1]:
                for _ in range(args.calls):
                    t0 = time.perf_counter()
                    found = await side_call()
                    timings[name].append((time.perf_counter() - t0) * 1000)
                    if found != expected:
                        raise SystemExit(f"{name} returned other memories")
    return timings


async def run(args: argparse.Namespace) -> int:
    print(machine_note(), flush=True)
    with tempfile.TemporaryDirectory(prefix="contextd-bench-") as tmp:
        process, native, url = spawn_contextd(Path(tmp))
        try:
            timings = await measure(args, native, url)
        finally:
            process.terminate()
            process.wait(15)
    print(
        f"{NAME}: {args.rounds} alternating rounds of {args.calls} sequential calls per side; "
        f"{args.memories} memories, top 10; contextd log level INFO, --auth none; "
        f"MCP --mode {args.mode}"
    )
    rows = [
        [
            name,
            str(len(values)),
            f"{median(values):.2f}",
            f"{sorted(values)[int(0.95 * (len(values) - 1))]:.2f}",
        ]
        for name, values in timings.items()
    ]
    print_table(["side", "calls", "p50 ms", "p95 ms"], rows)
    grpc_p50 = median(timings["gRPC SearchMemories"])
    mcp_p50 = median(timings["MCP search_memories"])
    print(f"MCP adds {mcp_p50 - grpc_p50:.2f} ms a call (p50) to the native call it makes")
    print(f"RESULT {NAME} ratio={mcp_p50 / grpc_p50:.2f} target=none PASS")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--rounds", type=int, help="rounds per side (default 10, quick 2)")
    parser.add_argument("--calls", type=int, help="calls per round (default 100, quick 10)")
    parser.add_argument("--memories", type=int, help="the user's memories (default 1000)")
    parser.add_argument(
        "--mode",
        choices=["2026-07-28", "legacy"],
        default="2026-07-28",
        help="the MCP client's protocol: stateless 2026-07-28, or the handshake (legacy)",
    )
    args = parser.parse_args()
    args.rounds = args.rounds or (2 if args.quick else 10)
    args.calls = args.calls or (10 if args.quick else 100)
    args.memories = args.memories or (100 if args.quick else 1000)
    args.warmup = 5 if args.quick else 50
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
