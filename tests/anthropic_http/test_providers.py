"""Either model API through either provider: the anthropic SDK and the openai SDK
against one contextd whose provider is an Anthropic model (the other direction, an
OpenAI-compatible model behind /v1/messages, is what the other modules run)."""

from __future__ import annotations

import anthropic
import openai

from tests.anthropic_http.conftest import ClaudeServed

MESSAGES: list[anthropic.types.MessageParam] = [{"role": "user", "content": "Hello Claude"}]


def test_an_anthropic_model_behind_the_messages_api(claude_served: ClaudeServed) -> None:
    with anthropic.Anthropic(base_url=claude_served.base_url, api_key="unused", max_retries=0) as c:
        answer = c.messages.create(
            model="claude-fake",
            max_tokens=100,
            system="Be kind.",
            messages=MESSAGES,
            stop_sequences=["###"],
            metadata={"user_id": "cleo"},
        )
        with c.messages.stream(
            model="claude-fake", max_tokens=100, messages=MESSAGES, metadata={"user_id": "cleo"}
        ) as stream:
            streamed = "".join(stream.text_stream)
    assert answer.content[0].type == "text"
    assert answer.content[0].text == streamed == "claude answer to: Hello Claude"
    # The provider's usage comes back as it reported it.
    assert answer.usage.input_tokens == 14
    usage = answer.usage
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (4, 2)
    sent = claude_served.model.chat_requests()[-2]
    assert sent["system"] == "Be kind." and sent["stop_sequences"] == ["###"]
    assert sent["max_tokens"] == 100
    assert sent["messages"][-1]["role"] == "user"


def test_an_anthropic_model_behind_the_openai_api(claude_served: ClaudeServed) -> None:
    with openai.OpenAI(
        base_url=f"{claude_served.base_url}/v1", api_key="unused", max_retries=0
    ) as c:
        answer = c.chat.completions.create(
            model="claude-fake",
            messages=[{"role": "user", "content": "Hello from OpenAI"}],
            user="cleo",
        )
    assert answer.choices[0].message.content == "claude answer to: Hello from OpenAI"
    assert claude_served.model.chat_requests()[-1]["messages"][-1]["role"] == "user"
