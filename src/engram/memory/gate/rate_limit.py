"""Token buckets per agent: the Gate's rate-limit check for external writes.

Buckets live in the kernel process. Several kernel instances sharing a database each enforce
the limit on their own share of the traffic (documented in the access ADR).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from engram.memory.types import TrustLevel

#: Sustained writes per minute and burst, by trust tier; a caller's own rate overrides them.
DEFAULT_RATES: dict[TrustLevel, tuple[float, float]] = {
    TrustLevel.TRUSTED: (1200.0, 120.0),
    TrustLevel.STANDARD: (300.0, 60.0),
    TrustLevel.RESTRICTED: (60.0, 10.0),
    TrustLevel.READ_ONLY: (0.0, 0.0),
}


@dataclass(frozen=True, slots=True)
class RateDecision:
    """Whether one more write is allowed now, and if not, when it will be."""

    allowed: bool
    retry_after_seconds: float
    per_minute: float


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """One token bucket per agent id."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def acquire(self, agent_id: str, trust: TrustLevel, per_minute: float | None) -> RateDecision:
        """Take one token from the agent's bucket if it has one."""
        default_rate, default_burst = DEFAULT_RATES[trust]
        rate = default_rate if per_minute is None else per_minute
        burst = default_burst if per_minute is None else max(1.0, per_minute / 5)
        if rate <= 0:
            return RateDecision(allowed=False, retry_after_seconds=float("inf"), per_minute=0.0)
        now = self._clock()
        bucket = self._buckets.get(agent_id)
        if bucket is None:
            bucket = self._buckets[agent_id] = _Bucket(tokens=burst, updated=now)
        refill = (now - bucket.updated) * rate / 60.0
        bucket.tokens = min(burst, bucket.tokens + refill)
        bucket.updated = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return RateDecision(allowed=True, retry_after_seconds=0.0, per_minute=rate)
        wait = (1.0 - bucket.tokens) * 60.0 / rate
        return RateDecision(allowed=False, retry_after_seconds=wait, per_minute=rate)
