"""The token bucket and the turn slots behind ``--rate-limit`` and
``--max-concurrent-turns``, on a clock the test moves."""

from __future__ import annotations

import pytest
from contextd.core.errors import ResourceExhausted
from contextd.fronts.grpc.limits import RateLimiter, TurnSlots


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=2, burst=3, clock=clock)
    for _ in range(3):
        limiter.take("k")
    with pytest.raises(ResourceExhausted) as refused:
        limiter.take("k")
    assert refused.value.retry_after_s == pytest.approx(0.5)
    clock.now += 0.25
    with pytest.raises(ResourceExhausted) as again:
        limiter.take("k")
    assert again.value.retry_after_s == pytest.approx(0.25)  # a refusal spends nothing
    clock.now += 0.25
    limiter.take("k")
    limiter.take("other")  # its own bucket


def test_a_bucket_never_holds_more_than_the_burst() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=1, burst=2, clock=clock)
    limiter.take("k")
    clock.now += 3600
    limiter.take("k")
    limiter.take("k")
    with pytest.raises(ResourceExhausted):
        limiter.take("k")


def test_idle_buckets_are_dropped() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=10, burst=20, clock=clock)  # full again after 2 s
    for n in range(50_000):
        limiter.take(f"made-up-{n}")
        clock.now += 0.001
    # Only the keys of the last 2 s are held, not all 50 000.
    assert limiter.tracked <= 2001
    clock.now += 2
    limiter.take("k")
    assert limiter.tracked == 1


def test_only_buckets_full_again_are_dropped() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=1, burst=1, clock=clock)
    limiter.take("busy")
    clock.now += 0.5
    limiter.take("idle-later")
    clock.now += 0.6  # "busy" is full again, "idle-later" not yet
    with pytest.raises(ResourceExhausted):
        limiter.take("idle-later")
    assert limiter.tracked == 1
    limiter.take("busy")


@pytest.mark.parametrize(("rate", "burst"), [(0, 1), (-1, 2), (1, 0.5)])
def test_a_limiter_needs_a_rate_and_a_burst(rate: float, burst: float) -> None:
    with pytest.raises(ValueError, match="rate"):
        RateLimiter(rate, burst)


def test_turn_slots_per_user() -> None:
    slots = TurnSlots(2)
    slots.acquire("a")
    slots.acquire("a")
    with pytest.raises(ResourceExhausted) as refused:
        slots.acquire("a")
    assert refused.value.retry_after_s > 0
    slots.acquire("b")
    slots.release("a")
    slots.acquire("a")
    for user in ("a", "a", "b"):
        slots.release(user)
    assert slots.tracked == 0
