"""Circuit breaker and retry policy for calls to infrastructure.

Order: the retry loop sits *outside* the breaker. Each attempt is one call through the
breaker, so five failed attempts (from any callers) open it, and once it is open the retry
loop stops at once (:class:`~engram.errors.CircuitOpen` is never retried) instead of sleeping
through 1 + 2 + 4 s against a dependency known to be down. See ADR-001.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import aiobreaker
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)
from tenacity.wait import wait_base

from engram.errors import (
    BusinessError,
    CircuitOpen,
    DatabaseUnavailable,
    EmbeddingError,
    TransientDatabaseError,
)

T = TypeVar("T")

#: Failures that say "the dependency is unwell"; anything else (a refused request, a bug in a
#: query) passes through the breaker without counting.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    DatabaseUnavailable,
    EmbeddingError,
    OSError,
    TimeoutError,
)

#: Failures worth another attempt: the next try may well succeed.
RETRYABLE_ERRORS: tuple[type[BaseException], ...] = (DatabaseUnavailable, TransientDatabaseError)


def backoff(
    initial_seconds: float, retries: int, *, jitter_seconds: float | None = None
) -> wait_base:
    """Waits of ``initial * 2**k`` (1, 2, 4 s by default) plus up to ``jitter_seconds`` (a
    quarter of ``initial`` unless given)."""
    ceiling = initial_seconds * 2 ** max(retries - 1, 0)
    jitter = initial_seconds / 4 if jitter_seconds is None else jitter_seconds
    return wait_exponential(multiplier=initial_seconds, exp_base=2, max=ceiling) + wait_random(
        0, jitter
    )


def _not_an_outage(exc: BaseException) -> bool:
    return not isinstance(exc, OUTAGE_ERRORS)


class _Lengthening(aiobreaker.CircuitBreakerListener):  # type: ignore[misc]  # untyped base
    """Sets how long each opening lasts: ``first`` when the breaker opens from closed,
    twice the last opening (at most ``ceiling``) when a half-open probe fails."""

    def __init__(self, first: timedelta, ceiling: timedelta) -> None:
        self.first, self.ceiling = first, ceiling

    def state_change(self, breaker: Any, old: Any, new: Any) -> None:
        if new.state is not aiobreaker.CircuitBreakerState.OPEN:
            return
        probe_failed = old is not None and old.state is aiobreaker.CircuitBreakerState.HALF_OPEN
        last: timedelta = breaker.timeout_duration
        breaker.timeout_duration = min(self.ceiling, last * 2) if probe_failed else self.first


class CircuitBreaker:
    """aiobreaker with engram's defaults, a single half-open probe and openings that lengthen.

    aiobreaker lets every caller through once the reset timeout has passed; this wrapper
    admits exactly one probe at a time until the breaker closes again. The first opening
    lasts ``first_reset_seconds``, and each failed probe doubles the next, up to
    ``reset_seconds``: a database that restarts in a second (every backend is reset when
    one crashes) is back in use within about a second, while one that stays down is probed
    ever less often.
    """

    def __init__(
        self,
        name: str,
        *,
        fail_max: int = 5,
        reset_seconds: float = 30.0,
        first_reset_seconds: float = 1.0,
    ) -> None:
        self.name = name
        first = timedelta(seconds=min(first_reset_seconds, reset_seconds))
        self._breaker = aiobreaker.CircuitBreaker(
            fail_max=fail_max,
            timeout_duration=first,
            # Business outcomes (validation, version conflict, quarantine) never trip it.
            exclude=[BusinessError, _not_an_outage],
            listeners=[_Lengthening(first, timedelta(seconds=reset_seconds))],
            name=name,
        )
        self._probing = False

    @property
    def state(self) -> str:
        """``closed``, ``open`` or ``half_open``."""
        return str(self._breaker.current_state.name).lower()

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn`` through the breaker; raise :class:`CircuitOpen` while it is open."""
        if self.state == "closed":
            return await self._guarded(fn)
        if self._probing:
            raise CircuitOpen(dependency=self.name, retry_after_seconds=self._retry_after())
        self._probing = True
        try:
            return await self._guarded(fn)
        finally:
            self._probing = False

    async def _guarded(self, fn: Callable[[], Awaitable[T]]) -> T:
        try:
            result: T = await self._breaker.call_async(fn)
        except aiobreaker.CircuitBreakerError as exc:
            raise CircuitOpen(
                dependency=self.name, retry_after_seconds=self._retry_after()
            ) from exc.__cause__
        return result

    def _retry_after(self) -> float:
        opened: datetime | None = (
            self._breaker._state_storage.opened_at
        )  # aiobreaker exposes no getter
        opening: timedelta = self._breaker.timeout_duration
        if opened is None:
            return opening.total_seconds()
        opened_at = opened.replace(tzinfo=UTC) if opened.tzinfo is None else opened
        remaining = (opened_at + opening - datetime.now(UTC)).total_seconds()
        return max(remaining, 0.0)


class Resilience:
    """Retry (with exponential backoff and jitter) around a circuit breaker."""

    def __init__(
        self,
        breaker: CircuitBreaker,
        *,
        retries: int = 3,
        initial_wait_seconds: float = 1.0,
    ) -> None:
        self.breaker = breaker
        self._retries = retries
        self._initial_wait = initial_wait_seconds

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn``; on a retryable error wait 1, 2, 4 s (plus jitter) and try again.

        The first attempt runs without the retry loop: setting one up cost about 0.12 ms a
        call (every database call of a write goes through here), and almost every call
        succeeds at once. Only a failed first attempt starts tenacity, for the attempts left,
        with the same waits as one loop would have made.
        """
        jitter = self._initial_wait / 4
        try:
            return await self.breaker.call(fn)
        except RETRYABLE_ERRORS:
            if self._retries < 1:
                raise
        await asyncio.sleep(self._initial_wait + random.uniform(0, jitter))  # noqa: S311
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self._retries),
            # after the second attempt: 2 s, then 4 s (the first wait was slept above)
            wait=backoff(self._initial_wait * 2, self._retries - 1, jitter_seconds=jitter),
            retry=retry_if_exception_type(RETRYABLE_ERRORS),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await self.breaker.call(fn)
        raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover
