"""Hostile pass AE, pure logic: findings, each a test that failed before its fix (see each
docstring)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from engram.autonomy.levels import LevelBackoff
from engram.memory.consolidation.model import BatchReport, ConsolidationReport, SkipReason
from engram.memory.types import AccessLevel, ConsolidationTrigger


def _failed_at(level: AccessLevel) -> ConsolidationReport:
    trigger = ConsolidationTrigger.EVENT_DRIVEN
    failed = {SkipReason.FAILED.value: 2}
    return ConsolidationReport(
        run_id=uuid.uuid4(),
        trigger=trigger,
        dry_run=False,
        candidates=2,
        batches=(
            BatchReport(uuid.uuid4(), (), failed, committed=False, trigger=trigger, level=level),
        ),
        skipped=failed,
        duration_seconds=0.1,
        levels=(level,),
    )


def test_a_level_backed_off_on_a_clock_a_year_ahead_wakes_when_the_clock_is_stepped_back() -> None:
    """A level whose batches failed while the kernel's clock was a year ahead was left out of
    the event and pressure checks until that instant (a year) once the clock was stepped
    back, though a back-off lasts at most its ceiling. A back-off ending further away than
    the ceiling is now taken for a clock stepped back, and the level is awake."""
    sensitive = AccessLevel.SENSITIVE
    held = LevelBackoff(base=timedelta(seconds=60), ceiling=timedelta(hours=1))
    real = datetime(2026, 11, 29, 15, tzinfo=UTC)
    held.note(_failed_at(sensitive), real + timedelta(days=365))
    assert () == held.awake((sensitive,), real + timedelta(days=365, seconds=30))
    assert (sensitive,) == held.awake((sensitive,), real + timedelta(minutes=1))
    # an ordinary back-off still holds
    held.note(_failed_at(sensitive), real)
    assert () == held.awake((sensitive,), real + timedelta(seconds=30))
    assert (sensitive,) == held.awake((sensitive,), real + timedelta(minutes=11))
