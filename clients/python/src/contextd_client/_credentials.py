"""Who the client calls as: an API key, or a token provider asked again on every call.

The bearer travels as plain ``authorization`` call metadata, not as gRPC call
credentials. gRPC refuses call credentials on an insecure channel; composing them with
``grpc.local_channel_credentials()`` only works for loopback targets and not for a
channel passed in with ``channel=``, and a ``grpc.aio`` metadata plugin runs on a gRPC
thread where an async token provider cannot be awaited. Metadata works the same on a
plain-text loopback channel, a TLS channel (``credentials=``) and a channel passed in,
for both clients; TLS still protects the token on the wire when the channel has it.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

MetadataPair: TypeAlias = tuple[str, str | bytes]
CallMetadata: TypeAlias = tuple[MetadataPair, ...]

#: Returns the current token; the sync client calls it once per call.
TokenProvider: TypeAlias = Callable[[], str]
#: Returns the current token, or an awaitable of it; the async client calls it per call.
AsyncTokenProvider: TypeAlias = Callable[[], str | Awaitable[str]]

# API keys and JWTs are printable ASCII without spaces; anything else (a "Bearer "
# prefix pasted along, a trailing newline from a file) would be refused by the server
# with a generic UNAUTHENTICATED, so it is refused here with a precise message.
_TOKEN = re.compile(r"[\x21-\x7e]+")


def bearer(token: object, source: str) -> MetadataPair:
    """The ``authorization`` pair for ``token``; ``source`` names it in the ValueError."""
    if not isinstance(token, str):
        raise ValueError(f"{source} must be a str, not {type(token).__name__}")
    if not _TOKEN.fullmatch(token):
        raise ValueError(
            f"{source} must be a non-empty token of printable characters without spaces"
            " (the key or token itself, without 'Bearer ')"
        )
    return ("authorization", f"Bearer {token}")


_SYNC_ONLY = "the sync client needs a token provider that returns the token, not an awaitable"


def check_credentials(
    api_key: str | None, token: object, metadata: CallMetadata | None, *, sync: bool
) -> None:
    """Refuse ambiguous or malformed credential arguments with a ValueError."""
    if api_key is not None and token is not None:
        raise ValueError("give either api_key or token, not both")
    if token is not None and not callable(token):
        raise ValueError("token must be a callable returning the current token")
    if sync and inspect.iscoroutinefunction(token):
        raise ValueError(f"{_SYNC_ONLY} (AsyncContextClient takes an async one)")
    if (api_key is not None or token is not None) and any(
        key.lower() == "authorization" for key, _ in metadata or ()
    ):
        raise ValueError("metadata already has an authorization entry; drop it or the api_key")
    if api_key is not None:
        bearer(api_key, "api_key")


def with_pair(metadata: CallMetadata | None, pair: MetadataPair | None) -> CallMetadata | None:
    """``metadata`` with the authorization ``pair`` appended (when there is one)."""
    if pair is None:
        return metadata
    return (*(metadata or ()), pair)


def token_pair(provider: Callable[[], Any]) -> MetadataPair:
    """Ask a sync provider for the current token."""
    token = provider()
    if inspect.isawaitable(token):
        if inspect.iscoroutine(token):
            token.close()  # never to be awaited: no "never awaited" warning
        raise ValueError(_SYNC_ONLY)
    return bearer(token, "the token provider's result")


async def async_token_pair(provider: Callable[[], Any]) -> MetadataPair:
    """Ask a sync or async provider for the current token."""
    token = provider()
    if isinstance(token, Awaitable):
        token = await token
    return bearer(token, "the token provider's result")
