"""A fake OpenAI-compatible model that answers by rule instead of by script, in a thread
of its own: contextd (``--provider openai --provider-base-url``) talks to it while a
test's sync or async client talks to contextd.

The rules, by the request (contextd's background calls after a turn are told to
extract memories or to summarize):

- after-turn work: ``{"facts": []}`` at once;
- the last message is a tool result: ``the tool said: <its content>``;
- the last user message mentions "weather" and the ``get_weather`` tool is offered
  (or an MCP tool a host names ``mcp__<server>__get_weather``): a call ``call_w1`` of it
  with ``{"city": "Paris"}``;
- the last user message starts with "fail": an HTTP 400 from the provider;
- the last user message starts with "slow": 40 pieces, 50 ms apart;
- anything else: ``fake answer to: <message>`` in three pieces, with usage
  (prompt 11, completion 7, 3 of them cached).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from tests.support.fakes.llm_server import FakeLLMServer, JSONReply, Reply, StreamReply
from tests.support.fakes.openai_sse import error_body, split, text_frames, tool_call_frames

WEATHER_CALL = ("call_w1", "get_weather", '{"city": "Paris"}')
SLOW_PIECES = 40
SLOW_DELAY = 0.05
Served = TypeVar("Served", bound=FakeLLMServer)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p["text"]) for p in content if p.get("type") == "text")
    return str(content or "")


class RuleModel(FakeLLMServer):
    def __init__(self) -> None:
        super().__init__(base_path="/v1")

    def _next_reply(self) -> Reply:
        body = self.requests[-1].body
        if not isinstance(body, dict) or _after_turn(body):
            return StreamReply(text_frames(['{"facts": []}'], usage=(50, 5)))
        messages = body.get("messages") or [{}]
        last = messages[-1]
        if last.get("role") == "tool":
            return StreamReply(text_frames([f"the tool said: {_text(last.get('content'))}"]))
        user = _text(next((m["content"] for m in reversed(messages) if m["role"] == "user"), ""))
        tools = [t["function"]["name"] for t in body.get("tools", ())]
        named = [n for n in tools if n == "get_weather" or n.endswith("__get_weather")]
        if "weather" in user and named:
            call_id, _, arguments = WEATHER_CALL
            return StreamReply(tool_call_frames([(call_id, named[0], arguments)]))
        if user.startswith("fail"):
            return JSONReply(400, error_body("the fake refuses", "invalid_request_error"))
        if user.startswith("slow"):
            pieces = [f"w{i} " for i in range(SLOW_PIECES)]
            return StreamReply(text_frames(pieces), frame_delay=SLOW_DELAY)
        answer = f"fake answer to: {user}"
        return StreamReply(text_frames(split(answer, 3), usage=(11, 7), cached_tokens=3))

    def chat_requests(self) -> list[dict[str, Any]]:
        """The bodies of the chat turns' model calls."""
        return [
            r.body for r in self.requests if isinstance(r.body, dict) and not _after_turn(r.body)
        ]

    def after_turn_requests(self) -> list[dict[str, Any]]:
        """The bodies of the calls of contextd's work after a turn."""
        return [r.body for r in self.requests if isinstance(r.body, dict) and _after_turn(r.body)]


def _after_turn(body: dict[str, Any]) -> bool:
    """A call of contextd's work after a turn (memories, summaries), by its instructions."""
    messages = body.get("messages") or [{}]
    first = messages[0] if isinstance(messages[0], dict) else {}
    system = _text(first.get("content")) if first.get("role") == "system" else ""
    return after_turn_instructions(system)


def after_turn_instructions(system: str) -> bool:
    """Whether a system prompt is that of contextd's work after a turn."""
    return any(
        words in system
        for words in (
            "extract long-term memories",
            "compress the earlier part",
            "You keep the summary",
        )
    )


@contextmanager
def rule_model() -> Iterator[RuleModel]:
    """A RuleModel serving from its own thread and event loop."""
    with serving(RuleModel()) as model:
        yield model


@contextmanager
def serving(model: Served) -> Iterator[Served]:
    """``model`` serving from its own thread and event loop."""
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(model.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield model
    finally:
        asyncio.run_coroutine_threadsafe(model.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
