"""Token buckets per agent: the Gate's rate-limit check for external writes.

A bucket holds at most ``burst`` tokens and refills at ``rate`` per minute; a write takes one.
Two implementations of the same rule:

- :class:`SharedRateLimiter`, the Gate's: the bucket is a row of ``engram.rate_buckets``,
  refilled and drawn by one statement (``rate_limit.sql``), so every kernel process sharing
  the database draws on the same bucket and the limit holds however the agent's writes are
  spread over them (ADR-019);
- :class:`RateLimiter`, in the process, on an injected clock: audit replay re-runs the
  recorded decisions with it, and unit tests pin the rule down.

A test drives both through the same sequence and compares their answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from engram.infra.db import DatabaseAdapter
from engram.infra.sql import load_queries
from engram.memory.types import CallerIdentity, GateDecisionType, TrustLevel

SQL = load_queries("engram.memory.gate", "rate_limit.sql")

#: Sustained writes per minute and burst, by trust tier; a caller's own rate overrides them.
DEFAULT_RATES: dict[TrustLevel, tuple[float, float]] = {
    TrustLevel.TRUSTED: (1200.0, 120.0),
    TrustLevel.STANDARD: (300.0, 60.0),
    TrustLevel.RESTRICTED: (60.0, 10.0),
    TrustLevel.READ_ONLY: (0.0, 0.0),
}
#: The smallest rate an agent may be given (a write every 1,000 minutes, under a day).
MIN_WRITES_PER_MINUTE = 0.001
#: The largest.
MAX_WRITES_PER_MINUTE = 100_000.0


@dataclass(frozen=True, slots=True)
class RateDecision:
    """Whether one more write is allowed now, and if not, when it will be."""

    allowed: bool
    retry_after_seconds: float
    per_minute: float


def bucket_shape(trust: TrustLevel, per_minute: float | None) -> tuple[float, float]:
    """The rate per minute and the burst of an agent's bucket. A positive rate outside
    :data:`MIN_WRITES_PER_MINUTE` to :data:`MAX_WRITES_PER_MINUTE` is taken as the nearer
    end (one stored before agents were refused such a rate, or built in process): below,
    the wait before the next write would overflow to infinity, which no audit row holds,
    and PostgreSQL's refill would underflow; far above, it would overflow."""
    default_rate, default_burst = DEFAULT_RATES[trust]
    if per_minute is None:
        return default_rate, default_burst
    if per_minute > 0:
        per_minute = min(max(per_minute, MIN_WRITES_PER_MINUTE), MAX_WRITES_PER_MINUTE)
    return per_minute, max(1.0, per_minute / 5)


def _never(rate: float) -> RateDecision:
    return RateDecision(allowed=False, retry_after_seconds=float("inf"), per_minute=rate)


def _decision(allowed: bool, tokens: float, rate: float) -> RateDecision:
    if allowed:
        return RateDecision(allowed=True, retry_after_seconds=0.0, per_minute=rate)
    return RateDecision(
        allowed=False, retry_after_seconds=(1.0 - tokens) * 60.0 / rate, per_minute=rate
    )


class Limiter(Protocol):
    """What Layer 1's rate check asks (synchronously)."""

    def acquire(self, agent_id: str, trust: TrustLevel, per_minute: float | None) -> RateDecision:
        """Take one token from the agent's bucket if it has one."""
        ...


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """One token bucket per agent id, in this process."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def acquire(self, agent_id: str, trust: TrustLevel, per_minute: float | None) -> RateDecision:
        """Take one token from the agent's bucket if it has one."""
        rate, burst = bucket_shape(trust, per_minute)
        if rate <= 0:
            return _never(0.0)
        now = self._clock()
        bucket = self._buckets.get(agent_id)
        if bucket is None:
            bucket = self._buckets[agent_id] = _Bucket(tokens=burst, updated=now)
        refill = max(0.0, now - bucket.updated) * rate / 60.0
        bucket.tokens = min(burst, bucket.tokens + refill)
        bucket.updated = max(bucket.updated, now)
        allowed = bucket.tokens >= 1.0
        if allowed:
            bucket.tokens -= 1.0
        return _decision(allowed, bucket.tokens, rate)


@dataclass(frozen=True, slots=True)
class Decided:
    """A rate decision already taken (by :class:`SharedRateLimiter`), handed to Layer 1."""

    decision: RateDecision

    def acquire(self, agent_id: str, trust: TrustLevel, per_minute: float | None) -> RateDecision:
        del agent_id, trust, per_minute
        return self.decision


class SharedRateLimiter:
    """One token bucket per agent id in ``engram.rate_buckets``, shared by every kernel."""

    def __init__(self, db: DatabaseAdapter) -> None:
        self._db = db

    async def acquire(
        self, agent_id: str, trust: TrustLevel, per_minute: float | None
    ) -> RateDecision:
        """Take one token from the agent's bucket if it has one (one statement)."""
        rate, burst = bucket_shape(trust, per_minute)
        if rate <= 0:
            return _never(0.0)
        row = await self._db.fetchrow(SQL["take_token"], agent_id, rate, burst)
        if row is None:  # pragma: no cover - INSERT ... RETURNING always returns the row
            raise RuntimeError("take_token returned no row")
        return _decision(bool(row["allowed"]), float(row["tokens"]), rate)


async def settle(
    limiter: SharedRateLimiter | RateLimiter, caller: CallerIdentity, origin: GateDecisionType
) -> Limiter:
    """The limiter Layer 1 consults for one request: with the shared bucket, its decision is
    taken now (only external writes are limited, so only they draw a token)."""
    if not isinstance(limiter, SharedRateLimiter):
        return limiter
    if origin is not GateDecisionType.EXTERNAL:
        return Decided(RateDecision(allowed=True, retry_after_seconds=0.0, per_minute=0.0))
    return Decided(
        await limiter.acquire(caller.agent_id, caller.trust_level, caller.writes_per_minute)
    )
