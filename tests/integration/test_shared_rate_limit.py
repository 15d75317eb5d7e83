"""The shared token bucket (SharedRateLimiter, engram.rate_buckets) against the in-process one
(RateLimiter): the same rule, one bucket per agent across every pool, and the Gate's use of it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import asyncpg
import pytest

from engram import Kernel
from engram.infra.postgres import PostgresDatabase
from engram.infra.resilience import CircuitBreaker, Resilience
from engram.memory.gate.rate_limit import RateDecision, RateLimiter, SharedRateLimiter
from engram.memory.types import CallerIdentity, GateDecision, GateDecisionType, TrustLevel
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import READ_ONLY, STANDARD, belief, create

STD = TrustLevel.STANDARD
#: 30 writes per minute: a burst of 6, then one token every 2 s.
SLOW = 30.0
SLOW_BURST = 6


class Clock:
    """A hand-set monotonic clock for the in-process limiter."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _pool(database: ScratchDatabase) -> PostgresDatabase:
    return await PostgresDatabase.connect(
        database.runtime_url,
        resilience=Resilience(CircuitBreaker("postgres"), retries=3, initial_wait_seconds=0.01),
        min_size=1,
        max_size=4,
    )


@pytest.fixture
async def pools(database: ScratchDatabase) -> AsyncIterator[tuple[PostgresDatabase, ...]]:
    """Two separate pools on the test database, as two kernel processes would have."""
    first, second = await _pool(database), await _pool(database)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def bucket(database: ScratchDatabase, agent_id: str) -> asyncpg.Record | None:
    """The agent's row of engram.rate_buckets, read as the superuser."""
    admin = await asyncpg.connect(database.admin_url)
    try:
        row: asyncpg.Record | None = await admin.fetchrow(
            "SELECT tokens, updated_at, allowed FROM engram.rate_buckets WHERE agent_id = $1",
            agent_id,
        )
        return row
    finally:
        await admin.close()


async def bucket_rows(database: ScratchDatabase) -> int:
    """How many buckets there are."""
    admin = await asyncpg.connect(database.admin_url)
    try:
        return int(await admin.fetchval("SELECT count(*) FROM engram.rate_buckets"))
    finally:
        await admin.close()


# A burst then waits, at 60 writes per minute (burst 12, one token a second). Each step is
# (seconds to wait before it, acquires made at once). The token counts each step meets stay at
# least 0.3 from the threshold of 1, so real-time jitter cannot flip an answer.
RATE = 60.0
STEPS: list[tuple[float, int]] = [
    (0.0, 14),  # 12 allowed, then 2 refused (0 tokens)
    (0.3, 1),  # 0.3: refused
    (0.3, 1),  # 0.6: refused
    (0.7, 2),  # 1.3: allowed (0.3 left), refused
    (0.3, 1),  # 0.6: refused
    (0.8, 2),  # 1.4: allowed (0.4 left), refused
    (0.3, 1),  # 0.7: refused
    (1.5, 3),  # 2.2: allowed, allowed (0.2 left), refused
]
EXPECTED = [True] * 12 + [False] * 2 + [False, False, True, False, False, True, False, False]
EXPECTED += [True, True, False]


def _in_process(times: list[float], agent_id: str = "a") -> list[RateDecision]:
    clock = Clock()
    limiter = RateLimiter(clock)
    decisions = []
    for at in times:
        clock.now = at
        decisions.append(limiter.acquire(agent_id, STD, RATE))
    return decisions


@pytest.mark.slow
async def test_shared_and_in_process_limiters_agree_on_a_burst_then_waits(
    pools: tuple[PostgresDatabase, ...],
) -> None:
    """The same sequence through the database's bucket (in real time) and the in-process one
    (its clock set to the same elapsed times) gets the same answers, and retry-afters within
    a tenth of a second; both are the answers the rule predicts."""
    shared = SharedRateLimiter(pools[0])
    started = time.monotonic()
    times: list[float] = []
    decisions: list[RateDecision] = []
    for wait, count in STEPS:
        if wait:
            await asyncio.sleep(wait)
        for _ in range(count):
            times.append(time.monotonic() - started)
            decisions.append(await shared.acquire("agent-steady", STD, RATE))
    local = _in_process(times)
    assert [d.allowed for d in local] == [d.allowed for d in decisions]
    assert EXPECTED == [d.allowed for d in decisions]
    for ours, theirs in zip(local, decisions, strict=True):
        assert RATE == ours.per_minute == theirs.per_minute
        assert math.isclose(ours.retry_after_seconds, theirs.retry_after_seconds, abs_tol=0.1)
        if not theirs.allowed:
            assert 0 < theirs.retry_after_seconds <= 60 / RATE

    # The in-process limiter on the nominal times gives the same answers again.
    nominal, elapsed = [], 0.0
    for wait, count in STEPS:
        elapsed += wait
        nominal += [elapsed] * count
    assert EXPECTED == [d.allowed for d in _in_process(nominal)]


async def test_two_pools_share_one_bucket_and_spend_the_burst_once(
    pools: tuple[PostgresDatabase, ...], database: ScratchDatabase
) -> None:
    """Acquires alternating between two pools draw on one bucket: 6 allowed in all, then
    refusals from both, each naming the same retry-after horizon."""
    first, second = (SharedRateLimiter(pool) for pool in pools)
    answers = []
    for n in range(20):
        limiter = first if n % 2 == 0 else second
        answers.append(await limiter.acquire("agent-roaming", STD, SLOW))
    assert [True] * SLOW_BURST + [False] * 14 == [a.allowed for a in answers]
    refused = answers[SLOW_BURST:]
    assert all(0 < a.retry_after_seconds <= 60 / SLOW for a in refused)
    row = await bucket(database, "agent-roaming")
    assert row is not None
    assert 0 <= row["tokens"] < 1
    assert row["allowed"] is False
    assert 1 == await bucket_rows(database)
    # Another agent has a bucket of its own, full.
    assert (await second.acquire("agent-other", STD, SLOW)).allowed
    assert 2 == await bucket_rows(database)


@pytest.mark.slow
@pytest.mark.parametrize("existing", [False, True], ids=["new-bucket", "existing-bucket"])
async def test_concurrent_acquires_from_two_pools_never_exceed_the_burst(
    pools: tuple[PostgresDatabase, ...], database: ScratchDatabase, existing: bool
) -> None:
    """50 acquires at once, half through each pool, allow the burst and no more (plus what the
    bucket refilled while they ran), whether they race to create the bucket or draw on one."""
    first, second = (SharedRateLimiter(pool) for pool in pools)
    agent = f"agent-crowd-{existing}"
    available = float(SLOW_BURST)
    if existing:
        assert (await first.acquire(agent, STD, SLOW)).allowed
        available -= 1
    started = time.monotonic()
    answers = await asyncio.gather(
        *((first if n % 2 == 0 else second).acquire(agent, STD, SLOW) for n in range(50))
    )
    elapsed = time.monotonic() - started + 0.05
    allowed = sum(a.allowed for a in answers)
    refill = elapsed * SLOW / 60
    assert available <= allowed <= available + refill, (allowed, elapsed)
    assert all(a.retry_after_seconds > 0 for a in answers if not a.allowed)
    row = await bucket(database, agent)
    assert row is not None
    assert 0 <= row["tokens"] < 1


async def test_read_only_trust_never_writes_and_leaves_no_bucket(
    pools: tuple[PostgresDatabase, ...], database: ScratchDatabase
) -> None:
    """A read-only agent's tier has no rate: refused forever by both limiters, and the shared
    one does not even create a bucket row for it."""
    shared = SharedRateLimiter(pools[0])
    local = RateLimiter(Clock())
    for _ in range(3):
        for decision in (
            await shared.acquire("agent-reader", TrustLevel.READ_ONLY, None),
            local.acquire("agent-reader", TrustLevel.READ_ONLY, None),
        ):
            assert not decision.allowed
            assert math.isinf(decision.retry_after_seconds)
            assert 0.0 == decision.per_minute
    assert 0 == await bucket_rows(database)


async def test_a_zero_rate_is_refused_without_a_bucket(
    pools: tuple[PostgresDatabase, ...], database: ScratchDatabase
) -> None:
    """An agent whose own rate is 0 per minute may not write at all, whatever its tier."""
    shared = SharedRateLimiter(pools[0])
    decision = await shared.acquire("agent-muted", TrustLevel.TRUSTED, 0.0)
    assert not decision.allowed
    assert math.isinf(decision.retry_after_seconds)
    assert 0 == await bucket_rows(database)


@pytest.mark.slow
async def test_a_changed_per_minute_rate_applies_to_refill_and_burst(
    pools: tuple[PostgresDatabase, ...],
) -> None:
    """Raising the rate refills at the new rate at once; lowering it caps the tokens at the new
    (smaller) burst. The in-process limiter answers the same."""
    shared = SharedRateLimiter(pools[0])
    clock = Clock()
    local = RateLimiter(clock)
    started = time.monotonic()

    async def both(agent: str, per_minute: float) -> bool:
        clock.now = time.monotonic() - started
        theirs = (await shared.acquire(agent, STD, per_minute)).allowed
        ours = local.acquire(agent, STD, per_minute).allowed
        assert ours == theirs, (agent, per_minute, clock.now)
        return theirs

    # Spend a burst of 6 at 30 per minute (one token every 2 s).
    assert [True] * 6 + [False] == [await both("agent-raised", SLOW) for _ in range(7)]
    await asyncio.sleep(0.5)
    # 0.5 s refill 0.25 tokens at 30/min, but 5 tokens at 600/min: the new rate applies.
    assert not await both("agent-raised", SLOW)
    await asyncio.sleep(0.5)
    assert [True] * 4 == [await both("agent-raised", 600.0) for _ in range(4)]

    # A bucket full at 600 per minute (burst 120) lowered to 10 per minute (burst 2): two
    # writes, then one every 6 s.
    assert await both("agent-lowered", 600.0)
    assert [True, True, False] == [await both("agent-lowered", 10.0) for _ in range(3)]


async def test_gate_allows_exactly_the_burst_then_rejects_with_retry_after(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """External CREATEs by an agent allowed 30 writes a minute: six approved, then rejected by
    Layer 1's rate_limit check with a retry-after; internal writes by the same agent are never
    limited and draw no token."""
    caller = replace(STANDARD, agent_id="agent-thirty", writes_per_minute=SLOW)
    results = []
    for n in range(8):
        request = create(
            belief(f"Rate fact {n}: the limiter counts writes.", **_by(caller)), caller
        )
        results.append(await kernel.gate.evaluate(request))
    assert [GateDecision.APPROVED] * 6 + [GateDecision.REJECTED] * 2 == [
        r.decision for r in results
    ]
    for rejected in results[6:]:
        failed = [c for c in rejected.layer1_checks if not c.passed]
        assert ["rate_limit"] == [c.name for c in failed]
        assert "more than 30 writes per minute" in failed[0].detail
        assert rejected.retry_after_seconds is not None
        assert 0 < rejected.retry_after_seconds <= 2.0
    failures = kernel.metrics.registry.get_sample_value(
        "engram_gate_layer1_failures_total", {"check": "rate_limit"}
    )
    assert 2 == failures

    row = await bucket(database, "agent-thirty")
    assert row is not None
    for origin in (GateDecisionType.SELF_HEALING, GateDecisionType.CONSOLIDATION):
        for n in range(8):
            request = create(
                belief(f"Internal fact {n} by {origin.value} is not limited.", **_by(caller)),
                caller,
                origin,
            )
            result = await kernel.gate.evaluate(request)
            assert GateDecision.APPROVED == result.decision, result.reason
            assert result.retry_after_seconds is None
    assert row == await bucket(database, "agent-thirty")  # no token drawn, nothing refilled


async def test_gate_refuses_a_read_only_caller_without_a_bucket(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A read-only caller's external write is rejected and draws on no bucket."""
    result = await kernel.gate.evaluate(
        create(belief("Readers cannot write.", **_by(READ_ONLY)), READ_ONLY)
    )
    assert GateDecision.REJECTED == result.decision
    failed = {c.name for c in result.layer1_checks if not c.passed}
    assert "rate_limit" in failed
    assert 0 == await bucket_rows(database)


def _by(caller: CallerIdentity) -> dict[str, str]:
    return {"source_agent": caller.agent_id}
