"""Requests and results of the context calls: AssemblePrompt, BuildMessages, CountTokens
and ListTokenizers.

A BuildMessages response that cannot be decoded (a payload_json that is not a JSON
object) raises :class:`InvalidResponseError`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar

from ._editing import editing_to_pb
from ._errors import InvalidResponseError
from ._fields import _cache_layout, _enum_name, _ident, _sequence, _text, _type_name
from ._messages import MessageLike, message_from_pb, messages_to_pb
from ._parts import PartLike, user_message_fields
from ._pb import context_pb2 as pb
from ._types import (
    AssembledPrompt,
    BuildReport,
    BuildResult,
    ContextLayerInfo,
    DroppedRange,
    LayerInfo,
    MessageEdit,
    MovedToolResult,
    RemovedToolCall,
    TokenCount,
    TokenizerInfo,
    TokenizerList,
)

OutputFormat = Literal["neutral", "openai", "anthropic"]
OverflowPolicy = Literal["keep", "fail"]
#: Where the volatile context layers go (see CacheLayout in context.proto).
CacheLayout = Literal["off", "stable_prefix"]

LAYER_NAMES: tuple[str, ...] = ("identity", "rules", "skill", "mode", "memory", "context")

_FORMATS: dict[str, pb.OutputFormat] = {
    "neutral": pb.OUTPUT_FORMAT_NEUTRAL,
    "openai": pb.OUTPUT_FORMAT_OPENAI,
    "anthropic": pb.OUTPUT_FORMAT_ANTHROPIC,
}
_POLICIES: dict[str, pb.OverflowPolicy] = {
    "keep": pb.OVERFLOW_POLICY_KEEP_REQUIRED,
    "fail": pb.OVERFLOW_POLICY_FAIL,
}
_DROP_REASON_PREFIX = "DROP_REASON_"
_Enum = TypeVar("_Enum", pb.OutputFormat, pb.OverflowPolicy)


def layers_to_pb(layers: object, where: str = "layers") -> pb.PromptLayers:
    if isinstance(layers, pb.PromptLayers):
        return layers
    if not isinstance(layers, Mapping):
        raise TypeError(f"{where} must be a mapping of layer name to text")
    unknown = [str(k) for k in layers if k not in LAYER_NAMES]
    if unknown:
        raise ValueError(
            f"{where} has no layer {', '.join(map(repr, unknown))}; "
            f"layers are {', '.join(LAYER_NAMES)}"
        )
    return pb.PromptLayers(**{k: _text(v, f"{where}.{k}") for k, v in layers.items()})


def summary_to_pb(summary: object, where: str = "compression_summary") -> pb.CompressionSummary:
    if isinstance(summary, pb.CompressionSummary):
        return summary
    if not isinstance(summary, Mapping):
        raise TypeError(f"{where} must be a mapping, not {_type_name(summary)}")
    ids = summary.get("message_ids")
    ids = () if ids is None else _sequence(ids, f"{where}.message_ids", "message ids")
    return pb.CompressionSummary(
        message_ids=[_ident(x, f"{where}.message_ids[{i}]") for i, x in enumerate(ids)],
        start_message_id=_ident(summary.get("start_message_id"), f"{where}.start_message_id"),
        summary=_text(summary.get("summary"), f"{where}.summary"),
    )


def _choice(value: object, choices: Mapping[str, _Enum], where: str) -> _Enum:
    if isinstance(value, str) and value in choices:
        return choices[value]
    raise ValueError(f"{where} must be one of {', '.join(map(repr, choices))}, not {value!r}")


# Requests ---------------------------------------------------------------------------


def assemble_prompt_request(
    identity: str,
    rules: str,
    skill: str,
    mode: str,
    memory: str,
    context: str,
    tokenizer: str,
) -> pb.AssemblePromptRequest:
    values = (identity, rules, skill, mode, memory, context)
    layers = {name: _text(v, name) for name, v in zip(LAYER_NAMES, values, strict=True)}
    return pb.AssemblePromptRequest(
        layers=pb.PromptLayers(**layers), tokenizer=_text(tokenizer, "tokenizer")
    )


def build_messages_request(
    user_message: str | Sequence[PartLike],
    *,
    token_budget: int,
    system_prompt: str | Sequence[str] | None,
    layers: Mapping[str, str] | None,
    history: Sequence[MessageLike],
    compression_summary: Mapping[str, Any] | None,
    tokenizer: str,
    output_format: OutputFormat,
    on_overflow: OverflowPolicy,
    cache_layout: CacheLayout | None = None,
    editing: Mapping[str, Any] | None = None,
) -> pb.BuildMessagesRequest:
    if isinstance(token_budget, bool) or not isinstance(token_budget, int):
        raise TypeError(f"token_budget must be an int, not {_type_name(token_budget)}")
    request = pb.BuildMessagesRequest(
        **user_message_fields(user_message),
        token_budget=token_budget,
        tokenizer=_text(tokenizer, "tokenizer"),
        output_format=_choice(output_format, _FORMATS, "output_format"),
        overflow_policy=_choice(on_overflow, _POLICIES, "on_overflow"),
        history=messages_to_pb(history, "history"),
        cache_layout=_cache_layout(cache_layout, "cache_layout"),
    )
    if system_prompt is not None:
        prompts = (
            [system_prompt]
            if isinstance(system_prompt, str)
            else _sequence(system_prompt, "system_prompt", "strings")
        )
        request.system_prompts.extend(
            _text(p, f"system_prompt[{i}]") for i, p in enumerate(prompts)
        )
    if layers is not None:
        request.layers.CopyFrom(layers_to_pb(layers))
    if compression_summary is not None:
        request.compression_summary.CopyFrom(summary_to_pb(compression_summary))
    if editing is not None:
        request.editing.CopyFrom(editing_to_pb(editing))
    return request


def count_tokens_request(
    texts: str | Sequence[str],
    messages: Sequence[MessageLike],
    tokenizer: str,
) -> pb.CountTokensRequest:
    items = [texts] if isinstance(texts, str) else _sequence(texts, "texts", "strings")
    return pb.CountTokensRequest(
        tokenizer=_text(tokenizer, "tokenizer"),
        texts=[_text(t, f"texts[{i}]") for i, t in enumerate(items)],
        messages=messages_to_pb(messages, "messages"),
    )


def list_tokenizers_request() -> pb.ListTokenizersRequest:
    return pb.ListTokenizersRequest()


# Responses --------------------------------------------------------------------------


def _layers_from_pb(layers: Sequence[pb.LayerReport]) -> list[LayerInfo]:
    return [LayerInfo(x.name, x.included, x.tokens) for x in layers]


def _drop_reason(reason: int) -> str:
    return _enum_name(pb.DropReason, reason, _DROP_REASON_PREFIX)


def assembled_prompt(response: pb.AssemblePromptResponse) -> AssembledPrompt:
    return AssembledPrompt(
        system_prompt=response.system_prompt,
        layers=_layers_from_pb(response.layers),
        tokens=response.tokens,
        tokenizer=response.tokenizer,
    )


def build_report(report: pb.BuildReport) -> BuildReport:
    return BuildReport(
        tokenizer=report.tokenizer,
        token_budget=report.token_budget,
        system_tokens=report.system_tokens,
        summary_tokens=report.summary_tokens,
        history_tokens=report.history_tokens,
        user_message_tokens=report.user_message_tokens,
        total_tokens=report.total_tokens,
        required_over_budget=report.required_over_budget,
        summary_included=report.summary_included,
        history_kept=report.history_kept,
        dropped=[
            DroppedRange(x.start_index, x.count, _drop_reason(x.reason)) for x in report.dropped
        ],
        removed_tool_calls=[
            RemovedToolCall(x.index, x.tool_call_id) for x in report.removed_tool_calls
        ],
        layers=_layers_from_pb(report.layers),
        context_layers=[
            ContextLayerInfo(x.name, x.included, x.tokens, x.items_kept, x.items_dropped, x.note)
            for x in report.context_layers
        ],
        moved_tool_results=[
            MovedToolResult(x.tool_call_id, x.from_index, x.call_index)
            for x in report.moved_tool_results
        ],
        cacheable_prefix_tokens=report.cacheable_prefix_tokens,
        image_tokens=report.image_tokens,
        edits=[
            MessageEdit(
                x.index,
                _enum_name(pb.EditKind, x.kind, "EDIT_KIND_"),
                x.tokens_before,
                x.tokens_after,
                x.tool_call_id,
                x.tool_name,
                x.count,
            )
            for x in report.edits
        ],
        cache_prefix_kept_tokens=report.cache_prefix_kept_tokens,
    )


_JSON_TYPES: dict[type, str] = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _payload(payload_json: str) -> dict[str, Any] | None:
    """The provider body fragment; "" (neutral output) is ``None``."""
    if not payload_json:
        return None
    try:
        parsed = json.loads(payload_json)
    except (ValueError, RecursionError) as error:  # RecursionError: nested too deep
        raise InvalidResponseError(
            f"BuildMessagesResponse.payload_json is not valid JSON ({error})"
        ) from error
    if not isinstance(parsed, dict):
        raise InvalidResponseError(
            "BuildMessagesResponse.payload_json is not a JSON object "
            f"but a JSON {_JSON_TYPES.get(type(parsed), type(parsed).__name__)}"
        )
    return parsed


def build_result(response: pb.BuildMessagesResponse) -> BuildResult:
    return BuildResult(
        messages=[message_from_pb(m) for m in response.messages],
        payload=_payload(response.payload_json),
        report=build_report(response.report),
    )


def token_count(response: pb.CountTokensResponse) -> TokenCount:
    return TokenCount(
        tokenizer=response.tokenizer,
        text_tokens=list(response.text_tokens),
        message_tokens=list(response.message_tokens),
        total_tokens=response.total_tokens,
    )


def tokenizer_list(response: pb.ListTokenizersResponse) -> TokenizerList:
    return TokenizerList(
        tokenizers=[
            TokenizerInfo(t.name, t.available, t.message_overhead, t.description)
            for t in response.tokenizers
        ],
        default=response.default_tokenizer,
    )
