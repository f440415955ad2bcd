"""Time to first token through /v1/messages (streaming, the ``anthropic`` SDK) against
the same turn through StreamChat, and against the fake provider read directly.

_first_token.py's processes, fake and method, with contextd serving
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

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

import anthropic
from _common import result_line
from _first_token import DIRECT, STREAMCHAT, Piece, arguments, continued_turns, served
from first_delta import USER, Side, user_text

NAME = "anthropic_first_token"
THROUGH = "/v1/messages (anthropic SDK)"
ADDED_MS = 0.3  # the most the front may add to StreamChat's overhead


def through_messages(web: str) -> tuple[list[Side], Any]:
    """Session-mode turns through /v1/messages (``X-Contextd-Session``): the new
    message only."""
    client = anthropic.AsyncAnthropic(api_key="unused", base_url=f"http://{web}", max_retries=0)

    async def send(tag: str, session_id: str) -> AsyncIterator[Piece]:
        stream = await client.messages.with_raw_response.create(
            model="fake-model",
            max_tokens=256,
            messages=[{"role": "user", "content": user_text(tag)}],
            metadata={"user_id": USER},
            stream=True,
            extra_headers={"X-Contextd-Session": session_id or "new"},
        )
        yield "next", stream.headers["x-contextd-session-id"]
        async for event in await stream.parse():
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                yield "text", event.delta.text

    return [Side(THROUGH, continued_turns("/v1/messages", send))], client


def main() -> int:
    args = arguments(__doc__.splitlines()[0] if __doc__ else None)
    first_token, overhead = asyncio.run(served(NAME, args, "--anthropic-api", through_messages))
    print(
        f"send->first token p50: /v1/messages {first_token[THROUGH]:.2f} ms, StreamChat "
        f"{first_token[STREAMCHAT]:.2f} ms, direct {first_token[DIRECT]:.2f} "
        f"ms; overhead after the fake's first content: /v1/messages {overhead[THROUGH]:.2f} "
        f"ms, StreamChat {overhead[STREAMCHAT]:.2f} ms"
    )
    ratio = overhead[THROUGH] / (overhead[STREAMCHAT] + ADDED_MS)
    print(result_line(NAME, ratio, 1.0, ratio <= 1.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
