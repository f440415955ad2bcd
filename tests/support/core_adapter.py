"""Runs SDK-shaped request dicts against core/ directly, returning SDK-shaped results."""

from __future__ import annotations

from typing import Any

from contextd.core.build import build_messages
from contextd.core.build_request import BuildReport, BuildRequest, OverflowPolicy
from contextd.core.formats import JsonObject, OutputFormat
from contextd.core.messages import ChatMessage, CompressionSummary, Role, ToolCall
from contextd.core.prompt import PromptLayers
from contextd.core.tokens import TokenizerRegistry

REGISTRY = TokenizerRegistry()


def to_message(d: dict[str, Any]) -> ChatMessage:
    return ChatMessage(
        role=Role(d["role"]),
        content=d.get("content", ""),
        tool_calls=tuple(
            ToolCall(c["id"], c["name"], c.get("arguments", "")) for c in d.get("tool_calls", ())
        ),
        tool_call_id=d.get("tool_call_id", ""),
        id=str(d.get("id", "")),
    )


def to_dict(m: ChatMessage, tokens: int) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role.value, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls
        ]
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    if m.id:
        out["id"] = m.id
    out["tokens"] = tokens
    return out


def build(
    request: dict[str, Any],
) -> tuple[list[dict[str, Any]], JsonObject | None, BuildReport]:
    system = request.get("system_prompt")
    prompts = [system] if isinstance(system, str) else list(system or ())
    summary = request.get("compression_summary")
    result = build_messages(
        BuildRequest(
            user_message=request.get("user_message", ""),
            token_budget=request["token_budget"],
            tokenizer=REGISTRY.get(request.get("tokenizer", "")),
            system_prompts=prompts,
            layers=PromptLayers(**request["layers"]) if "layers" in request else None,
            history=[to_message(m) for m in request.get("history", ())],
            compression_summary=CompressionSummary(
                tuple(str(i) for i in summary["message_ids"]),
                str(summary["start_message_id"]),
                summary["summary"],
            )
            if summary
            else None,
            output_format=OutputFormat(request.get("output_format", "neutral")),
            overflow_policy=OverflowPolicy.FAIL
            if request.get("on_overflow") == "fail"
            else OverflowPolicy.KEEP_REQUIRED,
        )
    )
    messages = [to_dict(m, n) for m, n in zip(result.messages, result.message_tokens, strict=True)]
    return messages, result.payload, result.report
