"""StreamChat events per second against a bare grpc.aio server-streaming RPC.

The server runs in a child process (this script with ``--serve``): contextd's own
``start()`` with the offline ``echo`` provider, plus one extra handler on the same
server, ``/contextd.bench.Stream/Stream``: a server-streaming method that takes a
list of message sizes and streams a ready-made bytes payload of each size, doing
nothing else. It pays what a streaming call costs in this server (HTTP/2, the
grpc.aio loop, the ``GuardInterceptor`` and its per-call log line) and nothing of
contextd's own work. The client asks it for exactly the sizes of the
StreamChatResponse messages of one chat turn, so both sides move the same number
of messages of the same sizes per call.

Each StreamChat call is a whole chat turn. Every stream holds a conversation: its
first turn starts a session, the next ones continue it, one after the other as a
chat client sends them, and after ``--per-session`` turns (default 25) the stream
starts a new conversation. The streams start at different points of their
conversations, so every round holds the same mix of early and late turns and the
cost of a turn does not drift as sessions grow (with ``--per-session 0`` every
stream keeps one session for the whole run and it does drift: see the README). The
prompt budget is the server's (8,000 tokens, as for a client that sets none), which
holds a whole conversation of short turns; with typical ones the older turns are
summarized or dropped for the budget. A turn does all it does in the server: it reads the
session, builds the context (memories, other sessions' summaries, the compression
summary once there is one), stores the user message, streams the echo answer,
stores it with the usage and writes its events to the session's JSONL log; after
it, the server's background work (memory facts, compression, session summary) runs
as after every ok turn. A further side, first turns only of the typical workload (a new
session every turn: session created, a ``session_start`` event, a new log file), is
measured in the same rounds for information.

Two workloads run in the same rounds, each against a bare side sized for it. *Typical
answers* (the RESULT): a 300-word user message, which the echo answer quotes, so a turn
streams about 315 words (about 400 tokens, the length of a usual chat model answer) in
108 events. *Short answers*: the 15-word message of ``_common.py``, 13 events a turn;
its ratio is printed beside the RESULT with whether it meets the target, since a turn's
own work (the same for any answer length) weighs most there.

Rounds cycle the sides after a warm-up. After every round the client waits until the
server is idle (its background work done), so no round's leftovers run into the next;
that work is in the server CPU per turn, not in the rate. Each ratio is the median over
cycles of StreamChat events/s / bare events/s.
Run: ``python bench/stream_vs_grpc.py [--quick]``.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import sys
import time
from collections.abc import AsyncIterable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
from _common import (
    USER_MESSAGE,
    machine_note,
    median,
    print_table,
    result_line,
)
from _server import ServerChild, serve, spawn_server
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb

NAME = "stream_vs_grpc"
TARGET = 0.6
STREAM_SERVICE = "contextd.bench.Stream"
STREAM_METHOD = f"/{STREAM_SERVICE}/Stream"
CHAT_METHOD = "/contextd.v1.ChatService/StreamChat"
USER = "bench-user"
NEW_USER = "bench-user-new"
CHECK_USER = "bench-user-check"
TURN_COMPLETED_TAG = 0x2A  # field 5 (turn_completed), length-delimited
# The typical workload: a 300-word user message, which the echo answer quotes: an answer of
# about 315 words (about 400 tokens, the length of a usual chat model answer) in 105 deltas.
TYPICAL_WORDS = 300

Call = Callable[[bytes], AsyncIterable[bytes]]


def _identity(data: bytes) -> bytes:
    return data


# --- server child -------------------------------------------------------------------------

_PAYLOADS: dict[int, bytes] = {}


def _payload(size: int) -> bytes:
    data = _PAYLOADS.get(size)
    if data is None:
        data = _PAYLOADS[size] = b"x" * size
    return data


async def _stream(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
    """The bare side: one ready-made payload per requested size (uint32 each)."""
    for size in array.array("I", request):
        yield _payload(size)


def stream_handler() -> grpc.GenericRpcHandler[Any, Any]:
    method = grpc.unary_stream_rpc_method_handler(
        _stream, request_deserializer=_identity, response_serializer=_identity
    )
    return grpc.method_handlers_generic_handler(STREAM_SERVICE, {"Stream": method})


# --- client -------------------------------------------------------------------------------


def user_message(words: int) -> str:
    """``_common.USER_MESSAGE``, or that text repeated to ``words`` words: the echo answer
    quotes it, so it sets the number of deltas per turn."""
    if not words:
        return USER_MESSAGE
    base = USER_MESSAGE.split()
    return " ".join((base * (words // len(base) + 1))[:words])


def chat_request(session_id: str, user: str, budget: int, message: str) -> bytes:
    return cpb.StreamChatRequest(
        session=pb.SessionContext(user_id=user, session_id=session_id),
        user_message=message,
        token_budget=budget,
    ).SerializeToString()


def check_completed(last: bytes) -> None:
    """The last message of a turn must be a TurnCompleted with status OK."""
    if not last or last[0] != TURN_COMPLETED_TAG:
        raise SystemExit("a StreamChat turn did not end with TurnCompleted")
    done = cpb.StreamChatResponse.FromString(last).turn_completed
    if done.status != cpb.TURN_STATUS_OK:
        raise SystemExit(f"a StreamChat turn ended with status {done.status}: {done.error_message}")


@dataclass
class Side:
    """One side's calls. The chat sides keep one conversation per stream: a new session
    every ``per_session`` turns (0: one session for the whole run)."""

    name: str
    call: Call
    streams: int
    bare_request: bytes = b""  # the bare side: the same request on every stream
    per_session: int = 0
    user: str = USER
    budget: int = 0
    message: str = USER_MESSAGE
    rates: list[float] = field(default_factory=list)  # events/s
    turn_rates: list[float] = field(default_factory=list)
    events_per_turn: list[float] = field(default_factory=list)
    server_cpu_us: list[float] = field(default_factory=list)  # per turn
    client_cpu_us: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)
    requests: list[bytes] = field(default_factory=list)  # chat: per stream, its session
    done: list[int] = field(default_factory=list)  # chat: turns per stream so far

    def __post_init__(self) -> None:
        self.requests = [b""] * self.streams
        # Streams start at different points of their conversations, so every round
        # holds an even mix of early and late turns.
        step = self.per_session / self.streams
        self.done = [round(k * step) for k in range(self.streams)]
        self.new_request = chat_request("", self.user, self.budget, self.message)

    @property
    def is_chat(self) -> bool:
        return not self.bare_request

    async def turn(self, stream: int) -> int:
        """One call; the number of messages received."""
        if not self.is_chat:
            request = self.bare_request
            new = False
        else:
            n = self.per_session
            new = not self.requests[stream] or (n > 0 and self.done[stream] % n == 0)
            request = self.new_request if new else self.requests[stream]
        count = 0
        first = last = b""
        async for message in self.call(request):
            if not count:
                first = message
            count += 1
            last = message
        if self.is_chat:
            check_completed(last)
            self.done[stream] += 1
            if new:
                started = cpb.StreamChatResponse.FromString(first).turn_started
                self.requests[stream] = chat_request(
                    started.session_id, self.user, self.budget, self.message
                )
        return count


async def throughput_round(
    side: Side, turns: int, server: ServerChild, record: bool = True
) -> None:
    remaining = turns
    events = 0

    async def worker(stream: int) -> None:
        nonlocal remaining, events
        while remaining > 0:
            remaining -= 1
            received = await side.turn(stream)
            events += received

    cpu0, proc0, t0 = server.cpu_seconds(), time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker(k) for k in range(side.streams)))
    elapsed = time.perf_counter() - t0
    await server.quiet()  # the server CPU below includes the turns' background work
    cpu1, proc1 = server.cpu_seconds(), time.process_time()
    if record:
        side.rates.append(events / elapsed)
        side.turn_rates.append(turns / elapsed)
        side.events_per_turn.append(events / turns)
        side.client_cpu_us.append((proc1 - proc0) / turns * 1e6)
        if cpu0 is not None and cpu1 is not None:
            side.server_cpu_us.append((cpu1 - cpu0) / turns * 1e6)


async def latency_round(side: Side, calls: int, server: ServerChild) -> None:
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        await side.turn(0)
        samples.append(time.perf_counter() - t0)
    side.p50_ms.append(median(samples) * 1e3)
    await server.quiet()


@dataclass
class Checked:
    """A conversation run turn by turn, every event parsed and checked."""

    sizes: list[list[int]] = field(default_factory=list)  # per turn, the messages' sizes
    kept: list[int] = field(default_factory=list)  # history messages in the context
    tokens: list[int] = field(default_factory=list)  # prompt tokens
    summary_from: int = 0  # first turn with a compression summary in its context


async def checked_conversation(
    channel: grpc.aio.Channel, turns: int, budget: int, message: str
) -> Checked:
    call: Call = channel.unary_stream(CHAT_METHOD, _identity, _identity)
    checked = Checked()
    session_id = ""
    for k in range(1, turns + 1):
        raw = [m async for m in call(chat_request(session_id, CHECK_USER, budget, message))]
        events = [cpb.StreamChatResponse.FromString(m) for m in raw]
        kinds = [e.WhichOneof("event") for e in events]
        if kinds[0] != "turn_started" or kinds[-1] != "turn_completed" or "usage" not in kinds:
            raise SystemExit(f"unexpected StreamChat events: {kinds}")
        text = "".join(e.text_delta.text for e in events if e.WhichOneof("event") == "text_delta")
        done, started = events[-1].turn_completed, events[0].turn_started
        if done.status != cpb.TURN_STATUS_OK or done.final_text != text or message not in text:
            raise SystemExit(f"StreamChat answered {done}")
        if started.turn_index != k:
            raise SystemExit(f"turn {k} of a conversation has turn_index {started.turn_index}")
        session_id = started.session_id
        checked.sizes.append([len(m) for m in raw])
        checked.kept.append(started.context.history_kept)
        checked.tokens.append(started.context.total_tokens)
        if started.context.summary_included and not checked.summary_from:
            checked.summary_from = k
    return checked


@dataclass
class Workload:
    """A user message, the conversation checked with it, and its bare and chat sides."""

    label: str
    message: str
    checked: Checked
    sizes: list[int]  # the messages of a turn mid-conversation
    bare: Side
    chat: Side

    @property
    def ratio(self) -> float:
        return median([c / b for c, b in zip(self.chat.rates, self.bare.rates, strict=True)])


async def workload(
    channel: grpc.aio.Channel, args: argparse.Namespace, label: str, message: str
) -> Workload:
    chat_call: Call = channel.unary_stream(CHAT_METHOD, _identity, _identity)
    bare_call: Call = channel.unary_stream(STREAM_METHOD, _identity, _identity)
    checked = await checked_conversation(channel, args.per_session or 25, args.budget, message)
    sizes = checked.sizes[len(checked.sizes) // 2]  # a turn mid-conversation
    bare_request = array.array("I", sizes).tobytes()
    got = [len(m) async for m in bare_call(bare_request)]
    if got != sizes:
        raise SystemExit(f"Stream returned sizes {got}, expected {sizes}")
    bare = Side(f"bare stream, {label}", bare_call, args.streams, bare_request=bare_request)
    chat = Side(
        f"StreamChat, {label}",
        chat_call,
        args.streams,
        per_session=args.per_session,
        budget=args.budget,
        message=message,
    )
    return Workload(label, message, checked, sizes, bare, chat)


def describe(w: Workload) -> str:
    c, sizes = w.checked, w.sizes
    summary = (
        f"compression summary in the context from turn {c.summary_from}"
        if c.summary_from
        else "no compression summary"
    )
    return (
        f"{w.label}: user message {len(w.message.split())} words; one turn {len(sizes)} events "
        f"= TurnStarted + {len(sizes) - 3} TextDelta + Usage + TurnCompleted, "
        f"{sum(sizes)} bytes; over a checked conversation of {len(c.kept)} turns the context "
        f"held {min(c.kept)}-{max(c.kept)} history messages, {min(c.tokens)}-{max(c.tokens)} "
        f"prompt tokens, {summary}"
    )


async def run(args: argparse.Namespace) -> int:
    print(machine_note(), flush=True)
    server = spawn_server(__file__, args.log_level)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            typical = await workload(
                channel, args, "typical answers", user_message(args.user_words)
            )
            short = await workload(channel, args, "short answers", USER_MESSAGE)
            first = Side(
                "StreamChat, typical, first turns",
                typical.chat.call,
                args.streams,
                per_session=1,
                user=NEW_USER,
                budget=args.budget,
                message=typical.message,
            )
            sides = (typical.bare, typical.chat, first, short.bare, short.chat)
            for side in sides:  # warm-up, not recorded
                await throughput_round(side, args.warmup, server, record=False)
            for _ in range(args.rounds):
                for side in sides:
                    await throughput_round(side, args.turns, server)
            for _ in range(args.rounds):
                for side in sides:
                    await latency_round(side, args.latency_calls, server)
    finally:
        server.stop()

    conversation = (
        f"conversations of {args.per_session} turns (a new session every {args.per_session} "
        f"turns per stream)"
        if args.per_session
        else "one session per stream for the whole run"
    )
    print(
        f"{NAME}: {args.streams} concurrent streams, {args.turns} turns/round, {args.rounds} "
        f"rounds per side, alternating; echo provider (3 words per delta); server log level "
        f"{args.log_level}; token budget {args.budget or 'server default (8000)'}; "
        f"{conversation}"
    )
    print(describe(typical))
    print(describe(short))
    rows = []
    for side in sides:
        server_cpu = f"{median(side.server_cpu_us):.0f}" if side.server_cpu_us else "n/a"
        rows.append(
            [
                side.name,
                f"{median(side.events_per_turn):.1f}",
                f"{median(side.turn_rates):.0f}",
                f"{median(side.rates):.0f}",
                f"{min(side.rates):.0f}-{max(side.rates):.0f}",
                f"{median(side.p50_ms):.2f}",
                server_cpu,
                f"{median(side.client_cpu_us):.0f}",
            ]
        )
    print_table(
        [
            "side",
            "events/turn",
            "turns/s",
            "events/s",
            "range",
            "p50 ms/turn @1",
            "server CPU us/turn",
            "client CPU us/turn",
        ],
        rows,
    )
    for w in (typical, short):
        pairs = [c / b for c, b in zip(w.chat.rates, w.bare.rates, strict=True)]
        cpu = ""
        if w.chat.server_cpu_us and w.bare.server_cpu_us:
            cpu = (
                f"; server CPU per turn bare/StreamChat "
                f"{median(w.bare.server_cpu_us) / median(w.chat.server_cpu_us):.3f}"
            )
        print(
            f"ratio StreamChat/bare events/s, {w.label} ({len(w.sizes)} events a turn): "
            f"{w.ratio:.3f} = median of {len(pairs)} round pairs (range {min(pairs):.3f}-"
            f"{max(pairs):.3f}){cpu}"
        )
    first_ratio = median([n / b for n, b in zip(first.rates, typical.bare.rates, strict=True)])
    print(f"for information, StreamChat first turns/bare events/s, typical: {first_ratio:.3f}")
    verdict = "meets" if short.ratio >= TARGET else "misses"
    print(
        f"short answers {verdict} the target: {short.ratio:.3f} (a turn's own work, the same "
        f"for every answer length, is spread over {len(short.sizes)} events)"
    )
    ratio = typical.ratio
    print(result_line(NAME, ratio, TARGET, ratio >= TARGET))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--log-level", default="INFO", help="server log level, or OFF (default INFO, as served)"
    )
    parser.add_argument("--rounds", type=int, help="rounds per side (default 8, quick 2)")
    parser.add_argument("--turns", type=int, help="turns per round (default 300, quick 60)")
    parser.add_argument("--streams", type=int, default=8, help="concurrent streams (default 8)")
    parser.add_argument(
        "--budget", type=int, default=0, help="prompt token budget, 0 for the server's (8000)"
    )
    parser.add_argument(
        "--user-words",
        type=int,
        default=TYPICAL_WORDS,
        help="the typical workload's user message in words (the echo answer quotes it: about "
        f"words/3 deltas); default {TYPICAL_WORDS}. The short workload always uses the "
        "15-word message of _common.py",
    )
    parser.add_argument(
        "--per-session",
        type=int,
        default=25,
        help="turns per conversation before a stream starts a new session; 0: never (25)",
    )
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.log_level, [stream_handler()], provider="echo"))
        return 0
    args.rounds = args.rounds or (2 if args.quick else 8)
    args.turns = args.turns or (60 if args.quick else 300)
    args.warmup = 40 if args.quick else 200
    args.latency_calls = 10 if args.quick else 40
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
