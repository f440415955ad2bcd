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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from contextd.providers.base import Provider


@dataclass(frozen=True, slots=True)
class _Options:
    """make_provider's arguments, for whichever provider they are meant."""

    api_key: str
    base_url: str
    model: str
    timeout: float
    max_retries: int
    retry_base_delay: float
    default_headers: Mapping[str, str] | None
    default_query: Mapping[str, str] | None
    default_max_tokens: int | None
    openai_include_usage: bool
    openai_max_tokens_param: Literal["max_tokens", "max_completion_tokens"]
    echo_chunk_delay: float


def _echo(o: _Options) -> Provider:
    from contextd.providers.echo import EchoProvider

    return EchoProvider(chunk_delay=o.echo_chunk_delay, model=o.model or "echo")


def _openai(o: _Options) -> Provider:
    from contextd.providers.openai_compat import OpenAIProvider

    return OpenAIProvider(
        api_key=o.api_key,
        model=o.model,
        base_url=o.base_url,
        timeout=o.timeout,
        max_retries=o.max_retries,
        retry_base_delay=o.retry_base_delay,
        default_headers=o.default_headers,
        default_query=o.default_query,
        include_usage=o.openai_include_usage,
        max_tokens_param=o.openai_max_tokens_param,
    )


def _anthropic(o: _Options) -> Provider:
    from contextd.providers.anthropic_messages import DEFAULT_MAX_TOKENS, AnthropicProvider

    return AnthropicProvider(
        api_key=o.api_key,
        model=o.model,
        base_url=o.base_url,
        timeout=o.timeout,
        max_retries=o.max_retries,
        retry_base_delay=o.retry_base_delay,
        default_max_tokens=o.default_max_tokens or DEFAULT_MAX_TOKENS,
        default_headers=o.default_headers,
    )


@dataclass(frozen=True, slots=True)
class _Kind:
    build: Callable[[_Options], Provider]
    # Where its API key may be set, first found first; none: it needs no key.
    key_variables: tuple[str, ...]


# Each imports its SDK only when built.
_KINDS: dict[str, _Kind] = {
    "echo": _Kind(_echo, ()),
    "openai": _Kind(_openai, ("CONTEXTD_OPENAI_API_KEY", "OPENAI_API_KEY")),
    "anthropic": _Kind(_anthropic, ("CONTEXTD_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY")),
}
PROVIDER_NAMES = tuple(_KINDS)


def _kind(name: str) -> _Kind:
    kind = _KINDS.get(name)
    if kind is None:
        raise ValueError(f"unknown provider {name!r}; expected one of {', '.join(PROVIDER_NAMES)}")
    return kind


def api_key_from_env(provider: str, environ: Mapping[str, str] | None = None) -> str:
    """The provider's API key from the environment, "" when unset (echo needs none).

    openai: ``CONTEXTD_OPENAI_API_KEY``, else ``OPENAI_API_KEY``;
    anthropic: ``CONTEXTD_ANTHROPIC_API_KEY``, else ``ANTHROPIC_API_KEY``.
    Blank values count as unset.
    """
    variables = _kind(provider).key_variables
    env = os.environ if environ is None else environ
    for variable in variables:
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
    build = _kind(name).build
    return build(
        _Options(
            api_key=api_key,
            base_url=base_url,
            model=model,
            timeout=timeout,
            max_retries=max_retries,
            retry_base_delay=retry_base_delay,
            default_headers=default_headers,
            default_query=default_query,
            default_max_tokens=default_max_tokens,
            openai_include_usage=openai_include_usage,
            openai_max_tokens_param=openai_max_tokens_param,
            echo_chunk_delay=echo_chunk_delay,
        )
    )
