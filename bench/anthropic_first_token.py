"""Time to first token through /v1/messages (streaming, the ``anthropic`` SDK) against
the same turn through StreamChat, and against the fake provider read directly.

openai_first_token.py's processes, fake and method, with contextd serving
``--anthropic-api`` instead: the fake OpenAI-compatible model (first_delta.py with
``--fake``: the first content chunk after ``--ttft`` seconds, the rest ``--frame-delay``
apart) runs every turn, so the figure is what speaking Anthropic's protocol to contextd
costs, whatever the model behind. Three sides, alternating by rounds:

- StreamChat: session-mode turns on the native port (first_delta.py's client);
- /v1/messages: the same turns through the web port with the official ``anthropic`` SDK
  (``AsyncAnthropic``, ``stream=True``), session mode (``X-Contextd-Session``), the caller
  sending only its new message;
- direct: the openai SDK reading the fake itself (no contextd), the floor under both.

Overhead = first token at the client - the fake's stamp of its first content chunk (one
clock for every process). **RESULT ratio = overhead p50 through /v1/messages ÷ (the
same through StreamChat + 0.3 ms); target ≤ 1**: the Messages front adds at most 0.3 ms
after the model's first token. Run: ``python bench/anthropic_first_token.py [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any

import anthropic
import grpc.aio
import openai
from _common import result_line
from first_delta import (
    ANSWER,
    TURNS_PER_SESSION,
    USER,
    FakeChild,
    Side,
    Turn,
    contextd_side,
    direct_side,
    user_text,
)
from openai_first_token import add_arguments, alternate, counts, served, summarize

from tests.support.fakes.helpers import FAKE_KEY

NAME = "anthropic_first_token"
THROUGH = "/v1/messages (anthropic SDK)"
ADDED_MS = 0.3  # the most the front may add to StreamChat's overhead


def anthropic_side(client: anthropic.AsyncAnthropic) -> Callable[[str], Any]:
    """Session-mode turns through /v1/messages: the new message only, a new session
    every TURNS_PER_SESSION turns (as the StreamChat side)."""
    session_id = ""
    turns = 0

    async def run_turn(tag: str) -> Turn:
        nonlocal session_id, turns
        first = 0
        text = []
        t0 = time.monotonic_ns()
        stream = await client.messages.with_raw_response.create(
            model="fake-model",
            max_tokens=256,
            messages=[{"role": "user", "content": user_text(tag)}],
            metadata={"user_id": USER},
            stream=True,
            extra_headers={"X-Contextd-Session": session_id or "new"},
        )
        named = stream.headers["x-contextd-session-id"]
        async for event in await stream.parse():
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                if not first:
                    first = time.monotonic_ns()
                text.append(event.delta.text)
        end = time.monotonic_ns()
        if "".join(text) != ANSWER:
            raise SystemExit("the /v1/messages stream did not return the answer")
        turns += 1
        session_id = "" if turns % TURNS_PER_SESSION == 0 else named
        return Turn(tag, t0, first, end)

    return run_turn


async def measure(args: argparse.Namespace, fake: FakeChild, native: str, web: str) -> list[Side]:
    async with grpc.aio.insecure_channel(native) as channel:
        through = anthropic.AsyncAnthropic(
            api_key="unused", base_url=f"http://{web}", max_retries=0
        )
        direct = openai.AsyncOpenAI(
            api_key=FAKE_KEY, base_url=f"http://127.0.0.1:{fake.port}/v1", max_retries=0
        )
        try:
            sides = [
                Side("StreamChat", contextd_side(channel)),
                Side(THROUGH, anthropic_side(through)),
                Side("direct (openai SDK)", direct_side(direct)),
            ]
            await alternate(args, sides)
        finally:
            await through.close()
            await direct.close()
    return sides


async def run(args: argparse.Namespace) -> int:
    sides, records = await served(args, "--anthropic-api", measure)
    first_token, overhead = summarize(NAME, args, sides, records)
    print(
        f"send->first token p50: /v1/messages {first_token[THROUGH]:.2f} ms, StreamChat "
        f"{first_token['StreamChat']:.2f} ms, direct {first_token['direct (openai SDK)']:.2f} "
        f"ms; overhead after the fake's first content: /v1/messages {overhead[THROUGH]:.2f} "
        f"ms, StreamChat {overhead['StreamChat']:.2f} ms"
    )
    ratio = overhead[THROUGH] / (overhead["StreamChat"] + ADDED_MS)
    print(result_line(NAME, ratio, 1.0, ratio <= 1.0))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_arguments(parser)
    args = parser.parse_args()
    counts(args)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
