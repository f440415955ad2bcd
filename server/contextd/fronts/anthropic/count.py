"""``POST /v1/messages/count_tokens``: the tokens of a Messages request's system prompt,
messages and tools, counted by the native CountTokens with the server's tokenizer (an
estimate of what the provider will count).

With ``context_management`` the count is what the model would see after the edits, as
Anthropic counts it, and ``context_management.original_input_tokens`` the count before
them: the thinking blocks (left out when ``clear_thinking_20251015`` is asked, see
editing.py) are counted in the original only, and the tokens a tool-use clearing would
free come from a BuildMessages of the same list with the same editing (its report's
edits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc.aio

from contextd.fronts.anthropic.blocks import history, inline_turn, system_prompt
from contextd.fronts.anthropic.editing import (
    ContextManagement,
    ThinkingLeftOut,
    cleared_tokens,
    context_management,
    thinking_left_out,
)
from contextd.fronts.anthropic.request import tool_choice, tool_definitions
from contextd.fronts.chat_http import json_fields as jf
from contextd.fronts.chat_http.failure import from_rpc_error
from contextd.fronts.chat_http.params import ParamMap
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb
from contextd.v1 import context_pb2_grpc

KNOWN = frozenset(
    {
        "model",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "thinking",
        "cache_control",
        "output_config",
        "speed",
        "context_management",
    }
)
# The build that finds what clearing frees must keep every message: no budget trims it.
_NO_BUDGET = 2**31 - 1


@dataclass
class Counting:
    """A count_tokens request: the native count, and what the edits asked for need."""

    native: pb.CountTokensRequest
    params: ParamMap
    editing: ContextManagement | None
    # The list as BuildMessages takes it, with the clearing asked for; None without it.
    build: pb.BuildMessagesRequest | None
    thinking: ThinkingLeftOut


def count_request(raw: bytes) -> Counting:
    """The native CountTokens of the body ``raw``: the system prompt and messages as
    messages, each tool's definition as a text; what the edits need besides."""
    body = jf.parse_object(raw)
    jf.known_keys(body, KNOWN, "")
    jf.string(body.get("model"), "model")
    for name in ("thinking", "cache_control", "output_config"):
        if body.get(name) is not None:
            jf.obj(body[name], name)
    jf.optional_string(body.get("speed"), "speed")
    params = ParamMap()
    system = system_prompt(body.get("system"))
    native = pb.CountTokensRequest(messages=history(system, body.get("messages"), params))
    tool_choice(body.get("tool_choice"), cpb.StreamChatRequest(), params)  # checked only
    for tool in tool_definitions(body.get("tools"), params):
        native.texts.append(f"{tool.name}\n{tool.description}\n{tool.parameters_json}")
    editing = context_management(body.get("context_management"), params)
    build = None
    thinking = ThinkingLeftOut()
    if editing is not None and editing.tool_uses is not None:
        build = _build(system, body["messages"], editing.tool_uses)
    if editing is not None and editing.thinking:
        thinking = thinking_left_out(body["messages"])
        native.texts.extend(thinking.texts)
    return Counting(native, params, editing, build, thinking)


def _build(system: str, messages: object, editing: pb.ContextEditing) -> pb.BuildMessagesRequest:
    turn = inline_turn(system, messages, ParamMap())
    kept = [m for m in turn.history if m.role != pb.ROLE_SYSTEM]
    return pb.BuildMessagesRequest(
        system_prompts=[system] if system else [],
        history=kept,
        user_message=turn.user_message,
        user_message_parts=turn.user_parts,
        token_budget=_NO_BUDGET,
        editing=editing,
    )


async def count(
    stub: context_pb2_grpc.ContextServiceStub,
    counting: Counting,
    metadata: grpc.aio.Metadata,
) -> dict[str, Any]:
    """The answer: ``input_tokens``, and ``context_management`` when edits were asked."""
    try:
        counted = await stub.CountTokens(counting.native, metadata=metadata)
        original = counted.total_tokens
        if counting.editing is None:
            return {"input_tokens": original}
        freed = 0
        if counting.build is not None:
            built = await stub.BuildMessages(counting.build, metadata=metadata)
            freed = cleared_tokens(built.report)
        thinking = sum(
            counted.text_tokens[len(counted.text_tokens) - len(counting.thinking.texts) :]
        )
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error, counting.params) from None
    return {
        "input_tokens": original - freed - thinking,
        "context_management": {"original_input_tokens": original},
    }


async def count_thinking(
    stub: context_pb2_grpc.ContextServiceStub,
    thinking: ThinkingLeftOut,
    tokenizer: str,
    metadata: grpc.aio.Metadata,
) -> None:
    """``thinking.tokens``, counted with the turn's ``tokenizer``."""
    if not thinking.texts:
        return
    request = pb.CountTokensRequest(tokenizer=tokenizer, texts=thinking.texts)
    try:
        counted = await stub.CountTokens(request, metadata=metadata)
    except grpc.aio.AioRpcError as error:
        raise from_rpc_error(error, ParamMap()) from None
    thinking.tokens = counted.total_tokens
