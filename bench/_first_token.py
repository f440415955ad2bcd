"""What the first-token benchmarks of the model APIs (openai_first_token.py,
anthropic_first_token.py) share: contextd serving one API in front of first_delta.py's
fake provider, turns that each go on from the one before and are timed to their first
text, the sides alternating by rounds (StreamChat and the direct call beside the API's),
and each side's figures.

Overhead = first token at the client - the fake's stamp of its first content chunk
(CLOCK_MONOTONIC, one clock for every process); turns are matched to the fake's stamps
by a tag in the user message.
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
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc.aio
import openai
from _common import machine_note, median, print_table
from first_delta import (
    ANSWER,
    PIECES,
    TURNS_PER_SESSION,
    FakeChild,
    Side,
    Turn,
    contextd_side,
    direct_side,
    percentile,
    spawn_fake,
)

from tests.support.fakes.helpers import FAKE_KEY

STREAMCHAT = "StreamChat"
DIRECT = "direct (openai SDK)"
# What a turn's stream gives: ("text", a piece of the answer) or ("next", the id the
# next turn goes on from: its session, or the response it continues).
Piece = tuple[str, str]
# Sends the turn tagged ``tag``, going on from an id ("" for a new conversation).
Send = Callable[[str, str], AsyncIterator[Piece]]
# The sides through the web port at an address, and the client to close after.
Through = Callable[[str], tuple[list[Side], Any]]


def continued_turns(label: str, send: Send) -> Callable[[str], Awaitable[Turn]]:
    """Turns that each go on from the one before, a new conversation every
    TURNS_PER_SESSION turns (as the StreamChat side), timed to their first text."""
    going_on = ""
    turns = 0

    async def run_turn(tag: str) -> Turn:
        nonlocal going_on, turns
        first = 0
        text = []
        next_id = ""
        t0 = time.monotonic_ns()
        async for kind, value in send(tag, going_on):
            if kind == "next":
                next_id = value
                continue
            if not first:
                first = time.monotonic_ns()
            text.append(value)
        end = time.monotonic_ns()
        if "".join(text) != ANSWER or not next_id:
            raise SystemExit(f"the {label} stream did not return the answer")
        turns += 1
        going_on = "" if turns % TURNS_PER_SESSION == 0 else next_id
        return Turn(tag, t0, first, end)

    return run_turn


def spawn_contextd(
    data_dir: Path, fake_port: int, api: str
) -> tuple[subprocess.Popen[str], str, str]:
    """contextd with the web port and ``api`` on; its native and web addresses."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTD_")}
    env["CONTEXTD_OPENAI_API_KEY"] = FAKE_KEY
    command = [sys.executable, "-m", "contextd", "serve", "--port", "0"]
    command += ["--data-dir", str(data_dir), "--web-port", "0", api]
    command += ["--provider", "openai", "--provider-base-url", f"http://127.0.0.1:{fake_port}/v1"]
    process = subprocess.Popen(
        [*command, "--log-level", "INFO"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert process.stderr is not None
    web = ""
    for line in process.stderr:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("msg") == "grpc-web listening":
            web = str(entry["address"])
        if entry.get("msg") == "listening":
            native = str(entry["address"])
            break
    else:
        raise RuntimeError("contextd exited before listening")
    # Keep draining the log (a JSON line per call) so the server never blocks on the pipe.
    threading.Thread(target=process.stderr.read, daemon=True).start()
    return process, native, web


async def alternate(args: argparse.Namespace, sides: list[Side]) -> None:
    """Warm-up turns (not recorded), then rounds of turns on each side, the order
    reversed every other round."""
    serial = 0
    for side in sides:
        for _ in range(args.warmup):
            serial += 1
            await side.run_turn(f"w{serial}")
            await asyncio.sleep(args.gap)
    for r in range(args.rounds):
        for side in sides if r % 2 == 0 else sides[::-1]:
            for _ in range(args.turns):
                serial += 1
                side.turns.append(await side.run_turn(str(serial)))
                await asyncio.sleep(args.gap)


async def _measure(
    args: argparse.Namespace, fake: FakeChild, native: str, web: str, through: Through
) -> list[Side]:
    async with grpc.aio.insecure_channel(native) as channel:
        direct = openai.AsyncOpenAI(
            api_key=FAKE_KEY, base_url=f"http://127.0.0.1:{fake.port}/v1", max_retries=0
        )
        api_sides, client = through(web)
        try:
            sides = [
                Side(STREAMCHAT, contextd_side(channel)),
                *api_sides,
                Side(DIRECT, direct_side(direct)),
            ]
            await alternate(args, sides)
        finally:
            await client.close()
            await direct.close()
    return sides


async def served(
    name: str, args: argparse.Namespace, api: str, through: Through
) -> tuple[dict[str, float], dict[str, float]]:
    """The sides ``through`` gives, StreamChat and the direct call, run against the fake
    and contextd serving ``api``; each side's figures printed, and its send -> first
    token and overhead p50s returned, by side."""
    print(machine_note(), flush=True)
    fake = spawn_fake(args.ttft, args.frame_delay)
    try:
        with tempfile.TemporaryDirectory(prefix="contextd-bench-") as tmp:
            process, native, web = spawn_contextd(Path(tmp), fake.port, api)
            try:
                sides = await _measure(args, fake, native, web, through)
            finally:
                process.terminate()
                process.wait(15)
    finally:
        records = fake.records() if fake.process.poll() is None else {}
        if fake.process.poll() is None:
            fake.process.kill()
            fake.process.wait()
    return _summarize(name, args, sides, records)


def _ms(ns: float) -> float:
    return ns / 1e6


def _summarize(
    name: str, args: argparse.Namespace, sides: list[Side], records: dict[str, Any]
) -> tuple[dict[str, float], dict[str, float]]:
    print(
        f"{name}: {args.rounds} alternating rounds of {args.turns} sequential turns per side; "
        f"fake answer {len(ANSWER)} chars in {PIECES} chunks, first content after "
        f"{args.ttft * 1000:.0f} ms; conversations of {TURNS_PER_SESSION} turns"
    )
    rows = []
    first_token: dict[str, float] = {}
    overhead: dict[str, float] = {}
    for side in sides:
        over = [_ms(t.first - records[t.tag][1]) for t in side.turns]
        pre = [_ms(records[t.tag][0] - t.t0) for t in side.turns]
        ttft = [_ms(t.first - t.t0) for t in side.turns]
        first_token[side.name], overhead[side.name] = median(ttft), median(over)
        rows.append(
            [
                side.name,
                str(len(over)),
                f"{median(over):.2f}",
                f"{percentile(over, 0.95):.2f}",
                f"{median(pre):.2f}",
                f"{median(ttft):.2f}",
            ]
        )
    print_table(
        [
            "side",
            "turns",
            "overhead p50 ms",
            "p95 ms",
            "send->fake request p50",
            "send->first token p50",
        ],
        rows,
    )
    return first_token, overhead


def arguments(description: str | None) -> argparse.Namespace:
    """The command line both benchmarks take, with the counts filled in."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--rounds", type=int, help="rounds per side (default 10, quick 2)")
    parser.add_argument("--turns", type=int, help="turns per round (default 10, quick 3)")
    parser.add_argument(
        "--ttft", type=float, default=0.02, help="seconds before the first content chunk"
    )
    parser.add_argument(
        "--frame-delay", type=float, default=0.005, help="seconds between the other chunks"
    )
    parser.add_argument("--gap", type=float, default=0.1, help="seconds between turns")
    args = parser.parse_args()
    args.rounds = args.rounds or (2 if args.quick else 10)
    args.turns = args.turns or (3 if args.quick else 10)
    args.warmup = 2 if args.quick else 10
    return args
