"""Time to first delta through contextd, minus the fake provider's time to first byte.

Three processes: this client; a fake OpenAI-compatible server (``tests.support.fakes``, this
script with ``--fake``); contextd itself (``python -m contextd serve --provider
openai --provider-base-url http://127.0.0.1:<fake>/v1``, a fake key in
``CONTEXTD_OPENAI_API_KEY``, log level INFO as served). The fake streams a scripted
answer: the role chunk at once, the first content chunk after ``--ttft`` seconds
(a model thinking), the other pieces ``--frame-delay`` apart, then finish, usage
and ``[DONE]``.

Per turn: ``t0`` just before the client sends StreamChat; the fake notes when the
request arrived and when it starts writing its first content chunk (just before the
write, so the figure includes the write itself, a few microseconds); ``t_first``
when the client has the first TextDelta. contextd's overhead = ``t_first -
t_fake_first_content``: the chunk through the loopback socket, the provider SDK
reading and parsing it, the chat turn passing it on, gRPC to the client.
Timestamps come from ``time.monotonic_ns()`` (and the fake's own
``time.monotonic()`` for arrivals): CLOCK_MONOTONIC, one clock for every process
on a Linux machine (unlike ``time.perf_counter``, whose origin is per process).
Each turn's user message carries a tag (``[turn 17]``) that the fake reads from the
last user message of the request, so the two sides' timestamps are matched by
turn, not by order.

For information, the same measurement with the client reading the fake directly
through the same ``openai`` SDK (no contextd, no gRPC): one local HTTP hop; and through
a bare relay (``_relay.py``, a process of its own): a grpc.aio
server-streaming handler that reads the fake with contextd's own OpenAI provider (the SDK's
raw stream, parsed as contextd parses it) and yields each piece of text as a ``TextDelta``
at once, so it pays the provider's hop and gRPC's, nothing of the chat turn's. The
relay is the floor under contextd's figure; ``contextd - relay`` is what the chat turn's
own work adds to a delta. The sides alternate by rounds. The turns are
conversations of 25 turns (a new session every 25 turns, the server's prompt budget,
as in ``stream_vs_grpc.py``), sent one at a time with a pause of ``--gap``
seconds between them (a user reading the answer): after every ok turn contextd calls
the model again in the background (memory facts, session summary; requests without
tools, which the fake answers at once with a short reply), and the pause lets that
work end before the next turn, as it would between a person's messages. The table
says how often it still ran. Target: contextd's p50 overhead at most 0.3 ms over the
direct SDK hop's; the RESULT ratio is that difference in ms. A second RESULT line,
``first_delta_to_model``: time to the model, send -> the fake's request p50 through
contextd minus the direct call's (the `openai` SDK sending one user message), in ms; target
at most 3 ms.
Run: ``python bench/first_delta.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support.fakes

import grpc
import grpc.aio
import openai
from _common import (
    USER_MESSAGE,
    machine_note,
    median,
    print_table,
    result_line,
    stdin_closed,
)
from _relay import RELAY_METHOD, spawn_relay
from aiohttp import web
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb

from tests.support.fakes.helpers import FAKE_KEY
from tests.support.fakes.llm_server import FakeLLMServer, Frame, Reply, StreamReply
from tests.support.fakes.openai_sse import split, text_frames

NAME = "first_delta"
# contextd's own share: its p50 overhead minus the direct SDK hop's.
TARGET_MS = 0.3
# A session turn's request reaches the model at most this much later than a direct call's:
# what the turn does first (the session, its build, storing the input) and gRPC's hop.
TO_MODEL = "first_delta_to_model"
TO_MODEL_TARGET_MS = 3.0
CHAT_METHOD = "/contextd.v1.ChatService/StreamChat"
USER = "bench-user"
TURNS_PER_SESSION = 25  # as stream_vs_grpc: conversations of 25 turns
TEXT_DELTA_TAG = 0x12  # StreamChatResponse field 2 (text_delta), length-delimited
TURN_STARTED_TAG = 0x0A
ANSWER = (
    "Your benchmark times the happy path only. It never checks the answers, it runs "
    "both sides once, so noise decides, and it measures the first call, which pays for "
    "imports and connection set-up. Alternate the sides and report medians."
)
PIECES = 12
DIRECT = "direct (openai SDK)"
RELAY = "bare relay (provider + gRPC)"
_TAG = re.compile(r"^\[turn (\w+)\]")
DIRECT_TOOL: Any = {
    "type": "function",
    "function": {"name": "memory_search", "parameters": {"type": "object"}},
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


# --- the fake provider (child process) ----------------------------------------------------


class TimedFake(FakeLLMServer):
    """The tests' fake, noting when the first content chunk of each answer went out.

    Its replies are plain ``close``-ending text streams, so this ``_stream`` keeps only
    that part of the original, with a timestamp as the first content frame is written.
    """

    def __init__(self, quick: StreamReply) -> None:
        super().__init__(base_path="/v1")
        self.quick = quick
        self.first_content: dict[int, int] = {}  # request index -> monotonic_ns
        self.finished: dict[int, int] = {}

    def _next_reply(self) -> Reply:
        """Chat turns (their requests offer tools) get the script; the server's background
        calls after a turn (memory facts, summaries) a short answer at once."""
        if self.requests[-1].body.get("tools"):
            return super()._next_reply()
        return self.quick

    async def _stream(
        self, request: web.Request, index: int, reply: StreamReply
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            status=reply.status,
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"},
        )
        await response.prepare(request)
        for k, frame in enumerate(reply.frames):
            delay = reply.frame_delay if frame.delay is None else frame.delay
            if delay:
                await asyncio.sleep(delay)
            if k == 1:  # text_frames: [role chunk, first content chunk, ...]
                # Before the write: taken after it, the stamp can come later than the
                # client's (the fake descheduled between the send and the clock read).
                self.first_content[index] = time.monotonic_ns()
            await response.write(frame.data)
        await response.write_eof()
        self.finished[index] = time.monotonic_ns()
        self.completed.append(index)
        return response

    def records(self) -> dict[str, Any]:
        """Turn tag -> [request arrival, first content written, background calls after the
        turn, when the last of them ended (0 if none)], monotonic ns."""
        out: dict[str, Any] = {}
        current: list[int] | None = None
        for index, recorded in enumerate(self.requests):
            if not recorded.body.get("tools"):  # a background call of the turn before
                if current is not None:
                    current[2] += 1
                    current[3] = max(current[3], self.finished.get(index, 0))
                continue
            user = [m for m in recorded.body["messages"] if m["role"] == "user"][-1]
            match = _TAG.match(user["content"])
            current = None
            if match and index in self.first_content:
                current = [round(recorded.at * 1e9), self.first_content[index], 0, 0]
                out[match.group(1)] = current
        return out


async def run_fake(ttft: float, frame_delay: float) -> None:
    """Serve the scripted answer forever; print PORT, then the records when stdin closes."""
    frames = text_frames(split(ANSWER, PIECES), usage=(120, 48))
    frames[0] = Frame(frames[0].data, delay=0.0)  # the role chunk at once
    frames[1] = Frame(frames[1].data, delay=ttft)
    fake = TimedFake(StreamReply(text_frames(['{"facts": []}'], usage=(50, 5))))
    fake.script(StreamReply(frames, frame_delay=frame_delay), repeat_last=True)
    await fake.start()
    print(f"PORT {fake.port}", flush=True)
    await stdin_closed()
    print("RECORDS " + json.dumps(fake.records()), flush=True)
    await fake.stop()


@dataclass
class FakeChild:
    process: subprocess.Popen[str]
    port: int

    def records(self) -> dict[str, list[int]]:
        """Close its stdin; it answers with its records and exits."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        line = self.process.stdout.readline()
        self.process.wait(15)
        if not line.startswith("RECORDS "):
            raise RuntimeError(f"the fake provider answered {line!r}")
        records: dict[str, list[int]] = json.loads(line.split(" ", 1)[1])
        return records


def spawn_fake(ttft: float, frame_delay: float) -> FakeChild:
    process = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--fake",
            "--ttft",
            str(ttft),
            "--frame-delay",
            str(frame_delay),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("PORT "):
        process.kill()
        process.wait()
        raise RuntimeError("the fake provider did not start")
    return FakeChild(process, int(line.split()[1]))


# --- contextd (child process) -------------------------------------------------------------


def spawn_contextd(data_dir: Path, fake_port: int) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTD_")}
    env["CONTEXTD_OPENAI_API_KEY"] = FAKE_KEY
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "contextd",
            "serve",
            "--port",
            "0",
            "--data-dir",
            str(data_dir),
            "--provider",
            "openai",
            "--provider-base-url",
            f"http://127.0.0.1:{fake_port}/v1",
            "--log-level",
            "INFO",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert process.stderr is not None
    for line in process.stderr:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("msg") == "listening":
            address = str(entry["address"])
            break
    else:
        raise RuntimeError("contextd exited before listening")
    # Keep draining the log (a JSON line per call) so the server never blocks on the pipe.
    threading.Thread(target=process.stderr.read, daemon=True).start()
    return process, address


# --- client -------------------------------------------------------------------------------


@dataclass
class Turn:
    tag: str
    t0: int
    first: int  # first TextDelta (or content chunk) at the client
    end: int  # the last message at the client
    started: int = 0  # TurnStarted at the client (contextd side only)


@dataclass
class Side:
    name: str
    run_turn: Callable[[str], Any]
    turns: list[Turn] = field(default_factory=list)


def user_text(tag: str) -> str:
    return f"[turn {tag}] {USER_MESSAGE}"


def contextd_side(channel: grpc.aio.Channel) -> Callable[[str], Any]:
    """Turns of a conversation; a new session every TURNS_PER_SESSION turns, so the
    pre-model figures do not grow with one ever longer session."""
    stream: Callable[[bytes], AsyncIterable[bytes]] = channel.unary_stream(
        CHAT_METHOD, lambda b: b, lambda b: b
    )
    session_id = ""
    turns = 0

    async def run_turn(tag: str) -> Turn:
        nonlocal session_id, turns
        request = cpb.StreamChatRequest(
            session=pb.SessionContext(user_id=USER, session_id=session_id),
            user_message=user_text(tag),
        ).SerializeToString()
        started = first = 0
        received = []
        t0 = time.monotonic_ns()
        async for message in stream(request):
            if not first and message[0] == TEXT_DELTA_TAG:
                first = time.monotonic_ns()
            elif not started and message[0] == TURN_STARTED_TAG:
                started = time.monotonic_ns()
            received.append(message)
        end = time.monotonic_ns()
        events = [cpb.StreamChatResponse.FromString(m) for m in received]
        done = events[-1].turn_completed
        if done.status != cpb.TURN_STATUS_OK or done.final_text != ANSWER or not first:
            raise SystemExit(f"unexpected turn: {events[-1]}")
        turns += 1
        new = turns % TURNS_PER_SESSION == 0
        session_id = "" if new else events[0].turn_started.session_id
        return Turn(tag, t0, first, end, started)

    return run_turn


def relay_side(channel: grpc.aio.Channel) -> Callable[[str], Any]:
    stream: Callable[[bytes], AsyncIterable[bytes]] = channel.unary_stream(
        RELAY_METHOD, lambda b: b, lambda b: b
    )

    async def run_turn(tag: str) -> Turn:
        first = 0
        received = []
        t0 = time.monotonic_ns()
        async for message in stream(user_text(tag).encode()):
            if not first:
                first = time.monotonic_ns()
            received.append(message)
        end = time.monotonic_ns()
        text = "".join(cpb.StreamChatResponse.FromString(m).text_delta.text for m in received)
        if text != ANSWER:
            raise SystemExit("the relay did not return the answer")
        return Turn(tag, t0, first, end)

    return run_turn


def direct_side(client: openai.AsyncOpenAI) -> Callable[[str], Any]:
    async def run_turn(tag: str) -> Turn:
        first = 0
        text = []
        t0 = time.monotonic_ns()
        stream = await client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": user_text(tag)}],
            tools=[DIRECT_TOOL],  # as contextd's requests: the fake streams the script
            stream=True,
            stream_options={"include_usage": True},
        )
        async with stream:
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    if not first:
                        first = time.monotonic_ns()
                    text.append(chunk.choices[0].delta.content)
        end = time.monotonic_ns()
        if "".join(text) != ANSWER:
            raise SystemExit("the direct stream did not return the answer")
        return Turn(tag, t0, first, end)

    return run_turn


async def measure(
    args: argparse.Namespace, fake: FakeChild, address: str, relay_port: int
) -> list[Side]:
    async with (
        grpc.aio.insecure_channel(address) as channel,
        grpc.aio.insecure_channel(f"127.0.0.1:{relay_port}") as relay_channel,
    ):
        client = openai.AsyncOpenAI(
            api_key=FAKE_KEY, base_url=f"http://127.0.0.1:{fake.port}/v1", max_retries=0
        )
        try:
            sides = [
                Side("contextd", contextd_side(channel)),
                Side(DIRECT, direct_side(client)),
                Side(RELAY, relay_side(relay_channel)),
            ]
            serial = 0
            for side in sides:  # warm-up, not recorded
                for _ in range(args.warmup):
                    serial += 1
                    await side.run_turn(f"w{serial}")
                    await asyncio.sleep(args.gap)
            for r in range(args.rounds):
                # Each round in another order, so no side always follows the same one.
                for side in sides[r % 3 :] + sides[: r % 3]:
                    for _ in range(args.turns):
                        serial += 1
                        side.turns.append(await side.run_turn(str(serial)))
                        await asyncio.sleep(args.gap)
        finally:
            await client.close()
    return sides


def ms(ns: float) -> float:
    return ns / 1e6


async def run(args: argparse.Namespace) -> int:
    print(machine_note(), flush=True)
    fake = spawn_fake(args.ttft, args.frame_delay)
    try:
        relay, relay_port = spawn_relay(fake.port)
        try:
            with tempfile.TemporaryDirectory(prefix="contextd-bench-") as tmp:
                process, address = spawn_contextd(Path(tmp), fake.port)
                try:
                    sides = await measure(args, fake, address, relay_port)
                finally:
                    process.terminate()
                    process.wait(15)
        finally:
            assert relay.stdin is not None
            relay.stdin.close()
            relay.wait(15)
    finally:
        records = fake.records() if fake.process.poll() is None else {}
        if fake.process.poll() is None:
            fake.process.kill()
            fake.process.wait()

    print(
        f"{NAME}: {args.rounds} alternating rounds of {args.turns} sequential turns per side; "
        f"fake answer {len(ANSWER)} chars in {PIECES} chunks, first content after "
        f"{args.ttft * 1000:.0f} ms, then {args.frame_delay * 1000:.0f} ms apart; "
        f"conversations of {TURNS_PER_SESSION} turns, the server's budget (8000 tokens); "
        f"contextd log level INFO"
    )
    rows = []
    overheads: dict[str, list[float]] = {}
    to_model: dict[str, float] = {}  # send -> the fake's request, p50 ms
    background_calls: list[int] = []
    background_ms: list[float] = []
    overlapping = 0
    for side in sides:
        over, pre = [], []
        for k, turn in enumerate(side.turns):
            arrival, fake_first, calls, done = records[turn.tag]
            over.append(ms(turn.first - fake_first))
            pre.append(ms(arrival - turn.t0))
            if side.name == "contextd":
                background_calls.append(calls)
                if calls:
                    background_ms.append(ms(done - turn.end))
                if k + 1 < len(side.turns) and done > side.turns[k + 1].t0:
                    overlapping += 1
        overheads[side.name] = over
        to_model[side.name] = median(pre)
        started = [ms(t.started - t.t0) for t in side.turns if t.started]
        ttfd = [ms(t.first - t.t0) for t in side.turns]
        rows.append(
            [
                side.name,
                str(len(over)),
                f"{median(over):.2f}",
                f"{percentile(over, 0.95):.2f}",
                f"{min(over):.2f}-{max(over):.2f}",
                f"{median(pre):.2f}",
                f"{median(started):.2f}" if started else "-",
                f"{median(ttfd):.2f}",
            ]
        )
    print_table(
        [
            "side",
            "turns",
            "overhead p50 ms",
            "p95 ms",
            "range ms",
            "send->fake request p50",
            "send->TurnStarted p50",
            "send->first delta p50",
        ],
        rows,
    )
    p50 = median(overheads["contextd"])
    floor = median(overheads[DIRECT])
    relayed = median(overheads[RELAY])
    print(
        f"overhead = first TextDelta at the client - the fake starting to write its first "
        f"content chunk (CLOCK_MONOTONIC); contextd p50 {p50:.2f} ms, of which the direct SDK "
        f"hop's p50 {floor:.2f} ms; through the bare relay {relayed:.2f} ms"
    )
    print(
        f"contextd minus the direct SDK hop: {p50 - floor:.2f} ms; contextd minus the bare "
        f"relay (the chat turn's own work on a delta): {p50 - relayed:.2f} ms"
    )
    if background_calls:
        waited = f"{median(background_ms):.1f} ms" if background_ms else "-"
        print(
            f"contextd's background work after a turn: {median(background_calls):.0f} model "
            f"calls (p50), the last ending {waited} after the turn's last event (p50); still "
            f"running when the next turn was sent ({args.gap * 1000:.0f} ms pause): "
            f"{overlapping} of {len(background_calls)} turns"
        )
    later = to_model["contextd"] - to_model[DIRECT]
    print(
        f"time to the model (send -> the fake's request, p50): contextd "
        f"{to_model['contextd']:.2f} ms, the direct SDK call {to_model[DIRECT]:.2f} ms, the "
        f"bare relay {to_model[RELAY]:.2f} ms; contextd minus direct {later:.2f} ms "
        f"(target <= {TO_MODEL_TARGET_MS:g} ms)"
    )
    print(result_line(NAME, p50 - floor, TARGET_MS, p50 - floor <= TARGET_MS))
    print(result_line(TO_MODEL, later, TO_MODEL_TARGET_MS, later <= TO_MODEL_TARGET_MS))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--fake", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, help="rounds per side (default 10, quick 2)")
    parser.add_argument("--turns", type=int, help="turns per round (default 10, quick 5)")
    parser.add_argument(
        "--ttft", type=float, default=0.02, help="seconds before the first content chunk"
    )
    parser.add_argument(
        "--frame-delay", type=float, default=0.005, help="seconds between the other chunks"
    )
    parser.add_argument(
        "--gap", type=float, default=0.1, help="seconds between turns (default 0.1)"
    )
    args = parser.parse_args()
    if args.fake:
        asyncio.run(run_fake(args.ttft, args.frame_delay))
        return 0
    args.rounds = args.rounds or (2 if args.quick else 10)
    args.turns = args.turns or (5 if args.quick else 10)
    args.warmup = 3 if args.quick else 10
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
