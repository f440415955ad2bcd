"""Anthropic's ``context_management`` edit ``clear_tool_uses_20250919`` run by
contextd's own editing, whatever the provider: old tool results reach the model cleared,
and the answer reports the edit as Anthropic reports it (the SDK's beta types)."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from tests.anthropic_http.conftest import ClaudeServed, base_url
from tests.openai_http.conftest import Served

BETA = "context-management-2025-06-27"
RESULT = "line of output " * 150  # several hundred tokens
CLEARED = "[tool result cleared to save context"


def tool_loop(pairs: int) -> list[Any]:
    """A user question, ``pairs`` tool calls each answered, and a last question."""
    messages: list[Any] = [{"role": "user", "content": "Look it up."}]
    for k in range(pairs):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"toolu_{k}", "name": "search", "input": {"q": k}}
                ],
            }
        )
        result = {"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": RESULT}
        messages.append({"role": "user", "content": [result]})
    messages.append({"role": "user", "content": "And now?"})
    return messages


EDIT: Any = {
    "edits": [
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": 1000},
            "keep": {"type": "tool_uses", "value": 1},
            "exclude_tools": ["never_cleared"],
        }
    ]
}
SEARCH: Any = {"name": "search", "input_schema": {"type": "object"}}


def sent_results(requests: list[dict[str, Any]]) -> list[str]:
    """The tool results of the last chat request, in either provider's format."""
    messages = requests[-1]["messages"]
    texts = [m["content"] for m in messages if m.get("role") == "tool"]
    for m in messages:
        if isinstance(m.get("content"), list):
            texts += [b["content"] for b in m["content"] if b.get("type") == "tool_result"]
    return [t if isinstance(t, str) else t[0]["text"] for t in texts]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_old_tool_results_are_cleared_and_reported(served: Served, stream: bool) -> None:
    with anthropic.Anthropic(base_url=base_url(served), api_key="u", max_retries=0) as c:
        arguments: Any = {
            "model": "fake-model",
            "max_tokens": 50,
            "betas": [BETA],
            "tools": [SEARCH],
            "messages": tool_loop(4),
            "context_management": EDIT,
            "metadata": {"user_id": "eda"},
        }
        if stream:
            with c.beta.messages.stream(**arguments) as streamed:
                answer = streamed.get_final_message()
        else:
            answer = c.beta.messages.create(**arguments)
    assert answer.context_management is not None
    [applied] = answer.context_management.applied_edits
    assert applied.type == "clear_tool_uses_20250919"
    results = sent_results(served.model.chat_requests())
    cleared = [r for r in results if r.startswith(CLEARED)]
    assert applied.cleared_tool_uses == len(cleared) >= 2
    assert applied.cleared_input_tokens > 0
    assert results[-1] == RESULT  # keep: the newest result stays


def test_nothing_is_cleared_under_the_trigger(served: Served) -> None:
    with anthropic.Anthropic(base_url=base_url(served), api_key="u", max_retries=0) as c:
        answer = c.beta.messages.create(
            model="fake-model",
            max_tokens=50,
            betas=[BETA],
            tools=[SEARCH],
            messages=tool_loop(1),
            context_management=EDIT,
            metadata={"user_id": "eda"},
        )
    assert answer.context_management is not None
    assert answer.context_management.applied_edits == []
    assert not [r for r in sent_results(served.model.chat_requests()) if r.startswith(CLEARED)]


def test_an_anthropic_provider_gets_the_cleared_history(claude_served: ClaudeServed) -> None:
    with anthropic.Anthropic(base_url=claude_served.base_url, api_key="u", max_retries=0) as c:
        answer = c.beta.messages.create(
            model="claude-fake",
            max_tokens=50,
            betas=[BETA],
            tools=[SEARCH],
            messages=tool_loop(4),
            context_management=EDIT,
            metadata={"user_id": "eda"},
        )
    assert answer.context_management is not None
    [applied] = answer.context_management.applied_edits
    sent = claude_served.model.chat_requests()[-1]
    # contextd edits; the provider is not asked to.
    assert "context_management" not in sent
    cleared = [r for r in sent_results([sent]) if r.startswith(CLEARED)]
    assert applied.cleared_tool_uses == len(cleared) >= 2


def test_a_tool_uses_trigger_clears_all_but_the_kept_ones(served: Served) -> None:
    edit: Any = {
        "edits": [
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "tool_uses", "value": 3},
                "keep": {"type": "tool_uses", "value": 1},
            }
        ]
    }
    with anthropic.Anthropic(base_url=base_url(served), api_key="u", max_retries=0) as c:
        under = c.beta.messages.create(
            model="fake-model",
            max_tokens=50,
            betas=[BETA],
            tools=[SEARCH],
            messages=tool_loop(3),
            context_management=edit,
            metadata={"user_id": "eda"},
        )
        assert under.context_management is not None
        assert under.context_management.applied_edits == []
        over = c.beta.messages.create(
            model="fake-model",
            max_tokens=50,
            betas=[BETA],
            tools=[SEARCH],
            messages=tool_loop(4),
            context_management=edit,
            metadata={"user_id": "eda"},
        )
    assert over.context_management is not None
    [applied] = over.context_management.applied_edits
    assert applied.type == "clear_tool_uses_20250919"
    results = sent_results(served.model.chat_requests())
    # Over three: every result but the kept one goes at once (the newest call's stays).
    assert [r.startswith(CLEARED) for r in results] == [True, True, True, False]
    assert applied.cleared_tool_uses == 3


def thinking_turns(turns: int) -> list[Any]:
    """A conversation whose ``turns`` earlier answers carry thinking blocks, as an SDK
    sends back what a thinking model wrote."""
    messages: list[Any] = []
    for k in range(turns):
        messages.append({"role": "user", "content": f"Question {k}"})
        thought = {"type": "thinking", "thinking": "Let me think. " * 40, "signature": "c2ln"}
        blocks: list[Any] = [thought, {"type": "text", "text": f"Answer {k}"}]
        if k == 0:
            blocks.insert(1, {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk" * 10})
        messages.append({"role": "assistant", "content": blocks})
    messages.append({"role": "user", "content": "And now?"})
    return messages


@pytest.mark.parametrize("keep", ["all", {"type": "thinking_turns", "value": 1}])
def test_thinking_is_left_out_and_reported(served: Served, keep: Any) -> None:
    with anthropic.Anthropic(base_url=base_url(served), api_key="u", max_retries=0) as c:
        answer = c.beta.messages.create(
            model="fake-model",
            max_tokens=50,
            betas=[BETA],
            messages=thinking_turns(2),
            context_management={"edits": [{"type": "clear_thinking_20251015", "keep": keep}]},
            metadata={"user_id": "eda"},
        )
        counted = c.beta.messages.count_tokens(
            model="fake-model",
            betas=[BETA],
            messages=thinking_turns(2),
            context_management={"edits": [{"type": "clear_thinking_20251015", "keep": keep}]},
        )
        plain = c.messages.count_tokens(model="fake-model", messages=thinking_turns(2))
    assert answer.context_management is not None
    [applied] = answer.context_management.applied_edits
    assert applied.type == "clear_thinking_20251015"
    assert applied.cleared_thinking_turns == 2
    sent = served.model.chat_requests()[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "assistant"] == ["Answer 0", "Answer 1"]
    assert "Let me think" not in str(sent)
    # count_tokens counts what the model sees; the thinking is in the original only.
    assert counted.input_tokens == plain.input_tokens
    assert counted.context_management is not None
    original = counted.context_management.original_input_tokens
    assert original - counted.input_tokens == applied.cleared_input_tokens > 0


def test_count_tokens_counts_after_the_clearing(served: Served) -> None:
    with anthropic.Anthropic(base_url=base_url(served), api_key="u", max_retries=0) as c:
        counted = c.beta.messages.count_tokens(
            model="fake-model",
            betas=[BETA],
            tools=[SEARCH],
            messages=tool_loop(4),
            context_management=EDIT,
        )
        plain = c.messages.count_tokens(model="fake-model", tools=[SEARCH], messages=tool_loop(4))
        answer = c.beta.messages.create(
            model="fake-model",
            max_tokens=50,
            betas=[BETA],
            tools=[SEARCH],
            messages=tool_loop(4),
            context_management=EDIT,
            metadata={"user_id": "eda"},
        )
        under = c.beta.messages.count_tokens(
            model="fake-model",
            betas=[BETA],
            tools=[SEARCH],
            messages=tool_loop(1),
            context_management=EDIT,
        )
    assert counted.context_management is not None
    assert counted.context_management.original_input_tokens == plain.input_tokens
    assert answer.context_management is not None
    [applied] = answer.context_management.applied_edits
    # The turn and the count clear the same results.
    assert plain.input_tokens - counted.input_tokens == applied.cleared_input_tokens > 0
    assert under.context_management is not None
    assert under.input_tokens == under.context_management.original_input_tokens
