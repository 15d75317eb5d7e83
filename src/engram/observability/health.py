"""Health checks: each is a named ``ping`` with a time limit; readiness is all of them passing.

A failing check's reason may name hosts, ports, socket paths or counts of records. It is kept
in :attr:`CheckOutcome.detail` for the log and for callers cleared to see it; everyone else
gets :attr:`CheckOutcome.summary`, which says only whether the check failed or ran out of
time. A password in a connection string is masked even in the detail.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import structlog

log = structlog.get_logger("engram.health")

T = TypeVar("T")

Probe = Callable[[], Awaitable[None]]

#: The user-information part of a URL (``postgresql://user:password@``) and a ``password=``
#: of a key-value connection string: masked in every reason kept or logged.
_CREDENTIALS = (
    (re.compile(r"(?i)([a-z][a-z0-9+.-]*://)[^/@\s]*@"), r"\1***@"),
    (re.compile(r"(?i)(password\s*=\s*)('[^']*'|\S+)"), r"\1***"),
)


def masked(text: str) -> str:
    """``text`` with the credentials of any connection string in it replaced by ``***``."""
    for pattern, replacement in _CREDENTIALS:
        text = pattern.sub(replacement, text)
    return text


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """Result of one health check."""

    name: str
    ok: bool
    detail: str
    duration_ms: float
    timed_out: bool = False

    @property
    def summary(self) -> str:
        """The reason anyone may be told: ``ok``, ``timed out`` or ``failed``."""
        if self.ok:
            return "ok"
        return "timed out" if self.timed_out else "failed"


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
    #: The (ok, detail) last logged, so that a flood of probes of a failing check logs its
    #: failure once, and its recovery once.
    logged: tuple[bool, str] = (True, "ok")
    #: A probe that overran its limit and has not returned since (cancelled, but a hung
    #: database may not let it end): no other is started beside it.
    stuck: asyncio.Task[None] | None = None


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
        _log_change(check, check.last)
        return check.last

    @staticmethod
    async def _probe(check: _Check) -> CheckOutcome:
        started = time.perf_counter()
        timed_out = False
        late = f"no answer within {check.timeout_seconds:g} s"
        if check.stuck is not None and not check.stuck.done():
            ok, detail, timed_out = False, late, True  # the last one has not returned yet
        else:
            check.stuck = None
            try:
                await bounded(check.probe(), check.timeout_seconds)
            except ProbeOverran as overran:
                ok, detail, timed_out = False, late, True
                check.stuck = overran.task
            except Exception as exc:  # noqa: BLE001 - any failure of a probe is "not ready"
                ok, detail = False, masked(f"{type(exc).__name__}: {exc}")
            else:
                ok, detail = True, "ok"
        elapsed_ms = (time.perf_counter() - started) * 1000
        return CheckOutcome(check.name, ok, detail, elapsed_ms, timed_out)


class ProbeOverran(TimeoutError):
    """A bounded call ran out of time; ``task`` is the call, cancelled, maybe not ended."""

    def __init__(self, task: asyncio.Task[Any]) -> None:
        super().__init__("no answer in time")
        self.task = task


def bounded(call: Awaitable[T], timeout_seconds: float) -> Awaitable[T]:
    """``call`` within ``timeout_seconds``: :class:`ProbeOverran` at the limit, whether or
    not the call has ended by then. ``asyncio.wait_for`` waits for a cancelled call to end,
    and a query on a hung database (a stopped server, a network that drops packets) ends
    only when the server answers its cancellation: readiness would hang with it."""

    async def run() -> T:
        task = asyncio.ensure_future(call)
        done, _ = await asyncio.wait({task}, timeout=timeout_seconds)
        if not done:
            task.cancel()
            _ABANDONED.add(task)
            task.add_done_callback(_settle)
            raise ProbeOverran(task)
        return task.result()

    return run()


#: Calls given up on that have not ended yet (kept so that they are not collected early).
_ABANDONED: set[asyncio.Task[Any]] = set()


def _settle(task: asyncio.Task[Any]) -> None:
    _ABANDONED.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: an abandoned call's failure is nobody's to report


def _log_change(check: _Check, outcome: CheckOutcome) -> None:
    """Log a check that starts failing, fails differently, or recovers."""
    if (outcome.ok, outcome.detail) == check.logged:
        return
    check.logged = (outcome.ok, outcome.detail)
    if outcome.ok:
        log.info("health.check_recovered", check=outcome.name)
    else:
        log.warning(
            "health.check_failed",
            check=outcome.name,
            reason=outcome.summary,
            detail=outcome.detail,
            duration_ms=round(outcome.duration_ms, 2),
        )
