"""The synthetic tool-using agent of context_editing.py: its tools' results, a scripted
model behind a fake OpenAI-compatible server, and the prompt cache that server simulates.

The model is a script, one step per request: step k calls ``search`` (or, every
``HUGE_EVERY`` steps, ``fetch`` of a whole page); the step after the last answers.
Some steps need an earlier result again (``NEEDS``): if the prompt still holds that
result the model goes on; if it reads the cleared placeholder, the model calls
``recall_tool_result`` (contextd answers it inline, one more request); if the result
is gone (dropped for the budget) the model calls the tool again. Every choice depends
on the prompt alone, so each side of the benchmark gets the same script.

The fake records every chat request and bills it as a provider's prompt cache would
(Anthropic's: a breakpoint at the end of the prompt's stable part): each request's
prefix up to its breakpoint is written to the cache; a later request reads the longest
written prefix it starts with. Per request: ``read`` (served from the cache),
``written`` (the new part up to the breakpoint) and ``uncached`` (after it: the
question a turn ends with). Tokens are cl100k_base counts of each message's JSON.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from contextd.core.tokens import Tokenizer, TokenizerRegistry

STEPS = 100
HUGE_EVERY = 25  # every 25th step fetches a whole page
# Step -> the earlier step whose result it needs again.
NEEDS = {40: 8, 60: 25, 75: 33, 90: 50, 97: 70}
TOOLS = ("search", "fetch")
_WORDS = [
    "latency",
    "throughput",
    "cache",
    "index",
    "shard",
    "replica",
    "quorum",
    "lease",
    "token",
    "budget",
    "prompt",
    "summary",
    "window",
    "tool",
    "result",
    "search",
    "fetch",
    "page",
    "rank",
    "score",
    "snippet",
    "title",
    "url",
    "answer",
]


def call_id(step: int, again: bool = False) -> str:
    return f"call_{step}_again" if again else f"call_{step}"


def tool_result(step: int) -> str:
    """A search result of 1-5k tokens (JSON lines), or a fetched page of about 20k."""
    rng = random.Random(step)
    if step % HUGE_EVERY == HUGE_EVERY - 1:
        paragraphs = [" ".join(rng.choices(_WORDS, k=80)) for _ in range(260)]
        return f"# Page {step}\n\n" + "\n\n".join(paragraphs)
    lines = []
    for rank in range(rng.randint(12, 60)):
        snippet = " ".join(rng.choices(_WORDS, k=rng.randint(50, 70)))
        lines.append(
            json.dumps(
                {
                    "rank": rank,
                    "title": f"Result {step}.{rank}",
                    "url": f"https://docs.example/{step}/{rank}",
                    "score": round(rng.random(), 4),
                    "snippet": snippet,
                }
            )
        )
    return "\n".join(lines)


def step_call(step: int) -> tuple[str, str, str]:
    """(id, tool, arguments) of step ``step``'s call."""
    if step % HUGE_EVERY == HUGE_EVERY - 1:
        return call_id(step), "fetch", json.dumps({"url": f"https://docs.example/page/{step}"})
    return call_id(step), "search", json.dumps({"q": f"question {step}"})


@dataclass
class Billed:
    """One chat request as the simulated cache billed it."""

    tokens: int
    read: int
    written: int
    uncached: int

    @property
    def billed(self) -> int:
        """What is paid at or above the plain input price: uncached input and writes."""
        return self.uncached + self.written


@dataclass
class PromptCache:
    """Prefixes written so far, by a digest of their messages."""

    _prefixes: set[str] = field(default_factory=set)
    _tok: Tokenizer = field(default_factory=lambda: TokenizerRegistry().get("cl100k_base"))

    def bill(self, messages: list[dict[str, Any]]) -> Billed:
        texts = [json.dumps(m, sort_keys=True, ensure_ascii=False) for m in messages]
        counts = [self._tok.count(t) for t in texts]
        # The breakpoint: after the history, before a trailing user message (the turn's
        # question); a request that goes on after tool results caches all of it.
        end = len(messages) - 1 if messages and messages[-1]["role"] == "user" else len(messages)
        chain, digests = hashlib.sha256(), []
        for text in texts:
            chain.update(text.encode())
            digests.append(chain.copy().hexdigest())
        hit = max((k + 1 for k in range(end) if digests[k] in self._prefixes), default=0)
        if end:
            self._prefixes.add(digests[end - 1])
        read = sum(counts[:hit])
        written = sum(counts[hit:end])
        return Billed(sum(counts), read, written, sum(counts[end:]))


class ScriptedModel:
    """The model's next step, read from the prompt it is sent."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def reply(self, messages: list[dict[str, Any]]) -> tuple[str, str, str] | str:
        """A tool call (id, name, arguments), or the final answer's text."""
        # The newest result is always in the prompt (older ones may be trimmed away).
        done = [_PLAIN.fullmatch(m.get("tool_call_id", "")) for m in messages]
        step = max((int(d.group(1)) + 1 for d in done if d), default=0)
        last = messages[-1]
        if last["role"] == "tool" and last.get("tool_call_id", "").startswith("recall_"):
            pass  # the recalled result is in: go on with the plan
        elif step in NEEDS and last.get("tool_call_id") == call_id(step - 1):
            needed = call_id(NEEDS[step])
            contents = {m.get("tool_call_id"): m.get("content", "") for m in messages}
            text = contents.get(needed)
            if text is not None and text.startswith("[tool result cleared"):
                return f"recall_{step}", "recall_tool_result", json.dumps({"tool_call_id": needed})
            if text is None and call_id(NEEDS[step], again=True) not in contents:
                _, tool, args = step_call(NEEDS[step])
                return call_id(NEEDS[step], again=True), tool, args
        if step >= self.steps:
            return "Here is what I found."
        return step_call(step)


_PLAIN = re.compile(r"call_(\d+)")


def again_result(tool_call: str) -> str | None:
    """The result of a call made again (the same as the first time), else None."""
    found = re.fullmatch(r"call_(\d+)_again", tool_call)
    return tool_result(int(found.group(1))) if found else None


class FakeProvider:
    """The fake OpenAI-compatible server: the scripted model, billed by the cache."""

    def __init__(self, steps: int) -> None:
        self.model = ScriptedModel(steps)
        self.cache = PromptCache()
        self.bills: list[Billed] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    def reset(self) -> None:
        self.cache = PromptCache()
        self.bills = []

    async def start(self) -> None:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    def answer(self, messages: list[dict[str, Any]]) -> tuple[str, str, str] | str:
        """The model's step for a request made directly (the LangChain side), billed."""
        self.bills.append(self.cache.bill(messages))
        return self.model.reply(messages)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("tools"):  # work after a turn (a summary): not the agent's
            step: tuple[str, str, str] | str = "A summary."
        else:
            step = self.answer(body["messages"])
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in _chunks(step):
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response


def _chunks(step: tuple[str, str, str] | str) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}

    if isinstance(step, str):
        return [chunk({"role": "assistant", "content": step}), chunk({}, "stop")]
    call_id_, name, arguments = step
    call = {"index": 0, "id": call_id_, "type": "function"}
    call["function"] = {"name": name, "arguments": arguments}
    return [chunk({"role": "assistant", "tool_calls": [call]}), chunk({}, "tool_calls")]
