"""Readiness checks aggregate pings with time limits."""

from __future__ import annotations

import asyncio

from engram.observability.health import HealthChecks


async def _ok() -> None:
    return None


async def _broken() -> None:
    raise ConnectionRefusedError("refused")


async def _hangs() -> None:
    await asyncio.sleep(10)


async def test_each_check_reports_its_outcome() -> None:
    """Passing, failing and overrunning probes are each reported with a reason."""
    checks = HealthChecks()
    checks.add("good", _ok, timeout_seconds=1)
    checks.add("bad", _broken, timeout_seconds=1)
    checks.add("slow", _hangs, timeout_seconds=0.05)
    outcomes = {outcome.name: outcome for outcome in await checks.run()}
    assert ["good", "bad", "slow"] == checks.names
    assert outcomes["good"].ok
    assert not outcomes["bad"].ok
    assert "ConnectionRefusedError" in outcomes["bad"].detail
    assert not outcomes["slow"].ok
    assert "0.05 s" in outcomes["slow"].detail
    assert outcomes["slow"].duration_ms < 1000
