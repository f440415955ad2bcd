"""BuildMessages throughput against a trivial echo RPC on the same server.

The server runs in a child process (this script with ``--serve``): contextd's own
``start()`` plus two extra handlers. ``/contextd.bench.Echo/Echo`` is the trivial
echo RPC the target is measured against: a unary method typed like BuildMessages
(it parses the BuildMessagesRequest and sends it back, serialized), so it pays
everything a protobuf gRPC call costs in this server (HTTP/2, the grpc.aio loop,
protobuf parsing and serialization, the GuardInterceptor and its log line) and
nothing else. ``BuildMessages rate / Echo rate`` is then the share of throughput
left once contextd does its real work. ``/contextd.bench.Echo/EchoBytes`` returns
the raw request bytes without parsing them; its ratio is printed for information
(it also leaves out protobuf's own cost). All sides send the very same serialized
BuildMessagesRequest and the client never parses a response, so the client does
the same work on every side.

Rounds go Echo, EchoBytes, BuildMessages, Echo, ... after a warm-up. The rounds of
one cycle met about the same machine load; the result is the median over cycles of
BuildMessages rate / Echo rate (the table also shows the median rate of each side).
Run: ``python bench/build_vs_echo.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
from _common import (
    SHORT_HISTORY,
    SYSTEM_PROMPT,
    USER_MESSAGE,
    machine_note,
    median,
    print_table,
    result_line,
)
from _server import ServerChild, serve, spawn_server
from contextd.v1 import context_pb2 as pb

NAME = "build_vs_echo"
TARGET = 0.95
ECHO_SERVICE = "contextd.bench.Echo"
ECHO_METHOD = f"/{ECHO_SERVICE}/Echo"
ECHO_BYTES_METHOD = f"/{ECHO_SERVICE}/EchoBytes"
BUILD_METHOD = "/contextd.v1.ContextService/BuildMessages"
CONCURRENCY = 32

Call = Callable[[bytes], Awaitable[bytes]]


def _identity(data: bytes) -> bytes:
    return data


# --- server child -------------------------------------------------------------------------


async def _echo(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
    return request


def echo_handler() -> grpc.GenericRpcHandler[Any, Any]:
    typed = grpc.unary_unary_rpc_method_handler(
        _echo,
        request_deserializer=pb.BuildMessagesRequest.FromString,
        response_serializer=pb.BuildMessagesRequest.SerializeToString,
    )
    raw = grpc.unary_unary_rpc_method_handler(
        _echo, request_deserializer=_identity, response_serializer=_identity
    )
    return grpc.method_handlers_generic_handler(ECHO_SERVICE, {"Echo": typed, "EchoBytes": raw})


# --- client -------------------------------------------------------------------------------


def build_request() -> pb.BuildMessagesRequest:
    roles = {"user": pb.ROLE_USER, "assistant": pb.ROLE_ASSISTANT}
    return pb.BuildMessagesRequest(
        system_prompts=[SYSTEM_PROMPT],
        history=[
            pb.Message(id=f"m{i}", role=roles[role], content=text)
            for i, (role, text) in enumerate(SHORT_HISTORY)
        ],
        user_message=USER_MESSAGE,
        token_budget=4096,
        tokenizer="cl100k_base",
    )


@dataclass
class Side:
    name: str
    call: Call
    rates: list[float] = field(default_factory=list)
    server_cpu_us: list[float] = field(default_factory=list)
    client_cpu_us: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)


async def throughput_round(
    side: Side, payload: bytes, calls: int, server: ServerChild, record: bool = True
) -> None:
    remaining = calls

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await side.call(payload)

    cpu0, proc0, t0 = server.cpu_seconds(), time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    elapsed = time.perf_counter() - t0
    cpu1, proc1 = server.cpu_seconds(), time.process_time()
    if record:
        side.rates.append(calls / elapsed)
        side.client_cpu_us.append((proc1 - proc0) / calls * 1e6)
        if cpu0 is not None and cpu1 is not None:
            side.server_cpu_us.append((cpu1 - cpu0) / calls * 1e6)


async def alternating_rounds(
    pairs: Sequence[tuple[Side, ServerChild]], payload: bytes, warmup: int, rounds: int, calls: int
) -> None:
    """A warm-up round per side (not recorded), then ``rounds`` rounds of each side in turn,
    so both sides see the same machine load."""
    for side, server in pairs:
        await throughput_round(side, payload, warmup, server, record=False)
    for _ in range(rounds):
        for side, server in pairs:
            await throughput_round(side, payload, calls, server)


def cost_parser(doc: str | None) -> argparse.ArgumentParser:
    """The options of a throughput comparison: ``--quick``, ``--log-level``, ``--rounds``,
    ``--calls``, and the hidden ``--serve`` its server children are started with."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--quick", action="store_true", help="small counts (smoke test)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--log-level", default="INFO", help="server log level, or OFF (default INFO, as served)"
    )
    parser.add_argument("--rounds", type=int, help="rounds per side (default 10, quick 2)")
    parser.add_argument("--calls", type=int, help="calls per round (default 2000, quick 400)")
    return parser


def set_counts(args: argparse.Namespace) -> None:
    """Rounds, calls per round and warm-up calls, from the options or ``--quick``."""
    args.rounds = args.rounds or (2 if args.quick else 10)
    args.calls = args.calls or (400 if args.quick else 2000)
    args.warmup = 200 if args.quick else 2000


async def builds_off_and_on(
    servers: tuple[ServerChild, ServerChild],
    names: tuple[str, str],
    payload: bytes,
    args: argparse.Namespace,
    metadata: tuple[tuple[str, str], ...] = (),
) -> tuple[Side, Side]:
    """``payload`` as BuildMessages to both servers (the second called with ``metadata``),
    checked to answer the same, then timed in alternating rounds."""
    off_server, on_server = servers
    async with (
        grpc.aio.insecure_channel(f"127.0.0.1:{off_server.port}") as off_channel,
        grpc.aio.insecure_channel(f"127.0.0.1:{on_server.port}") as on_channel,
    ):
        plain = off_channel.unary_unary(BUILD_METHOD, _identity, _identity)
        raw = on_channel.unary_unary(BUILD_METHOD, _identity, _identity)

        async def with_metadata(data: bytes) -> bytes:
            reply: bytes = await raw(data, metadata=metadata)
            return reply

        # Without metadata the on side is called as directly as the off side.
        other: Call = with_metadata if metadata else raw
        if await plain(payload) != await other(payload):
            raise SystemExit(f"BuildMessages answered differently with {names[1]}")
        off, on = Side(names[0], plain), Side(names[1], other)
        pairs = ((off, off_server), (on, on_server))
        await alternating_rounds(pairs, payload, args.warmup, args.rounds, args.calls)
    return off, on


def report_cost(
    name: str, payload: bytes, args: argparse.Namespace, off: Side, on: Side, target: float
) -> None:
    """The throughput table of two sides and the RESULT line of ``on`` / ``off``, the
    median of the round pairs' ratios."""
    print(
        f"{name}: BuildMessages, request {len(payload)} bytes; {args.calls} calls/round, "
        f"{args.rounds} rounds per side, alternating; server log level {args.log_level}"
    )
    rows = [
        [
            side.name,
            f"{median(side.rates):.0f}",
            f"{min(side.rates):.0f}-{max(side.rates):.0f}",
            f"{median(side.server_cpu_us):.0f}" if side.server_cpu_us else "n/a",
        ]
        for side in (off, on)
    ]
    print_table(["side", "calls/s", "range", "server CPU us/call"], rows)
    ratios = [b / a for a, b in zip(off.rates, on.rates, strict=True)]
    ratio = median(ratios)
    print(
        f"ratio {on.name} / {off.name} calls/s: {ratio:.3f} = median of {len(ratios)} "
        f"round pairs (range {min(ratios):.3f}-{max(ratios):.3f})"
    )
    print(result_line(name, ratio, target, ratio >= target))


async def latency_round(side: Side, payload: bytes, calls: int) -> None:
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        await side.call(payload)
        samples.append(time.perf_counter() - t0)
    side.p50_ms.append(median(samples) * 1e3)


async def check(channel: grpc.aio.Channel, echo: Call, payload: bytes) -> None:
    """Every side must answer correctly before anything is timed."""
    if pb.BuildMessagesRequest.FromString(
        await echo(payload)
    ) != pb.BuildMessagesRequest.FromString(payload):
        raise SystemExit("Echo did not return the request")
    stub = channel.unary_unary(
        BUILD_METHOD,
        request_serializer=pb.BuildMessagesRequest.SerializeToString,
        response_deserializer=pb.BuildMessagesResponse.FromString,
    )
    response: pb.BuildMessagesResponse = await stub(pb.BuildMessagesRequest.FromString(payload))
    want = 1 + len(SHORT_HISTORY) + 1
    if len(response.messages) != want or response.report.history_kept != len(SHORT_HISTORY):
        raise SystemExit(f"BuildMessages kept {len(response.messages)} messages, expected {want}")


async def run(args: argparse.Namespace) -> int:
    payload = build_request().SerializeToString()
    print(machine_note(), flush=True)
    server = spawn_server(__file__, args.log_level)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            echo_call: Call = channel.unary_unary(ECHO_METHOD, _identity, _identity)
            raw_call: Call = channel.unary_unary(ECHO_BYTES_METHOD, _identity, _identity)
            build_call: Call = channel.unary_unary(BUILD_METHOD, _identity, _identity)
            await check(channel, echo_call, payload)
            await check(channel, raw_call, payload)
            echo = Side("Echo", echo_call)
            raw = Side("EchoBytes", raw_call)
            build = Side("BuildMessages", build_call)
            sides = (echo, raw, build)
            for side in sides:  # warm-up, not recorded
                await throughput_round(side, payload, args.warmup, server, record=False)
            for _ in range(args.rounds):
                for side in sides:
                    await throughput_round(side, payload, args.calls, server)
            for _ in range(args.rounds):
                for side in sides:
                    await latency_round(side, payload, args.latency_calls)
    finally:
        server.stop()

    print(
        f"{NAME}: request {len(payload)} bytes ({len(SHORT_HISTORY)} history messages, "
        f"budget 4096, cl100k_base); {CONCURRENCY} callers, {args.calls} calls/round, "
        f"{args.rounds} rounds per side, alternating; server log level {args.log_level}"
    )
    rows = []
    for side in sides:
        server_cpu = f"{median(side.server_cpu_us):.0f}" if side.server_cpu_us else "n/a"
        rows.append(
            [
                side.name,
                f"{median(side.rates):.0f}",
                f"{min(side.rates):.0f}-{max(side.rates):.0f}",
                f"{median(side.p50_ms):.3f}",
                server_cpu,
                f"{median(side.client_cpu_us):.0f}",
            ]
        )
    print_table(
        ["side", "calls/s", "range", "p50 ms @1", "server CPU us/call", "client CPU us/call"],
        rows,
    )
    pair_ratios = [b / e for b, e in zip(build.rates, echo.rates, strict=True)]
    ratio = median(pair_ratios)
    p50_ratio = median([b / e for b, e in zip(build.p50_ms, echo.p50_ms, strict=True)])
    print(
        f"ratio BuildMessages/Echo calls/s: {ratio:.3f} = median of {len(pair_ratios)} round "
        f"pairs (range {min(pair_ratios):.3f}-{max(pair_ratios):.3f}; ratio of median rates "
        f"{median(build.rates) / median(echo.rates):.3f})"
    )
    raw_ratio = median([b / e for b, e in zip(build.rates, raw.rates, strict=True)])
    print(f"for information, BuildMessages/EchoBytes calls/s: {raw_ratio:.3f}")
    if build.server_cpu_us and echo.server_cpu_us:
        cpu_ratio = median(echo.server_cpu_us) / median(build.server_cpu_us)
        print(f"server CPU per call Echo/BuildMessages: {cpu_ratio:.3f}")
    print(f"p50 latency @1 caller BuildMessages/Echo: {p50_ratio:.2f}x")
    print(result_line(NAME, ratio, TARGET, ratio >= TARGET))
    return 0


def main() -> int:
    args = cost_parser(__doc__).parse_args()
    if args.serve:
        asyncio.run(serve(args.log_level, [echo_handler()]))
        return 0
    set_counts(args)
    args.latency_calls = 50 if args.quick else 300
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
