"""Health checks: each is a named ``ping`` with a time limit; readiness is all of them passing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Probe = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """Result of one health check."""

    name: str
    ok: bool
    detail: str
    duration_ms: float


@dataclass(slots=True)
class _Check:
    name: str
    probe: Probe
    timeout_seconds: float
    cache_seconds: float = 0.0
    last: CheckOutcome | None = None
    at: float = float("-inf")
    #: The probe running now, which requests arriving meanwhile await instead of starting
    #: their own (a burst of /readyz runs each probe once, cached or not).
    running: asyncio.Future[CheckOutcome] | None = None


class HealthChecks:
    """The readiness checks of one kernel."""

    def __init__(self) -> None:
        self._checks: list[_Check] = []

    def add(
        self, name: str, probe: Probe, *, timeout_seconds: float, cache_seconds: float = 0.0
    ) -> None:
        """Register a probe that raises (or overruns ``timeout_seconds``) when unhealthy. With
        ``cache_seconds`` its outcome is reused for that long: a probe that does real work
        (the §8 write-path checks) is not run once per request of an unauthenticated flood.
        Requests arriving while a probe runs share its outcome, cached or not (fifty at once
        each ran the synthetic Gate decision, which then overran its limit: not ready)."""
        self._checks.append(_Check(name, probe, timeout_seconds, cache_seconds))

    @property
    def names(self) -> list[str]:
        """Names of the registered checks, in order."""
        return [check.name for check in self._checks]

    async def run(self) -> list[CheckOutcome]:
        """Run every check concurrently and report each outcome."""
        return list(await asyncio.gather(*(self._run_one(check) for check in self._checks)))

    @classmethod
    async def _run_one(cls, check: _Check) -> CheckOutcome:
        now = time.monotonic()
        if check.last is not None and now - check.at < check.cache_seconds:
            return check.last
        if check.running is None or check.running.done():
            check.running = asyncio.ensure_future(cls._refresh(check, now))
        # shielded: a caller that goes away does not cancel the probe the others await
        return await asyncio.shield(check.running)

    @classmethod
    async def _refresh(cls, check: _Check, now: float) -> CheckOutcome:
        check.last, check.at = await cls._probe(check), now
        return check.last

    @staticmethod
    async def _probe(check: _Check) -> CheckOutcome:
        started = time.perf_counter()
        try:
            await asyncio.wait_for(check.probe(), check.timeout_seconds)
        except TimeoutError:
            ok, detail = False, f"no answer within {check.timeout_seconds:g} s"
        except Exception as exc:  # noqa: BLE001 - any failure of a probe is "not ready"
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        else:
            ok, detail = True, "ok"
        return CheckOutcome(check.name, ok, detail, (time.perf_counter() - started) * 1000)
