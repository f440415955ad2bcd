"""Per-caller limits: a request rate per credential and chat turns at once per user.

Both refuse with ``ResourceExhausted`` (RESOURCE_EXHAUSTED with a retry delay) before the
servicer runs, so a refused call does no work and stores nothing, and neither ever waits.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from contextd.core.errors import ResourceExhausted

# A refused turn is worth retrying once a running turn may have ended.
TURN_RETRY_S = 1.0


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """A token bucket per key: ``rate`` requests per second, up to ``burst`` at once.

    A bucket left alone long enough to be full again is the same as no bucket, so idle
    ones are dropped: the table holds only keys seen in the last ``burst / rate``
    seconds, whatever ids callers make up.
    """

    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a rate limit needs a positive rate and a burst of at least 1")
        self._rate = rate
        self._burst = burst
        self._refill_s = burst / rate
        self._clock = clock
        # Least recently used first, so dropping idle buckets looks only at the front.
        self._buckets: OrderedDict[Hashable, _Bucket] = OrderedDict()

    @property
    def tracked(self) -> int:
        """Buckets held (for tests of the memory bound)."""
        return len(self._buckets)

    def take(self, key: Hashable) -> None:
        """Spend one request of ``key``'s; raises ResourceExhausted when none is left."""
        now = self._clock()
        self._drop_idle(now)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(self._burst, now)
        else:
            self._buckets.move_to_end(key)
            bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
            bucket.updated = now
        if bucket.tokens < 1:
            wait = (1 - bucket.tokens) / self._rate
            raise ResourceExhausted(
                f"rate limit of {self._rate:g} requests per second exceeded; retry in {wait:.2f} s",
                wait,
            )
        bucket.tokens -= 1

    def _drop_idle(self, now: float) -> None:
        buckets = self._buckets
        while buckets:
            key, oldest = next(iter(buckets.items()))
            if now - oldest.updated < self._refill_s:
                return
            del buckets[key]


class TurnSlots:
    """Chat turns running at once, per user; at most ``limit`` each."""

    def __init__(self, limit: int) -> None:
        if limit <= 0:
            raise ValueError("a turn limit must be positive")
        self._limit = limit
        # Only users with a turn running: an entry goes when its count drops to zero.
        self._running: Counter[Hashable] = Counter()

    @property
    def tracked(self) -> int:
        """Users with a turn running."""
        return len(self._running)

    def acquire(self, user: Hashable) -> None:
        """Take a slot of ``user``'s; raises ResourceExhausted when all are taken. Every
        successful acquire must be followed by one ``release``."""
        if self._running[user] >= self._limit:
            raise ResourceExhausted(
                f"at most {self._limit} chat turn(s) per user may run at once; "
                "retry when a running turn has ended",
                TURN_RETRY_S,
            )
        self._running[user] += 1

    def release(self, user: Hashable) -> None:
        self._running[user] -= 1
        if self._running[user] <= 0:
            del self._running[user]
