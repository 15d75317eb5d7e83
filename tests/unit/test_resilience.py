"""Circuit breaker and retry policy (pure logic: the guarded calls are plain coroutines)."""

from __future__ import annotations

import asyncio

import pytest

from engram.errors import (
    CircuitOpen,
    DatabaseUnavailable,
    TransientDatabaseError,
    ValidationFailed,
    VersionConflict,
)
from engram.infra.resilience import CircuitBreaker, Resilience, backoff


class Flaky:
    """A call that fails with ``error`` for its first ``failures`` invocations."""

    def __init__(self, failures: int, error: Exception) -> None:
        self.failures = failures
        self.error = error
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"


async def _fail_times(breaker: CircuitBreaker, times: int, error: Exception) -> None:
    for _ in range(times):
        with pytest.raises((type(error), CircuitOpen)):
            await breaker.call(Flaky(1, error))


async def test_breaker_opens_after_five_consecutive_outages() -> None:
    """Five outage failures in a row open the breaker; the next call fails fast."""
    breaker = CircuitBreaker("db", fail_max=5, reset_seconds=30)
    await _fail_times(breaker, 5, DatabaseUnavailable())
    assert "open" == breaker.state
    never = Flaky(0, DatabaseUnavailable())
    with pytest.raises(CircuitOpen) as caught:
        await breaker.call(never)
    assert 0 == never.calls
    assert 0 < caught.value.retry_after_seconds <= 30


async def test_each_failed_probe_doubles_the_opening_up_to_the_ceiling() -> None:
    """Opened from closed, the breaker stays open ``first_reset_seconds``; each failed probe
    doubles the next opening (capped at ``reset_seconds``); a successful probe closes it,
    and the next opening is the first again."""
    breaker = CircuitBreaker("db", fail_max=1, reset_seconds=0.3, first_reset_seconds=0.08)
    openings = []
    for _ in range(4):  # the failure that opens it, then three failed probes
        with pytest.raises(CircuitOpen) as caught:
            await breaker.call(Flaky(1, DatabaseUnavailable()))
        openings.append(caught.value.retry_after_seconds)
        with pytest.raises(CircuitOpen):  # no probe before the opening has passed
            await breaker.call(Flaky(0, DatabaseUnavailable()))
        await asyncio.sleep(caught.value.retry_after_seconds + 0.02)
    assert openings == pytest.approx([0.08, 0.16, 0.3, 0.3], abs=0.03)
    assert "ok" == await breaker.call(Flaky(0, DatabaseUnavailable()))
    assert "closed" == breaker.state
    with pytest.raises(CircuitOpen) as caught:
        await breaker.call(Flaky(1, DatabaseUnavailable()))
    assert caught.value.retry_after_seconds == pytest.approx(0.08, abs=0.03)


async def test_the_first_opening_is_never_longer_than_the_ceiling() -> None:
    """A ceiling below the first opening wins: an operator's short reset stays short."""
    breaker = CircuitBreaker("db", fail_max=1, reset_seconds=0.05, first_reset_seconds=1.0)
    await _fail_times(breaker, 1, DatabaseUnavailable())
    with pytest.raises(CircuitOpen) as caught:
        await breaker.call(Flaky(0, DatabaseUnavailable()))
    assert caught.value.retry_after_seconds <= 0.05


async def test_business_errors_never_trip_the_breaker() -> None:
    """Validation and version conflicts pass through without counting as failures."""
    breaker = CircuitBreaker("db", fail_max=2)
    for error in [ValidationFailed(errors=["x"]), VersionConflict(expected=1, actual=2)] * 3:
        with pytest.raises(type(error)):
            await breaker.call(Flaky(1, error))
    assert "closed" == breaker.state


async def test_a_success_resets_the_failure_count() -> None:
    """Failures must be consecutive to open the breaker."""
    breaker = CircuitBreaker("db", fail_max=3)
    await _fail_times(breaker, 2, DatabaseUnavailable())
    assert "ok" == await breaker.call(Flaky(0, DatabaseUnavailable()))
    await _fail_times(breaker, 2, DatabaseUnavailable())
    assert "closed" == breaker.state


async def test_half_open_admits_a_single_probe() -> None:
    """After the reset timeout one probe goes through; concurrent callers are refused."""
    breaker = CircuitBreaker("db", fail_max=1, reset_seconds=0.05)
    await _fail_times(breaker, 1, DatabaseUnavailable())
    await asyncio.sleep(0.06)
    release = asyncio.Event()
    probes = 0

    async def slow_probe() -> str:
        nonlocal probes
        probes += 1
        await release.wait()
        return "ok"

    first = asyncio.create_task(breaker.call(slow_probe))
    await asyncio.sleep(0)
    with pytest.raises(CircuitOpen):
        await breaker.call(slow_probe)
    release.set()
    assert "ok" == await first
    assert 1 == probes
    assert "closed" == breaker.state


async def test_failed_probe_reopens_the_breaker() -> None:
    """A probe that fails opens the breaker again."""
    breaker = CircuitBreaker("db", fail_max=1, reset_seconds=0.05)
    await _fail_times(breaker, 1, DatabaseUnavailable())
    await asyncio.sleep(0.06)
    with pytest.raises(CircuitOpen):
        await breaker.call(Flaky(1, DatabaseUnavailable()))
    assert "open" == breaker.state


async def test_retry_recovers_from_transient_failures() -> None:
    """Connection and transient errors are retried until the call succeeds."""
    policy = Resilience(CircuitBreaker("db"), retries=3, initial_wait_seconds=0.001)
    flaky = Flaky(2, DatabaseUnavailable())
    assert "ok" == await policy.call(flaky)
    assert 3 == flaky.calls
    flaky = Flaky(1, TransientDatabaseError("deadlock", sqlstate="40P01"))
    assert "ok" == await policy.call(flaky)


async def test_retry_gives_up_after_three_retries() -> None:
    """The first attempt plus three retries, then the last error is raised."""
    policy = Resilience(CircuitBreaker("db", fail_max=10), retries=3, initial_wait_seconds=0.001)
    flaky = Flaky(10, DatabaseUnavailable())
    with pytest.raises(DatabaseUnavailable):
        await policy.call(flaky)
    assert 4 == flaky.calls


async def test_business_errors_are_not_retried() -> None:
    """A validation error or version conflict is raised at once, after one attempt."""
    policy = Resilience(CircuitBreaker("db"), retries=3, initial_wait_seconds=0.001)
    for error in (ValidationFailed(errors=["bad"]), VersionConflict(expected=1, actual=2)):
        flaky = Flaky(5, error)
        with pytest.raises(type(error)):
            await policy.call(flaky)
        assert 1 == flaky.calls


async def test_open_breaker_stops_the_retry_loop() -> None:
    """Once the breaker opens, retrying stops instead of waiting out the backoff."""
    policy = Resilience(CircuitBreaker("db", fail_max=2), retries=3, initial_wait_seconds=0.001)
    flaky = Flaky(10, DatabaseUnavailable())
    with pytest.raises(CircuitOpen):
        await policy.call(flaky)
    assert 2 == flaky.calls


def test_default_waits_grow_one_two_four_seconds() -> None:
    """The default backoff waits about 1, 2 and 4 seconds (plus at most 0.25 s jitter)."""
    from tenacity import RetryCallState  # noqa: PLC0415

    wait = backoff(1.0, 3)
    waits = []
    for number in (1, 2, 3):
        state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})  # type: ignore[arg-type]
        state.attempt_number = number
        waits.append(wait(state))
    for got, base in zip(waits, (1.0, 2.0, 4.0), strict=True):
        assert base <= got <= base + 0.25


@pytest.mark.parametrize(("retries", "factors"), [(1, (1,)), (3, (1, 2, 4))])
async def test_waits_between_attempts_double_from_the_first(
    monkeypatch: pytest.MonkeyPatch, retries: int, factors: tuple[int, ...]
) -> None:
    """The first attempt runs outside the retry loop; the waits before the later attempts
    are still 1, 2 and 4 times the initial wait, plus at most a quarter of it (the sleeps
    are recorded, not slept)."""
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", record)
    initial = 1.0
    policy = Resilience(
        CircuitBreaker("db", fail_max=10), retries=retries, initial_wait_seconds=initial
    )
    flaky = Flaky(10, DatabaseUnavailable())
    with pytest.raises(DatabaseUnavailable):
        await policy.call(flaky)
    assert retries + 1 == flaky.calls
    assert len(factors) == len(slept)
    for seconds, factor in zip(slept, factors, strict=True):
        assert initial * factor <= seconds <= initial * factor + initial / 4


async def test_no_retries_means_one_attempt() -> None:
    """With ``retries=0`` a retryable error is raised after the only attempt."""
    policy = Resilience(CircuitBreaker("db"), retries=0, initial_wait_seconds=0.001)
    flaky = Flaky(1, DatabaseUnavailable())
    with pytest.raises(DatabaseUnavailable):
        await policy.call(flaky)
    assert 1 == flaky.calls
