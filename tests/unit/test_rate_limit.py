"""The Gate's rate limiter (engram.memory.gate.rate_limit): token buckets per agent and tier."""

from __future__ import annotations

from engram.memory.gate.rate_limit import RateLimiter
from engram.memory.types import (
    TrustLevel,
)


class Clock:
    """A hand-driven monotonic clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_allows_a_burst_then_refills_over_time() -> None:
    """A bucket of rate 60/min and burst 12 allows 12 writes, then one per second."""
    clock = Clock()
    limiter = RateLimiter(clock)
    allowed = [limiter.acquire("x", TrustLevel.STANDARD, 60).allowed for _ in range(13)]
    assert [True] * 12 + [False] == allowed
    refused = limiter.acquire("x", TrustLevel.STANDARD, 60)
    assert 0.9 < refused.retry_after_seconds <= 1.0
    clock.now += 1.0
    assert limiter.acquire("x", TrustLevel.STANDARD, 60).allowed
    assert limiter.acquire("other", TrustLevel.STANDARD, 60).allowed


def test_tier_defaults_apply_without_an_override_and_read_only_never_writes() -> None:
    """Without its own rate an agent gets its tier's; read-only agents get none at all."""
    limiter = RateLimiter(Clock())
    burst = sum(limiter.acquire("r", TrustLevel.RESTRICTED, None).allowed for _ in range(20))
    assert 10 == burst
    refused = limiter.acquire("ro", TrustLevel.READ_ONLY, None)
    assert not refused.allowed
