"""Readiness checks aggregate pings with time limits."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from engram.observability.health import HealthChecks, masked


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


async def _leaks() -> None:
    raise ConnectionError("connect to postgresql://engram:hunter2@db.internal:5432/engram failed")


async def _leaks_dsn() -> None:
    raise ConnectionError("host=db.internal password='hunter 2' dbname=engram: refused")


async def test_the_summary_says_only_ok_failed_or_timed_out() -> None:
    """The reason anyone may see is ``ok``, ``failed`` or ``timed out``; the detail keeps the
    probe's message."""
    checks = HealthChecks()
    checks.add("good", _ok, timeout_seconds=1)
    checks.add("bad", _broken, timeout_seconds=1)
    checks.add("slow", _hangs, timeout_seconds=0.05)
    outcomes = {outcome.name: outcome for outcome in await checks.run()}
    assert {"good": "ok", "bad": "failed", "slow": "timed out"} == {
        name: outcome.summary for name, outcome in outcomes.items()
    }
    assert (False, True) == (outcomes["bad"].timed_out, outcomes["slow"].timed_out)


async def test_a_password_in_a_probes_message_is_masked_in_the_detail() -> None:
    """A connection string's password, in URL or key-value form, never reaches the detail."""
    checks = HealthChecks()
    checks.add("url", _leaks, timeout_seconds=1)
    checks.add("dsn", _leaks_dsn, timeout_seconds=1)
    outcomes = {outcome.name: outcome for outcome in await checks.run()}
    assert "postgresql://***@db.internal:5432/engram" in outcomes["url"].detail
    assert "password=*** dbname=engram" in outcomes["dsn"].detail
    assert all("hunter" not in outcome.detail for outcome in outcomes.values())


def test_masked_leaves_text_without_credentials_alone() -> None:
    """A message with no connection string in it is unchanged."""
    text = "database unreachable: OSError: [Errno 111] Connect call failed ('127.0.0.1', 5432)"
    assert text == masked(text)


async def test_a_failing_check_is_logged_once_until_it_recovers() -> None:
    """Ten runs of a failing check log ``health.check_failed`` once, with the check's name,
    the generic reason and the detail; its recovery is logged once too."""
    broken = True

    async def flaky() -> None:
        if broken:
            raise ConnectionRefusedError("refused")

    checks = HealthChecks()
    checks.add("database", flaky, timeout_seconds=1)
    with capture_logs() as logs:
        for _ in range(10):
            await checks.run()
        broken = False
        for _ in range(3):
            await checks.run()
    assert [
        {
            "event": "health.check_failed",
            "check": "database",
            "reason": "failed",
            "detail": "ConnectionRefusedError: refused",
            "log_level": "warning",
        },
        {"event": "health.check_recovered", "check": "database", "log_level": "info"},
    ] == [{k: v for k, v in entry.items() if k != "duration_ms"} for entry in logs]
