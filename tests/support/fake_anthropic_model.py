"""A fake Anthropic Messages model that answers by rule, in a thread of its own
(``serving``): contextd (``--provider anthropic --provider-base-url``) talks to it.

The rules, by the request (contextd's background calls after a turn are told to extract
memories or to summarize):

- after-turn work: ``{"facts": []}``;
- the last user turn holds a tool result: ``the tool said: <its content>``;
- anything else: ``claude answer to: <the last user text>`` in two pieces, with usage
  (input 14 besides 4 read from the prompt cache and 2 written to it; output 6).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.fake_openai_model import after_turn_instructions, serving
from tests.support.fakes.anthropic_sse import text_reply
from tests.support.fakes.llm_server import FakeLLMServer, Reply


def _texts(content: Any, kind: str, key: str) -> str:
    if isinstance(content, str):
        return content if kind == "text" else ""
    return " ".join(str(b.get(key, "")) for b in content if b.get("type") == kind)


class ClaudeRules(FakeLLMServer):
    def _next_reply(self) -> Reply:
        body = self.requests[-1].body
        if not isinstance(body, dict) or _after_turn(body):
            return text_reply(['{"facts": []}'])
        content = (body.get("messages") or [{}])[-1].get("content", "")
        result = _texts(content, "tool_result", "content")
        if result:
            return text_reply([f"the tool said: {result}"])
        answer = f"claude answer to: {_texts(content, 'text', 'text')}"
        half = len(answer) // 2
        return text_reply(
            [answer[:half], answer[half:]],
            input_tokens=14,
            output_tokens=6,
            cache_read=4,
            cache_creation=2,
        )

    def chat_requests(self) -> list[dict[str, Any]]:
        """The bodies of the chat turns' model calls."""
        return [
            r.body for r in self.requests if isinstance(r.body, dict) and not _after_turn(r.body)
        ]


def _after_turn(body: dict[str, Any]) -> bool:
    system = body.get("system") or ""
    return after_turn_instructions(system if isinstance(system, str) else json.dumps(system))


@contextmanager
def claude_rules() -> Iterator[ClaudeRules]:
    with serving(ClaudeRules()) as model:
        yield model
