"""OpenAI Chat Completions streaming, as the documented wire format.

Each event is ``data: <chat.completion.chunk JSON>``; the stream ends with
``data: [DONE]``. A chunk's ``choices[0].delta`` carries ``role`` (first
chunk), ``content`` pieces, or ``tool_calls`` pieces: ``{index, id, type,
function: {name, arguments}}`` first, then ``{index, function: {arguments}}``
fragments. The last choice chunk has ``finish_reason``. With
``stream_options.include_usage`` a final chunk has ``choices: []`` and
``usage``; the others have ``usage: null``.
"""

from __future__ import annotations

from typing import Any

from tests.support.fakes.llm_server import Frame, StreamReply, raw, sse

CHUNK_ID = "chatcmpl-fake"
MODEL = "fake-model"


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: tuple[int, int] | None = None,
    no_choices: bool = False,
    cached_tokens: int | None = None,
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` object; ``cached_tokens`` goes in the usage's
    ``prompt_tokens_details``."""
    body: dict[str, Any] = {
        "id": CHUNK_ID,
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": MODEL,
        "system_fingerprint": "fp_fake",
        "choices": []
        if no_choices
        else [
            {
                "index": 0,
                "delta": delta if delta is not None else {},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": None,
    }
    if usage is not None:
        prompt, completion = usage
        body["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if cached_tokens is not None:
            body["usage"]["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return body


def done() -> Frame:
    return raw("data: [DONE]\n\n")


def split(text: str, pieces: int) -> list[str]:
    """``text`` cut into ``pieces`` non-empty parts (fewer when it is shorter)."""
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def text_frames(
    pieces: list[str],
    *,
    finish_reason: str = "stop",
    usage: tuple[int, int] | None = (11, 7),
    with_done: bool = True,
    cached_tokens: int | None = None,
) -> list[Frame]:
    """A plain text answer: role chunk, content chunks, finish chunk, usage chunk, [DONE]."""
    frames = [sse(chunk({"role": "assistant", "content": ""}))]
    frames += [sse(chunk({"content": piece})) for piece in pieces]
    frames.append(sse(chunk({}, finish_reason=finish_reason)))
    if usage is not None:
        frames.append(sse(chunk(usage=usage, no_choices=True, cached_tokens=cached_tokens)))
    if with_done:
        frames.append(done())
    return frames


def tool_call_frames(
    calls: list[tuple[str, str, str]],
    *,
    pieces: int = 6,
    interleave: bool = True,
    finish_reason: str = "tool_calls",
    usage: tuple[int, int] | None = (40, 25),
    text_before: str = "",
) -> list[Frame]:
    """Tool calls ``(id, name, arguments)`` with the arguments cut into ``pieces`` fragments.

    The first delta of each call carries id, type and name with empty arguments;
    with ``interleave`` the calls' fragments alternate (legal: they are keyed by index).
    """
    frames = [sse(chunk({"role": "assistant", "content": None}))]
    if text_before:
        frames.append(sse(chunk({"content": text_before})))
    heads = [
        {
            "index": i,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        for i, (call_id, name, _) in enumerate(calls)
    ]
    fragments = [
        [{"index": i, "function": {"arguments": part}} for part in split(args, pieces)]
        for i, (_, _, args) in enumerate(calls)
    ]
    if interleave:
        for head in heads:
            frames.append(sse(chunk({"tool_calls": [head]})))
        longest = max((len(f) for f in fragments), default=0)
        for step in range(longest):
            for call_fragments in fragments:
                if step < len(call_fragments):
                    frames.append(sse(chunk({"tool_calls": [call_fragments[step]]})))
    else:
        for head, call_fragments in zip(heads, fragments, strict=True):
            frames.append(sse(chunk({"tool_calls": [head]})))
            frames += [sse(chunk({"tool_calls": [f]})) for f in call_fragments]
    frames.append(sse(chunk({}, finish_reason=finish_reason)))
    if usage is not None:
        frames.append(sse(chunk(usage=usage, no_choices=True)))
    frames.append(done())
    return frames


def text_reply(pieces: list[str], **kwargs: Any) -> StreamReply:
    return StreamReply(text_frames(pieces, **kwargs))


def error_body(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    """The JSON body OpenAI answers a failed request with."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}
