"""Provider failures, as a host can understand them. Messages never contain API keys."""

from __future__ import annotations

from contextd.core.errors import ContextdError


class ProviderError(ContextdError):
    """A model call failed."""

    def __init__(self, provider: str, message: str) -> None:
        self.provider = provider
        super().__init__(f"{provider}: {message}")


class ProviderAuthError(ProviderError):
    """The provider rejected the configured credentials (401/403)."""


class ProviderRateLimited(ProviderError):
    """The provider asked us to slow down (429); ``retry_after`` in seconds when it said."""

    def __init__(self, provider: str, message: str, retry_after: float | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(provider, message)


class ProviderUnavailable(ProviderError):
    """The provider could not be reached or kept failing (5xx, timeouts) after retries."""


class ProviderBadResponse(ProviderError):
    """The provider's stream broke its documented format, or the request was refused (4xx)."""
