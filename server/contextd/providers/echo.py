"""The offline default provider: answers with what it received, deterministically.

The answer reads, for example::

    echo: I received 5 messages (about 123 prompt tokens). Your last message was: “Hi”

It counts every message of the request (system messages included), takes the
prompt figure from ``request.prompt_tokens_estimate`` and quotes the last user
message in full (``(none)`` when there is none; its images described, e.g.
``[image image/png 2x2, 68 bytes]``). The answer is streamed as
``TextDelta``s of ``words_per_chunk`` words each (whitespace kept, so the
deltas join to the answer exactly), with ``chunk_delay`` seconds before every
chunk but the first (``contextd serve --echo-delay-ms``, so that a person can watch
the answer stream and cancel it; a cancellation ends the wait at once); with no
delay, no wait at all (the chunks are ready: whoever streams them waits on its own
writes, and a cancellation gets in there). Then
``Usage``: prompt = the estimate, completion = the number of whitespace-separated
words in the answer (a local count, no tokenizer), marked ``estimated``: no model
counted them, and a turn's usage says so like that of a server that reports none.
Then ``Finished("stop")``.

It calls tools only when it must: with ``tool_choice`` ``required`` it calls every
tool offered (the first only when ``parallel_tool_calls`` is false), with a named
function that one, each with arguments made from the tool's schema
(core/schema_example.py), and finishes with ``tool_calls``. Under a JSON
``response_format`` its answer is JSON: a value of the schema, or for ``json_object``
``{"echo": <the answer above>}``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator

from contextd.core.content import ImagePart, TextPart
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.schema_example import example
from contextd.providers.base import (
    Capabilities,
    Finished,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallReady,
    ToolSpec,
    Usage,
)

_WORD = re.compile(r"\s*\S+\s*")


def echo_answer(request: ModelRequest) -> str:
    count = len(request.messages)
    last_user = next((m for m in reversed(request.messages) if m.role is Role.USER), None)
    quoted = f"“{_received(last_user)}”" if last_user is not None else "(none)"
    noun = "message" if count == 1 else "messages"
    return (
        f"echo: I received {count} {noun} "
        f"(about {request.prompt_tokens_estimate} prompt tokens). "
        f"Your last message was: {quoted}"
    )


def forced_calls(request: ModelRequest) -> list[ToolCall]:
    """The calls a ``tool_choice`` that forces one asks for; ids unique in a session (a
    session's message count only grows)."""
    choice = request.tool_choice
    tools: list[ToolSpec] = []
    if choice.mode == "function":
        tools = [t for t in request.tools if t.name == choice.name]
    elif choice.mode == "required":
        tools = list(request.tools[:1] if request.parallel_tool_calls is False else request.tools)
    at = len(request.messages)
    return [
        ToolCall(f"call_echo_{at}_{k}", tool.name, json.dumps(example(tool.parameters)))
        for k, tool in enumerate(tools)
    ]


def structured_answer(request: ModelRequest) -> str:
    """The answer under the request's response format: JSON for a JSON format."""
    fmt = request.response_format
    if fmt.type == "json_schema":
        return json.dumps(example(fmt.schema), ensure_ascii=False)
    if fmt.type == "json_object":
        return json.dumps({"echo": echo_answer(request)}, ensure_ascii=False)
    return echo_answer(request)


def _received(message: ChatMessage) -> str:
    """The message's text; with parts, each part: texts as they are, images described
    (``[image image/png 2x2, 68 bytes]``, ``[image https://... 800x600]``)."""
    if not message.parts:
        return message.content
    return "\n".join(p.text if isinstance(p, TextPart) else _describe(p) for p in message.parts)


def _describe(image: ImagePart) -> str:
    size = f" {image.width}x{image.height}" if image.width and image.height else ""
    if image.url:
        return f"[image {image.url}{size}]"
    return f"[image {image.media_type}{size}, {len(image.data)} bytes]"


def split_chunks(text: str, words_per_chunk: int) -> list[str]:
    """``text`` in pieces of ``words_per_chunk`` words; the pieces join back to ``text``."""
    words = _WORD.findall(text)
    if "".join(words) != text:  # only whitespace, or empty
        return [text] if text else []
    return ["".join(words[i : i + words_per_chunk]) for i in range(0, len(words), words_per_chunk)]


class EchoProvider:
    name = "echo"
    # Its answer only quotes the request: no memories or summaries can come of it.
    capabilities = Capabilities(follows_instructions=False)

    def __init__(
        self, *, chunk_delay: float = 0.0, words_per_chunk: int = 3, model: str = "echo"
    ) -> None:
        if chunk_delay < 0:
            raise ValueError("chunk_delay must not be negative")
        if words_per_chunk < 1:
            raise ValueError("words_per_chunk must be at least 1")
        self.chunk_delay = chunk_delay
        self.words_per_chunk = words_per_chunk
        self.default_model = model

    def __repr__(self) -> str:
        return (
            f"EchoProvider(chunk_delay={self.chunk_delay!r}, "
            f"words_per_chunk={self.words_per_chunk!r})"
        )

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        calls = forced_calls(request)
        if calls:
            for call in calls:
                yield ToolCallReady(call)
            arguments = sum(len(c.arguments.split()) for c in calls)
            yield Usage(request.prompt_tokens_estimate, arguments, estimated=True)
            yield Finished("tool_calls")
            return
        answer = structured_answer(request)
        for i, chunk in enumerate(split_chunks(answer, self.words_per_chunk)):
            if i and self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            yield TextDelta(chunk)
        yield Usage(request.prompt_tokens_estimate, len(answer.split()), estimated=True)
        yield Finished("stop")

    async def aclose(self) -> None:
        return None
