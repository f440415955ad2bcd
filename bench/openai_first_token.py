"""Time to first token through /v1/chat/completions and /v1/responses (streaming) against
the same turn through StreamChat, and against the fake provider read directly.

The processes and the fake are first_delta.py's, started by _first_token.py: this
client; the fake OpenAI-compatible server (first_delta.py with ``--fake``: the role chunk
at once, the first content chunk after ``--ttft`` seconds, the rest ``--frame-delay``
apart); contextd (``python -m contextd serve --provider openai --provider-base-url
http://127.0.0.1:<fake>/v1 --web-port 0 --openai-api``, log level INFO). Six sides,
alternating by rounds:

- StreamChat: session-mode turns on the native port (first_delta.py's client);
- /v1: the same turns through the web port with the official ``openai`` SDK
  (``AsyncOpenAI``, ``stream=True`` with usage), session mode (``X-Contextd-Session``),
  the caller sending only its new message;
- /v1 raw: the same requests read as plain server-sent events (aiohttp and json, no
  SDK): the front's own share, as the StreamChat client reads raw bytes;
- /v1/responses: the same turns through the Responses API with the ``openai`` SDK
  (``responses.create(stream=True)``), each turn continuing the one before with
  ``previous_response_id`` (the first of a conversation inline);
- /v1/responses raw: the same requests read as plain server-sent events;
- direct: the SDK reading the fake itself (no contextd), the floor under both.

Per turn: t0 just before the client sends; the first token = the first TextDelta, or the
first chunk with content; the fake stamps when it starts writing its first content chunk.
Overhead = first token at the client - that stamp (CLOCK_MONOTONIC, one clock for every
process). Turns are matched to the fake's stamps by a tag in the user message. The turns
are conversations of 25 turns, one at a time with a pause of ``--gap`` s (contextd's
background work after each turn ends in it). **RESULT ratio = the larger overhead p50 of
/v1 and /v1/responses read raw ÷ (StreamChat's + 0.3 ms); target ≤ 1**, and each under
the direct call's + 1 ms: what a front adds to the native call after the model's first
token, both read as bytes the way the StreamChat side reads them. The SDK sides are
printed beside: they add the SDK's own parsing, the same against any server (the
Responses API sends two events before its first text delta, and the SDK builds both).
Run: ``python bench/openai_first_token.py [--quick]``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import openai
from _common import result_line
from _first_token import DIRECT, STREAMCHAT, Piece, arguments, continued_turns, served
from first_delta import USER, Side, user_text

NAME = "openai_first_token"
CHAT = "/v1 (openai SDK)"
RAW = "/v1 (raw SSE)"
RESPONSES = "/v1/responses (openai SDK)"
RESPONSES_RAW = "/v1/responses (raw SSE)"
ADDED_MS = 0.3  # the most a front may add to StreamChat's overhead
OVER_DIRECT_MS = 1.0  # and to the direct call's
LOOK_UP: Any = {"type": "function", "name": "look_up", "parameters": {"type": "object"}}


def through_v1(web: str) -> tuple[list[Side], Any]:
    """Chat Completions in session mode (``X-Contextd-Session``), and the Responses API
    continuing each response with ``previous_response_id``: the new message only."""
    client = openai.AsyncOpenAI(api_key="unused", base_url=f"http://{web}/v1", max_retries=0)
    http = aiohttp.ClientSession()

    async def chat(tag: str, session_id: str) -> AsyncIterator[Piece]:
        stream = await client.chat.completions.create(
            model="fake-model",
            messages=[{"role": "user", "content": user_text(tag)}],
            user=USER,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={"X-Contextd-Session": session_id or "new"},
        )
        named = False
        async with stream:
            async for chunk in stream:
                if not named:
                    named = True
                    yield "next", (chunk.model_extra or {})["contextd"]["session_id"]
                if chunk.choices and chunk.choices[0].delta.content:
                    yield "text", chunk.choices[0].delta.content

    async def raw(tag: str, session_id: str) -> AsyncIterator[Piece]:
        body = {
            "model": "fake-model",
            "messages": [{"role": "user", "content": user_text(tag)}],
            "user": USER,
            "stream": True,
        }
        headers = {"X-Contextd-Session": session_id or "new"}
        named = False
        async with http.post(f"http://{web}/v1/chat/completions", json=body, headers=headers) as r:
            async for line in r.content:
                if not line.startswith(b"data: {"):
                    continue
                chunk = json.loads(line[6:])
                if not named:
                    named = True
                    yield "next", chunk["contextd"]["session_id"]
                if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                    yield "text", chunk["choices"][0]["delta"]["content"]

    async def responses(tag: str, previous: str) -> AsyncIterator[Piece]:
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
        async with stream:
            async for event in stream:
                if event.type == "response.output_text.delta" and event.delta:
                    yield "text", event.delta
                elif event.type == "response.completed":
                    yield "next", event.response.id

    async def responses_raw(tag: str, previous: str) -> AsyncIterator[Piece]:
        body: dict[str, Any] = {
            "model": "fake-model",
            "input": user_text(tag),
            "user": USER,
            "tools": [LOOK_UP],
            "stream": True,
        }
        if previous:
            body["previous_response_id"] = previous
        async with http.post(f"http://{web}/v1/responses", json=body) as r:
            async for line in r.content:
                if not line.startswith(b"data: {"):
                    continue
                event = json.loads(line[6:])
                if event["type"] == "response.output_text.delta" and event["delta"]:
                    yield "text", event["delta"]
                elif event["type"] == "response.completed":
                    yield "next", event["response"]["id"]

    sides = [
        Side(CHAT, continued_turns("/v1", chat)),
        Side(RAW, continued_turns("/v1 raw", raw)),
        Side(RESPONSES, continued_turns("/v1/responses", responses)),
        Side(RESPONSES_RAW, continued_turns("/v1/responses raw", responses_raw)),
    ]
    return sides, _Clients(client, http)


class _Clients:
    """The clients of the sides, closed together."""

    def __init__(self, *clients: openai.AsyncOpenAI | aiohttp.ClientSession) -> None:
        self._clients = clients

    async def close(self) -> None:
        for client in self._clients:
            await client.close()


def main() -> int:
    args = arguments(__doc__.splitlines()[0] if __doc__ else None)
    first_token, overhead = asyncio.run(served(NAME, args, "--openai-api", through_v1))
    print(
        f"send->first token p50: /v1 {first_token[CHAT]:.2f} ms, /v1/responses "
        f"{first_token[RESPONSES]:.2f} ms, StreamChat {first_token[STREAMCHAT]:.2f} ms, "
        f"direct {first_token[DIRECT]:.2f} ms; overhead after the fake's first "
        f"content: /v1 {overhead[CHAT]:.2f} ms (raw SSE {overhead[RAW]:.2f}), /v1/responses "
        f"{overhead[RESPONSES]:.2f} ms (raw SSE {overhead[RESPONSES_RAW]:.2f}), "
        f"StreamChat {overhead[STREAMCHAT]:.2f} ms, direct {overhead[DIRECT]:.2f} ms"
    )
    worst = max(overhead[RAW], overhead[RESPONSES_RAW])
    ratio = worst / (overhead[STREAMCHAT] + ADDED_MS)
    passed = ratio <= 1.0 and worst < overhead[DIRECT] + OVER_DIRECT_MS
    print(result_line(NAME, ratio, 1.0, passed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
