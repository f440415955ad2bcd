"""The stable-prefix cache layout in core: where the volatile system text goes, the
cacheable prefix the report gives, and the Anthropic payload's breakpoints."""

from __future__ import annotations

from typing import Any

from contextd.core.build import build_messages
from contextd.core.build_request import BuildRequest, CacheLayout
from contextd.core.formats import OutputFormat, to_anthropic, to_openai
from contextd.core.messages import ChatMessage, Role, ToolCall
from contextd.core.prompt import PromptLayers
from contextd.core.system_prompt import system_text

from tests.support.build_strategies import TOKENIZERS

TOK = TOKENIZERS["cl100k_base"]
STABLE, OFF = CacheLayout.STABLE_PREFIX, CacheLayout.OFF
EPHEMERAL = {"type": "ephemeral"}
HISTORY = (
    ChatMessage(Role.USER, "What is a SUMIF?"),
    ChatMessage(Role.ASSISTANT, "It sums the cells that meet a condition."),
)
LAYERS = PromptLayers(
    identity="You are Atlas.", rules="Be brief.", memory="- likes tea", context="It is Monday."
)


def build(**fields: Any) -> Any:
    fields.setdefault("user_message", "And a COUNTIF?")
    fields.setdefault("token_budget", 4000)
    return build_messages(BuildRequest(tokenizer=TOK, history=HISTORY, **fields))


def test_default_layout_joins_the_volatile_prompt_to_the_system_message() -> None:
    result = build(system_prompts=["Stable."], volatile_prompt="## Memory\n- tea")
    assert [m.content for m in result.messages][:1] == ["Stable.\n\n## Memory\n- tea"]
    assert len(result.messages) == 4
    assert result.report.cacheable_prefix_tokens == 0
    assert result.report.total_tokens == sum(result.message_tokens)


def test_stable_prefix_sends_the_volatile_prompt_after_the_history() -> None:
    result = build(
        system_prompts=["Stable."], volatile_prompt="## Memory\n- tea", cache_layout=STABLE
    )
    roles = [m.role for m in result.messages]
    assert roles == [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.SYSTEM, Role.USER]
    assert result.messages[0].content == "Stable."
    assert result.messages[3].content == "## Memory\n- tea"
    assert result.stable_end == 3
    report = result.report
    assert report.cacheable_prefix_tokens == sum(result.message_tokens[:3])
    assert report.system_tokens == result.message_tokens[0] + result.message_tokens[3]
    assert report.total_tokens == sum(result.message_tokens)


def test_without_volatile_text_both_layouts_give_the_same_list() -> None:
    default = build(system_prompts=["Stable."])
    stable = build(system_prompts=["Stable."], cache_layout=STABLE)
    assert default.messages == stable.messages
    assert default.report.cacheable_prefix_tokens == sum(default.message_tokens[:3])
    assert stable.report == default.report


def test_layers_memory_and_context_move_with_the_stable_prefix() -> None:
    default = build(layers=LAYERS)
    assert default.messages[0].content == system_text(BuildRequest("x", 1, TOK, layers=LAYERS))
    assert default.report.cacheable_prefix_tokens == 0
    stable = build(layers=LAYERS, cache_layout=STABLE)
    assert stable.messages[0].content == "You are Atlas.\n\nBe brief."
    assert stable.messages[3] == ChatMessage(Role.SYSTEM, "- likes tea\n\nIt is Monday.")
    assert [x.tokens for x in stable.report.layers] == [x.tokens for x in default.report.layers]


def test_anthropic_payload_marks_the_system_and_the_end_of_the_history() -> None:
    result = build(
        system_prompts=["Stable."],
        volatile_prompt="## Memory\n- tea",
        cache_layout=STABLE,
        output_format=OutputFormat.ANTHROPIC,
    )
    assert result.payload == {
        "system": [{"type": "text", "text": "Stable.", "cache_control": EPHEMERAL}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is a SUMIF?"}]},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": "It sums the cells that meet a condition.",
                        "cache_control": EPHEMERAL,
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "## Memory\n- tea"},
                    {"type": "text", "text": "And a COUNTIF?"},
                ],
            },
        ],
    }


def test_default_anthropic_payload_is_unchanged() -> None:
    result = build(
        system_prompts=["Stable."],
        volatile_prompt="## Memory\n- tea",
        output_format=OutputFormat.ANTHROPIC,
    )
    assert result.payload is not None
    assert result.payload["system"] == "Stable.\n\n## Memory\n- tea"
    assert "cache_control" not in str(result.payload)


def test_continuation_ends_with_the_volatile_text_after_the_tool_results() -> None:
    call = ToolCall("call_1", "lookup", '{"q": "tea"}')
    history = (
        ChatMessage(Role.USER, "Look it up"),
        ChatMessage(Role.ASSISTANT, "", (call,)),
        ChatMessage(Role.TOOL, "found", tool_call_id="call_1"),
    )
    result = build_messages(
        BuildRequest(
            user_message="",
            token_budget=4000,
            tokenizer=TOK,
            system_prompts=["Stable."],
            volatile_prompt="## Memory\n- tea",
            history=history,
            cache_layout=STABLE,
            output_format=OutputFormat.ANTHROPIC,
        )
    )
    assert [m.role for m in result.messages][-2:] == [Role.TOOL, Role.SYSTEM]
    assert result.report.cacheable_prefix_tokens == sum(result.message_tokens[:4])
    assert result.payload is not None
    last = result.payload["messages"][-1]
    assert last["role"] == "user"
    assert last["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "call_1",
            "content": "found",
            "cache_control": EPHEMERAL,
        },
        {"type": "text", "text": "## Memory\n- tea"},
    ]


def test_summary_is_a_second_system_block_after_the_marked_one() -> None:
    messages = [
        ChatMessage(Role.SYSTEM, "Stable."),
        ChatMessage(Role.SYSTEM, "[Previous conversation summary]\n\nEarlier."),
        ChatMessage(Role.SYSTEM, "## Memory"),
        ChatMessage(Role.USER, "Hi"),
    ]
    payload = to_anthropic(messages, cached_prefix=2)
    assert payload["system"] == [
        {"type": "text", "text": "Stable.", "cache_control": EPHEMERAL},
        {"type": "text", "text": "[Previous conversation summary]\n\nEarlier."},
    ]
    assert payload["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "## Memory"}, {"type": "text", "text": "Hi"}],
        }
    ]
    # OpenAI needs no markers: the second system message stays in its place.
    assert [m["role"] for m in to_openai(messages)["messages"]] == [
        "system",
        "system",
        "system",
        "user",
    ]
