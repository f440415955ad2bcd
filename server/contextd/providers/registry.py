"""Builds a provider by name from configuration values.

The server reads its configuration and passes plain values here; API keys come
from arguments only (:func:`api_key_from_env` is the helper that reads them).
The SDK-backed providers never fall back to the SDKs' own environment
variables for the key or the base URL: an empty ``base_url`` means the
provider's public endpoint, an empty ``api_key`` the placeholder ``no-key``
(for local servers that need none).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from contextd.providers.base import Provider

PROVIDER_NAMES = ("echo", "openai", "anthropic")

_KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "echo": (),
    "openai": ("CONTEXTD_OPENAI_API_KEY", "OPENAI_API_KEY"),
    "anthropic": ("CONTEXTD_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"),
}


def _check_name(name: str) -> None:
    if name not in PROVIDER_NAMES:
        raise ValueError(f"unknown provider {name!r}; expected one of {', '.join(PROVIDER_NAMES)}")


def api_key_from_env(provider: str, environ: Mapping[str, str] | None = None) -> str:
    """The provider's API key from the environment, "" when unset (echo needs none).

    openai: ``CONTEXTD_OPENAI_API_KEY``, else ``OPENAI_API_KEY``;
    anthropic: ``CONTEXTD_ANTHROPIC_API_KEY``, else ``ANTHROPIC_API_KEY``.
    Blank values count as unset.
    """
    _check_name(provider)
    env = os.environ if environ is None else environ
    for variable in _KEY_VARIABLES[provider]:
        value = env.get(variable, "").strip()
        if value:
            return value
    return ""


def make_provider(
    name: str,
    *,
    api_key: str = "",
    base_url: str = "",
    model: str = "",
    timeout: float = 60.0,
    max_retries: int = 2,
    retry_base_delay: float = 0.5,
    default_headers: Mapping[str, str] | None = None,
    default_query: Mapping[str, str] | None = None,
    default_max_tokens: int | None = None,
    openai_include_usage: bool = True,
    openai_max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
    echo_chunk_delay: float = 0.0,
) -> Provider:
    """A provider named ``"echo"``, ``"openai"`` (any OpenAI-compatible server) or ``"anthropic"``.

    Empty ``model`` / ``base_url`` select the provider's defaults. Options that
    do not apply to the named provider are ignored (``default_query`` is
    OpenAI-only, ``default_max_tokens`` Anthropic-only). Raises ValueError for
    an unknown name.
    """
    _check_name(name)
    if name == "echo":
        from contextd.providers.echo import EchoProvider

        return EchoProvider(chunk_delay=echo_chunk_delay, model=model or "echo")
    if name == "openai":
        from contextd.providers.openai_compat import OpenAIProvider

        return OpenAIProvider(
            api_key=api_key,
            model=model,
            base_url=base_url,
            timeout=timeout,
            max_retries=max_retries,
            retry_base_delay=retry_base_delay,
            default_headers=default_headers,
            default_query=default_query,
            include_usage=openai_include_usage,
            max_tokens_param=openai_max_tokens_param,
        )
    from contextd.providers.anthropic_messages import DEFAULT_MAX_TOKENS, AnthropicProvider

    return AnthropicProvider(
        api_key=api_key,
        model=model,
        base_url=base_url,
        timeout=timeout,
        max_retries=max_retries,
        retry_base_delay=retry_base_delay,
        default_max_tokens=default_max_tokens or DEFAULT_MAX_TOKENS,
        default_headers=default_headers,
    )
