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


@dataclass(frozen=True, slots=True)
class _Check:
    name: str
    probe: Probe
    timeout_seconds: float


class HealthChecks:
    """The readiness checks of one kernel."""

    def __init__(self) -> None:
        self._checks: list[_Check] = []

    def add(self, name: str, probe: Probe, *, timeout_seconds: float) -> None:
        """Register a probe that raises (or overruns ``timeout_seconds``) when unhealthy."""
        self._checks.append(_Check(name, probe, timeout_seconds))

    @property
    def names(self) -> list[str]:
        """Names of the registered checks, in order."""
        return [check.name for check in self._checks]

    async def run(self) -> list[CheckOutcome]:
        """Run every check concurrently and report each outcome."""
        return list(await asyncio.gather(*(self._run_one(check) for check in self._checks)))

    @staticmethod
    async def _run_one(check: _Check) -> CheckOutcome:
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
