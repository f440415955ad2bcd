"""``POST /v1/messages/count_tokens``: the tokens of a Messages request's system prompt,
messages and tools, counted by the native CountTokens with the server's tokenizer (an
estimate of what the provider will count)."""

from __future__ import annotations

from contextd.fronts.anthropic.blocks import history, system_prompt
from contextd.fronts.anthropic.request import tool_choice, tool_definitions
from contextd.fronts.chat_http import json_fields as jf
from contextd.fronts.chat_http.failure import invalid
from contextd.fronts.chat_http.params import ParamMap
from contextd.v1 import chat_pb2 as cpb
from contextd.v1 import context_pb2 as pb

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


def count_request(raw: bytes) -> tuple[pb.CountTokensRequest, ParamMap]:
    """The native CountTokens of the body ``raw``: the system prompt and messages as
    messages, each tool's definition as a text."""
    body = jf.parse_object(raw)
    jf.known_keys(body, KNOWN, "")
    jf.string(body.get("model"), "model")
    for name in ("thinking", "cache_control", "output_config"):
        if body.get(name) is not None:
            jf.obj(body[name], name)
    jf.optional_string(body.get("speed"), "speed")
    if body.get("context_management") is not None:
        raise invalid(
            "context_management",
            "not counted here: a turn reports the edits it applied",
            code="unsupported_parameter",
        )
    params = ParamMap()
    native = pb.CountTokensRequest(
        messages=history(system_prompt(body.get("system")), body.get("messages"), params)
    )
    tool_choice(body.get("tool_choice"), cpb.StreamChatRequest(), params)  # checked only
    for tool in tool_definitions(body.get("tools"), params):
        native.texts.append(f"{tool.name}\n{tool.description}\n{tool.parameters_json}")
    return native, params
