"""make_provider and api_key_from_env."""

from __future__ import annotations

import pytest
from contextd.core.messages import ChatMessage, Role
from contextd.providers.anthropic_messages import (
    DEFAULT_ANTHROPIC_BASE_URL,
    DEFAULT_ANTHROPIC_MODEL,
    AnthropicProvider,
)
from contextd.providers.base import ModelRequest, Provider
from contextd.providers.echo import EchoProvider
from contextd.providers.openai_compat import (
    DEFAULT_OPENAI_BASE_URL,
    DEFAULT_OPENAI_MODEL,
    OpenAIProvider,
)
from contextd.providers.registry import PROVIDER_NAMES, api_key_from_env, make_provider

from tests.support.fakes import openai_sse as oa
from tests.support.fakes.helpers import FAKE_KEY, collect, text_of
from tests.support.fakes.llm_server import FakeLLMServer


@pytest.mark.parametrize(
    ("name", "cls", "model", "base_url"),
    [
        ("echo", EchoProvider, "echo", None),
        ("openai", OpenAIProvider, DEFAULT_OPENAI_MODEL, DEFAULT_OPENAI_BASE_URL),
        ("anthropic", AnthropicProvider, DEFAULT_ANTHROPIC_MODEL, DEFAULT_ANTHROPIC_BASE_URL),
    ],
)
async def test_make_provider_defaults(
    name: str, cls: type[Provider], model: str, base_url: str | None
) -> None:
    provider = make_provider(name, api_key=FAKE_KEY)
    try:
        assert isinstance(provider, cls)
        assert provider.name == name
        assert provider.default_model == model
        assert provider.capabilities.follows_instructions == (name != "echo")
        if isinstance(provider, OpenAIProvider | AnthropicProvider):
            assert provider.base_url == base_url
        assert FAKE_KEY not in repr(provider)
        assert FAKE_KEY not in str(provider)
    finally:
        await provider.aclose()


async def test_make_provider_passes_settings() -> None:
    provider = make_provider(
        "anthropic",
        api_key=FAKE_KEY,
        base_url="http://127.0.0.1:9/",
        model="claude-x",
        default_max_tokens=2048,
    )
    try:
        assert isinstance(provider, AnthropicProvider)
        assert (provider.base_url, provider.default_model) == ("http://127.0.0.1:9/", "claude-x")
        assert provider.default_max_tokens == 2048
        assert repr(provider) == (
            "AnthropicProvider(base_url='http://127.0.0.1:9/', model='claude-x')"
        )
    finally:
        await provider.aclose()


async def test_make_provider_openai_against_a_local_server() -> None:
    """A keyless local server (Ollama, llama.cpp) works with an empty key."""
    async with FakeLLMServer(base_path="/v1") as fake:
        provider = make_provider("openai", base_url=fake.url, model="llama3.2")
        fake.script(oa.text_reply(["local"]))
        try:
            events = await collect(provider, ModelRequest(messages=[ChatMessage(Role.USER, "hi")]))
        finally:
            await provider.aclose()
    assert text_of(events) == "local"
    assert fake.requests[0].body["model"] == "llama3.2"
    assert fake.requests[0].headers["authorization"] == "Bearer no-key"


async def test_echo_from_registry_streams() -> None:
    provider = make_provider("echo", echo_chunk_delay=0.0)
    events = await collect(provider, ModelRequest(messages=[ChatMessage(Role.USER, "ping")]))
    assert text_of(events).endswith("“ping”")


def test_unknown_provider() -> None:
    with pytest.raises(ValueError, match="unknown provider"):
        make_provider("gemini")
    with pytest.raises(ValueError, match="unknown provider"):
        api_key_from_env("gemini", {})
    assert PROVIDER_NAMES == ("echo", "openai", "anthropic")


@pytest.mark.parametrize(
    ("provider", "env", "expected"),
    [
        ("openai", {"CONTEXTD_OPENAI_API_KEY": "a", "OPENAI_API_KEY": "b"}, "a"),
        ("openai", {"OPENAI_API_KEY": "b"}, "b"),
        ("openai", {"CONTEXTD_OPENAI_API_KEY": "  ", "OPENAI_API_KEY": "b"}, "b"),
        ("openai", {"ANTHROPIC_API_KEY": "c"}, ""),
        ("anthropic", {"CONTEXTD_ANTHROPIC_API_KEY": "c", "ANTHROPIC_API_KEY": "d"}, "c"),
        ("anthropic", {"ANTHROPIC_API_KEY": " d "}, "d"),
        ("anthropic", {}, ""),
        ("echo", {"OPENAI_API_KEY": "b"}, ""),
    ],
)
def test_api_key_from_env(provider: str, env: dict[str, str], expected: str) -> None:
    assert api_key_from_env(provider, env) == expected


def test_api_key_from_process_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXTD_OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    assert api_key_from_env("openai") == FAKE_KEY
