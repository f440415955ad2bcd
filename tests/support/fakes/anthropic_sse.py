"""Anthropic Messages streaming, as the documented wire format.

Every event is named (``event: <type>``) and its data repeats the type:
``message_start`` (a Message with empty content and the input usage), then per
content block ``content_block_start`` / ``content_block_delta``\\* /
``content_block_stop`` (deltas ``text_delta`` or ``input_json_delta``), then
``message_delta`` (``stop_reason`` and the cumulative ``output_tokens``), and
``message_stop``. ``ping`` may come anywhere; ``error`` reports a failure
inside a started stream.
"""

from __future__ import annotations

from typing import Any

from tests.support.fakes.llm_server import Frame, StreamReply, sse
from tests.support.fakes.openai_sse import split

MESSAGE_ID = "msg_fake"
MODEL = "claude-fake"


def event(data: dict[str, Any], *, delay: float | None = None) -> Frame:
    return sse(data, event=str(data["type"]), delay=delay)


def message_start(
    input_tokens: int = 10,
    *,
    output_tokens: int = 1,
    cache_read: int | None = None,
    cache_creation: int | None = None,
) -> Frame:
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_creation is not None:
        usage["cache_creation_input_tokens"] = cache_creation
    return event(
        {
            "type": "message_start",
            "message": {
                "id": MESSAGE_ID,
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": MODEL,
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
            },
        }
    )


def ping() -> Frame:
    return event({"type": "ping"})


def text_block(index: int, pieces: list[str]) -> list[Frame]:
    frames = [
        event(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "text", "text": ""},
            }
        )
    ]
    frames += [
        event(
            {
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "text_delta", "text": piece},
            }
        )
        for piece in pieces
    ]
    frames.append(event({"type": "content_block_stop", "index": index}))
    return frames


def tool_use_block(
    index: int, tool_id: str, name: str, arguments: str, *, pieces: int = 5
) -> list[Frame]:
    frames = [
        event(
            {
                "type": "content_block_start",
                "index": index,
                "content_block": {"type": "tool_use", "id": tool_id, "name": name, "input": {}},
            }
        )
    ]
    # The API's first input_json_delta is often empty.
    for part in ["", *split(arguments, pieces)]:
        frames.append(
            event(
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": part},
                }
            )
        )
    frames.append(event({"type": "content_block_stop", "index": index}))
    return frames


def message_delta(
    stop_reason: str | None, output_tokens: int, *, cache_read: int | None = None
) -> Frame:
    """The message's end; ``cache_read`` as the cumulative usage newer API versions repeat."""
    usage: dict[str, Any] = {"output_tokens": output_tokens}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    return event(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": usage,
        }
    )


def message_stop() -> Frame:
    return event({"type": "message_stop"})


def error_event(type_: str = "overloaded_error", message: str = "Overloaded") -> Frame:
    return event({"type": "error", "error": {"type": type_, "message": message}})


def error_body(type_: str, message: str) -> dict[str, Any]:
    """The JSON body the API answers a failed request with."""
    return {"type": "error", "error": {"type": type_, "message": message}}


def text_reply(
    pieces: list[str],
    *,
    input_tokens: int = 10,
    output_tokens: int = 5,
    stop_reason: str = "end_turn",
    cache_read: int | None = None,
    cache_creation: int | None = None,
) -> StreamReply:
    return StreamReply(
        [
            message_start(input_tokens, cache_read=cache_read, cache_creation=cache_creation),
            ping(),
            *text_block(0, pieces),
            message_delta(stop_reason, output_tokens),
            message_stop(),
        ]
    )
