"""A short chat turn and a BuildMessages call, counted in instructions.

Timings on a shared machine move by more than a few per cent; instruction counts barely
do. One server child (contextd's ``start()``, the ``echo`` provider, SQLite, INFO logs,
plus the bench handlers of build_vs_echo.py and stream_vs_grpc.py) runs under
``valgrind --tool=callgrind`` with counting off. For each side the client turns counting
on (``callgrind_control``), makes its calls one at a time, waits until the server is idle
(a turn's background work included), turns counting off and dumps the count:

- ``Echo`` and ``BuildMessages``: the 20-message request of build_vs_echo.py;
- ``bare stream``: the bare server-streaming call of stream_vs_grpc.py asked for the
  sizes of a short turn (13 messages);
- ``StreamChat``: short turns (the 15-word message, 13 events), in conversations of 25
  turns as stream_vs_grpc.py holds them, after a first conversation uncounted.

The RESULT is the instructions of a short turn ÷ those of the bare 13-message call (the
floor a turn cannot go under; reported, no target). Needs valgrind.
Run: ``python bench/turn_instructions.py [--quick]``.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterable, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
from _common import USER_MESSAGE, machine_note, print_table
from _server import ServerChild, serve
from build_vs_echo import BUILD_METHOD, ECHO_METHOD, build_request, echo_handler
from contextd.v1 import chat_pb2 as cpb
from stream_vs_grpc import (
    CHAT_METHOD,
    STREAM_METHOD,
    chat_request,
    check_completed,
    stream_handler,
)

NAME = "turn_instructions"
PER_SESSION = 25


def _same(data: bytes) -> bytes:
    return data


def spawn_counted(work: Path, log_level: str) -> ServerChild:
    command = [
        *("valgrind", "--tool=callgrind", "--instr-atstart=no"),
        f"--callgrind-out-file={work / 'callgrind.out'}",
        *(sys.executable, __file__, "--serve", "--log-level", log_level),
    ]
    child = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line.startswith("PORT "):
        child.kill()
        raise SystemExit("the server child did not start under valgrind")
    return ServerChild(child, int(line.split()[1]))


def _control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, capture_output=True)


async def counted(
    server: ServerChild, work: Path, label: str, calls: int, one: Callable[[], Awaitable[None]]
) -> float:
    """Instructions per call of ``calls`` calls of ``one``, background work included."""
    pid = server.process.pid
    before = _dumps(work)
    _control(pid, "-z")
    _control(pid, "-i", "on")
    for _ in range(calls):
        await one()
    await server.quiet()
    _control(pid, "-i", "off")
    return _dumped_total(pid, work, label, before) / calls


def _dumps(work: Path) -> set[Path]:
    return set(work.glob("callgrind.out*"))


def _dumped_total(pid: int, work: Path, label: str, before: set[Path]) -> int:
    """Dump the count so far and read its total (the client waits: nothing is in flight)."""
    _control(pid, f"--dump={label}")
    deadline = time.monotonic() + 60
    while not (new := _dumps(work) - before):
        if time.monotonic() > deadline:
            raise SystemExit("callgrind wrote no dump")
        time.sleep(0.2)
    time.sleep(0.5)  # the dump is written
    text = "".join(p.read_text() for p in new)
    found = re.search(r"^totals: (\d+)", text, re.MULTILINE)
    if found is None:
        raise SystemExit(f"no instruction total in {new}")
    return int(found.group(1))


async def run(args: argparse.Namespace) -> int:
    print(machine_note(), flush=True)
    build = build_request().SerializeToString()
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="contextd-bench-") as tmp:
        work = Path(args.keep or tmp)
        server = spawn_counted(work, args.log_level)
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                unary = channel.unary_unary
                echo = unary(ECHO_METHOD, _same, _same)
                builds = unary(BUILD_METHOD, _same, _same)
                chat: Callable[[bytes], AsyncIterable[bytes]] = channel.unary_stream(
                    CHAT_METHOD, _same, _same
                )
                bare = channel.unary_stream(STREAM_METHOD, _same, _same)
                session_id = ""
                turns = 0

                async def turn() -> None:
                    nonlocal session_id, turns
                    if turns % PER_SESSION == 0:
                        session_id = ""
                    request = chat_request(session_id, "bench-user", 0, USER_MESSAGE)
                    messages = [m async for m in chat(request)]
                    check_completed(messages[-1])
                    started = cpb.StreamChatResponse.FromString(messages[0]).turn_started
                    session_id = started.session_id
                    turns += 1
                    sizes[:] = [len(m) for m in messages]

                sizes: list[int] = []
                for _ in range(PER_SESSION):  # warm-up: a whole conversation
                    await turn()
                sizes_request = array.array("I", sizes).tobytes()

                async def stream() -> None:
                    async for _ in bare(sizes_request):
                        pass

                async def call_echo() -> None:
                    await echo(build)

                async def call_build() -> None:
                    await builds(build)

                for side, call in (
                    ("Echo", call_echo),
                    ("BuildMessages", call_build),
                    ("bare stream", stream),
                ):
                    for _ in range(args.warmup):
                        await call()
                    per_call = await counted(server, work, side, args.calls, call)
                    rows.append([side, f"{per_call:,.0f}"])
                    print(f"{side}: {per_call:,.0f} instructions a call", flush=True)
                per_turn = await counted(server, work, "StreamChat", args.turns, turn)
                rows.append([f"StreamChat short turn ({len(sizes)} events)", f"{per_turn:,.0f}"])
        finally:
            server.stop()
    print(
        f"{NAME}: {args.calls} calls a unary/bare side, {args.turns} StreamChat turns "
        f"(conversations of {PER_SESSION}), server log level {args.log_level}"
    )
    print_table(["side", "instructions a call"], rows)
    bare_per_call = float(rows[2][1].replace(",", ""))
    build_ratio = float(rows[1][1].replace(",", "")) / float(rows[0][1].replace(",", ""))
    print(f"BuildMessages ÷ Echo instructions: {build_ratio:.3f}")
    ratio = per_turn / bare_per_call
    print(f"RESULT {NAME} ratio={ratio:.2f} target=none PASS")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--log-level", default="INFO", help="server log level, or OFF")
    parser.add_argument("--calls", type=int, help="counted calls a side (default 500)")
    parser.add_argument("--turns", type=int, help="counted turns (default 100)")
    parser.add_argument("--keep", help="a directory to keep callgrind's dumps in")
    args = parser.parse_args()
    if args.serve:
        handlers: list[grpc.GenericRpcHandler[Any, Any]] = [echo_handler(), stream_handler()]
        asyncio.run(serve(args.log_level, handlers, provider="echo"))
        return 0
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("needs valgrind (Debian: apt-get install valgrind)")
    args.calls = args.calls or (50 if args.quick else 500)
    args.turns = args.turns or (25 if args.quick else 100)
    args.warmup = 20 if args.quick else 100
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
