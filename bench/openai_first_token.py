"""Time to first token through /v1/chat/completions and /v1/responses (streaming) against
the same turn through StreamChat, and against the fake provider read directly.

The processes and the fake are first_delta.py's: this client; the fake OpenAI-compatible
server (first_delta.py with ``--fake``: the role chunk at once, the first content chunk
after ``--ttft`` seconds, the rest ``--frame-delay`` apart); contextd (``python -m
contextd serve --provider openai --provider-base-url http://127.0.0.1:<fake>/v1
--web-port 0 --openai-api``, log level INFO). Five sides, alternating by rounds:

- StreamChat: session-mode turns on the native port (first_delta.py's client);
- /v1: the same turns through the web port with the official ``openai`` SDK
  (``AsyncOpenAI``, ``stream=True`` with usage), session mode (``X-Contextd-Session``),
  the caller sending only its new message;
- /v1 raw: the same requests read as plain server-sent events (aiohttp, no SDK), the
  first token stamped on the bytes as StreamChat's client does: the front's own share;
- /v1/responses: the same turns through the Responses API with the ``openai`` SDK
  (``responses.create(stream=True)``), each turn continuing the one before with
  ``previous_response_id`` (the first of a conversation inline);
- direct: the SDK reading the fake itself (no contextd), the floor under both.

Per turn: t0 just before the client sends; the first token = the first TextDelta, or the
first chunk with content; the fake stamps when it starts writing its first content chunk.
Overhead = first token at the client - that stamp (CLOCK_MONOTONIC, one clock for every
process). Turns are matched to the fake's stamps by a tag in the user message. The turns
are conversations of 25 turns, one at a time with a pause of ``--gap`` s (contextd's
background work after each turn ends in it). **RESULT ratio = the larger overhead p50 of
/v1 and /v1/responses ÷ (StreamChat's + 0.3 ms); target ≤ 1**, and each under the direct
call's + 1 ms (a front adds at most 0.3 ms to the native call after the model's first
token). Run: ``python bench/openai_first_token.py [--quick]``.
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
from typing import Any

import aiohttp
import grpc.aio
import openai
from _common import machine_note, median, print_table, result_line
from first_delta import (
    ANSWER,
    PIECES,
    TURNS_PER_SESSION,
    USER,
    FakeChild,
    Side,
    Turn,
    contextd_side,
    direct_side,
    percentile,
    spawn_fake,
    user_text,
)

from tests.support.fakes.helpers import FAKE_KEY

NAME = "openai_first_token"
ADDED_MS = 0.3  # the most a front may add to StreamChat's overhead
OVER_DIRECT_MS = 1.0  # and to the direct call's
CHAT = "/v1 (openai SDK)"
RAW = "/v1 (raw SSE)"
RESPONSES = "/v1/responses (openai SDK)"
DIRECT = "direct (openai SDK)"
_CONTENT = b'"content":"'
_NO_CONTENT = b'"content":""'
LOOK_UP: Any = {"type": "function", "name": "look_up", "parameters": {"type": "object"}}


def spawn_contextd(
    data_dir: Path, fake_port: int, api: str = "--openai-api"
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


def openai_side(client: openai.AsyncOpenAI) -> Callable[[str], Any]:
    """Session-mode turns through /v1: the new message only, a new session every
    TURNS_PER_SESSION turns (as the StreamChat side)."""
    session_id = ""
    turns = 0

    async def run_turn(tag: str) -> Turn:
        nonlocal session_id, turns
        first = 0
        text = []
        t0 = time.monotonic_ns()
        stream = await client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": user_text(tag)}],
            user=USER,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={"X-Contextd-Session": session_id or "new"},
        )
        named = ""
        async with stream:
            async for chunk in stream:
                if not named:
                    named = (chunk.model_extra or {})["contextd"]["session_id"]
                if chunk.choices and chunk.choices[0].delta.content:
                    if not first:
                        first = time.monotonic_ns()
                    text.append(chunk.choices[0].delta.content)
        end = time.monotonic_ns()
        if "".join(text) != ANSWER:
            raise SystemExit("the /v1 stream did not return the answer")
        turns += 1
        session_id = "" if turns % TURNS_PER_SESSION == 0 else named
        return Turn(tag, t0, first, end)

    return run_turn


def raw_side(http: aiohttp.ClientSession, web: str) -> Callable[[str], Any]:
    """openai_side's turns read as plain server-sent events (aiohttp, no SDK): the first
    token is the first line holding content, stamped before it is parsed, as the
    StreamChat side stamps the first TextDelta's bytes. What /v1 costs without the
    SDK's reading and parsing."""
    session_id = ""
    turns = 0

    async def run_turn(tag: str) -> Turn:
        nonlocal session_id, turns
        first = 0
        lines = []
        t0 = time.monotonic_ns()
        async with http.post(
            f"http://{web}/v1/chat/completions",
            json={
                "model": "fake-model",
                "messages": [{"role": "user", "content": user_text(tag)}],
                "user": USER,
                "stream": True,
            },
            headers={"X-Contextd-Session": session_id or "new"},
        ) as response:
            async for line in response.content:
                if not first and _CONTENT in line and _NO_CONTENT not in line:
                    first = time.monotonic_ns()
                lines.append(line)
        end = time.monotonic_ns()
        chunks = [json.loads(line[6:]) for line in lines if line.startswith(b"data: {")]
        text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        if text != ANSWER or not first:
            raise SystemExit("the raw /v1 stream did not return the answer")
        turns += 1
        named = str(chunks[0]["contextd"]["session_id"])
        session_id = "" if turns % TURNS_PER_SESSION == 0 else named
        return Turn(tag, t0, first, end)

    return run_turn


def responses_side(client: openai.AsyncOpenAI) -> Callable[[str], Any]:
    """Turns through /v1/responses: the new message only, each continuing the previous
    response; a new conversation every TURNS_PER_SESSION turns."""
    previous = ""
    turns = 0

    async def run_turn(tag: str) -> Turn:
        nonlocal previous, turns
        first = 0
        text = []
        t0 = time.monotonic_ns()
        stream = await client.responses.create(
            model="fake-model",
            input=user_text(tag),
            user=USER,
            # A host tool, never called: the fake streams its script to a request that
            # offers tools (an inline turn offers no memory_search).
            tools=[LOOK_UP],
            stream=True,
            previous_response_id=previous or None,
        )
        response_id = ""
        async with stream:
            async for event in stream:
                if event.type == "response.output_text.delta" and event.delta:
                    if not first:
                        first = time.monotonic_ns()
                    text.append(event.delta)
                elif event.type == "response.completed":
                    response_id = event.response.id
        end = time.monotonic_ns()
        if "".join(text) != ANSWER or not response_id:
            raise SystemExit("the /v1/responses stream did not return the answer")
        turns += 1
        previous = "" if turns % TURNS_PER_SESSION == 0 else response_id
        return Turn(tag, t0, first, end)

    return run_turn


async def measure(args: argparse.Namespace, fake: FakeChild, native: str, web: str) -> list[Side]:
    async with grpc.aio.insecure_channel(native) as channel:
        through = openai.AsyncOpenAI(api_key="unused", base_url=f"http://{web}/v1", max_retries=0)
        direct = openai.AsyncOpenAI(
            api_key=FAKE_KEY, base_url=f"http://127.0.0.1:{fake.port}/v1", max_retries=0
        )
        http = aiohttp.ClientSession()
        try:
            sides = [
                Side("StreamChat", contextd_side(channel)),
                Side(CHAT, openai_side(through)),
                Side(RAW, raw_side(http, web)),
                Side(RESPONSES, responses_side(through)),
                Side(DIRECT, direct_side(direct)),
            ]
            await alternate(args, sides)
        finally:
            await through.close()
            await direct.close()
            await http.close()
    return sides


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


def ms(ns: float) -> float:
    return ns / 1e6


Measure = Callable[[argparse.Namespace, FakeChild, str, str], Awaitable[list[Side]]]


async def served(
    args: argparse.Namespace, api: str, measure: Measure
) -> tuple[list[Side], dict[str, Any]]:
    """``measure`` run against the fake and contextd serving ``api``; the sides and the
    fake's stamps."""
    print(machine_note(), flush=True)
    fake = spawn_fake(args.ttft, args.frame_delay)
    try:
        with tempfile.TemporaryDirectory(prefix="contextd-bench-") as tmp:
            process, native, web = spawn_contextd(Path(tmp), fake.port, api)
            try:
                sides = await measure(args, fake, native, web)
            finally:
                process.terminate()
                process.wait(15)
    finally:
        records = fake.records() if fake.process.poll() is None else {}
        if fake.process.poll() is None:
            fake.process.kill()
            fake.process.wait()
    return sides, records


async def run(args: argparse.Namespace) -> int:
    sides, records = await served(args, "--openai-api", measure)
    first_token, overhead = summarize(NAME, args, sides, records)
    print(
        f"send->first token p50: /v1 {first_token[CHAT]:.2f} ms, /v1/responses "
        f"{first_token[RESPONSES]:.2f} ms, StreamChat {first_token['StreamChat']:.2f} ms, "
        f"direct {first_token[DIRECT]:.2f} ms; overhead after the fake's first content: "
        f"/v1 {overhead[CHAT]:.2f} ms (raw SSE {overhead[RAW]:.2f}), /v1/responses "
        f"{overhead[RESPONSES]:.2f} ms, StreamChat {overhead['StreamChat']:.2f} ms, "
        f"direct {overhead[DIRECT]:.2f} ms"
    )
    worst = max(overhead[CHAT], overhead[RESPONSES])
    ratio = worst / (overhead["StreamChat"] + ADDED_MS)
    print(result_line(NAME, ratio, 1.0, ratio <= 1.0 and worst < overhead[DIRECT] + OVER_DIRECT_MS))
    return 0


def summarize(
    name: str, args: argparse.Namespace, sides: list[Side], records: dict[str, Any]
) -> tuple[dict[str, float], dict[str, float]]:
    """Print each side's figures; its send -> first token and overhead p50s, by side."""
    print(
        f"{name}: {args.rounds} alternating rounds of {args.turns} sequential turns per side; "
        f"fake answer {len(ANSWER)} chars in {PIECES} chunks, first content after "
        f"{args.ttft * 1000:.0f} ms; conversations of {TURNS_PER_SESSION} turns"
    )
    rows = []
    first_token: dict[str, float] = {}
    overhead: dict[str, float] = {}
    for side in sides:
        over = [ms(t.first - records[t.tag][1]) for t in side.turns]
        pre = [ms(records[t.tag][0] - t.t0) for t in side.turns]
        ttft = [ms(t.first - t.t0) for t in side.turns]
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def counts(args: argparse.Namespace) -> None:
    args.rounds = args.rounds or (2 if args.quick else 10)
    args.turns = args.turns or (3 if args.quick else 10)
    args.warmup = 2 if args.quick else 10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_arguments(parser)
    args = parser.parse_args()
    counts(args)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
