"""Opt-in retries of unary calls that fail with UNAVAILABLE, with exponential backoff."""

from __future__ import annotations

import random
from dataclasses import dataclass

import grpc


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a client retries a unary call that failed with UNAVAILABLE.

    A call is tried at most ``attempts`` times. Before retry ``n`` (1 for the first)
    the client waits ``min(max_backoff, initial_backoff * multiplier ** (n - 1))``
    seconds, varied at random by up to ``jitter`` times that (0.2: +-20%) so that
    clients that failed together do not retry together. Each attempt has the client's
    whole ``timeout`` and asks a token provider for its token again.

    Only unary calls are retried. StreamChat and ExportEvents never are: a turn or an
    export that failed, even before its first event, raises at once.
    """

    attempts: int = 3
    initial_backoff: float = 0.1
    max_backoff: float = 2.0
    multiplier: float = 2.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            raise TypeError(f"attempts must be an int, not {type(self.attempts).__name__}")
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1, not {self.attempts}")
        if self.initial_backoff < 0 or self.max_backoff < 0:
            raise ValueError("initial_backoff and max_backoff must not be negative")
        if self.multiplier < 1:
            raise ValueError(f"multiplier must be at least 1, not {self.multiplier}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be between 0 and 1, not {self.jitter}")

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first)."""
        delay = min(self.max_backoff, self.initial_backoff * self.multiplier ** (retry - 1))
        return delay * random.uniform(1 - self.jitter, 1 + self.jitter)


def retry_delay(policy: RetryPolicy | None, error: grpc.RpcError, attempt: int) -> float | None:
    """Seconds to wait before trying again after ``attempt`` failed; None: raise ``error``."""
    if policy is None or attempt >= policy.attempts:
        return None
    code = getattr(error, "code", None)
    if not callable(code) or code() != grpc.StatusCode.UNAVAILABLE:
        return None
    return policy.backoff(attempt)
