"""The acceptance scenarios of the budget rule, the prompt layers and the message pipeline,
against core/ directly (no server)."""

from __future__ import annotations

from typing import Any

import pytest
from contextd.core.build import build_messages
from contextd.core.build_request import BuildRequest
from contextd.core.errors import BudgetExceeded, InvalidArgument
from contextd.core.prompt import PromptLayers, assemble_system_prompt
from contextd.core.tokens import EstimateTokenizer

from tests.support import scenarios
from tests.support.bad_cases import BAD_BUILD
from tests.support.core_adapter import build, to_message


@pytest.mark.parametrize("case", scenarios.BUILD_CASES, ids=lambda c: c.name)
def test_build_cases(case: scenarios.BuildCase) -> None:
    messages, _payload, report = build(case.request)
    case.check(messages, report)


@pytest.mark.parametrize(("text", "tokens"), scenarios.ESTIMATES)
def test_estimate_message_tokens(text: str, tokens: int) -> None:
    assert EstimateTokenizer().count(text) == tokens


def test_required_over_budget_can_fail() -> None:
    request = {**scenarios.BUDGET_CASES[4].request, "on_overflow": "fail"}
    with pytest.raises(BudgetExceeded, match="exceed token_budget 120"):
        build(request)


def test_prompt_all_layers_in_order() -> None:
    scenarios.check_prompt_all_layers(assemble_system_prompt(PromptLayers(**scenarios.LAYERS_ALL)))


@pytest.mark.parametrize("layers", [scenarios.LAYERS_IDENTITY_ONLY, scenarios.LAYERS_BLANKS])
def test_prompt_blank_layers_skipped(layers: dict[str, str]) -> None:
    scenarios.check_prompt_identity_only(assemble_system_prompt(PromptLayers(**layers)))


@pytest.mark.parametrize("identity", ["", "  ", "\n\t"])
def test_prompt_blank_identity_rejected(identity: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        assemble_system_prompt(PromptLayers(identity=identity))
    assert [v.field for v in err.value.violations] == ["layers.identity"]


def test_anthropic_adapter_takes_the_system_prompt_apart() -> None:
    request = {**scenarios.PIPELINE_CASES[0].request, "output_format": "anthropic"}
    _messages, payload, _report = build(request)
    assert payload is not None
    assert payload["system"] == (
        "You are a helpful assistant.\nAnswer in the user's language.\n\n"
        "[Previous conversation summary]\n\n用户执行了 ls 命令，查看了目录内容"
    )
    assert payload["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "再执行 pwd"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "call_2",
                    "name": "execute_command",
                    "input": {"cmd": "pwd"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_2", "content": "/home/user"}],
        },
    ]


def test_openai_adapter_keeps_the_messages() -> None:
    request = {**scenarios.PIPELINE_CASES[0].request, "output_format": "openai"}
    _messages, payload, _report = build(request)
    assert payload is not None
    assert [m["role"] for m in payload["messages"]] == [
        "system",
        "system",
        "user",
        "assistant",
        "tool",
    ]
    assert payload["messages"][3] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "execute_command", "arguments": '{"cmd": "pwd"}'},
            },
        ],
    }


def test_counts_only_what_trimming_looks_at() -> None:
    counted: list[str] = []

    class Spy(EstimateTokenizer):
        def count(self, text: str) -> int:
            counted.append(text)
            return super().count(text)

    history = [{"role": "user", "content": f"message {i}"} for i in range(10_000)]
    build_messages(
        BuildRequest(
            user_message="now",
            token_budget=30,
            tokenizer=Spy(),
            system_prompts=["sys"],
            history=[to_message(m) for m in history],
        )
    )
    # system, user, the kept newest messages and the first that did not fit.
    assert len(counted) < 20


@pytest.mark.parametrize(("name", "request_", "fields"), BAD_BUILD, ids=[c[0] for c in BAD_BUILD])
def test_bad_input_names_fields(name: str, request_: dict[str, Any], fields: list[str]) -> None:
    with pytest.raises(InvalidArgument) as err:
        build(request_)
    assert [v.field for v in err.value.violations] == fields
