"""The consolidation jobs' back-off per access level (ADR-019, second amendment of 2026-11-29).

A job's pass no longer fails when batches fail: the scheduler's back-off is one per job, and
it would delay every level's next pass, so whatever decided it would let a level its readers
may not read (a more closed one) decide when theirs is consolidated. Instead the event and
pressure jobs leave a level whose batches failed out of their checks for a while: ``base``
after its first failure, doubling with each further one, at most ``ceiling`` (the jobs'
``ENGRAM_JOB_BACKOFF_SECONDS`` and ``ENGRAM_JOB_BACKOFF_MAX_SECONDS``), until a batch of that
level commits. A failing level thus neither makes those jobs run every check nor delays any
other level. The scheduled passes read every level at their due times, whatever the back-off;
their reports feed it too. The state is the kernel's own, as the pressure job's memory of its
last passes is: each kernel that takes the job backs a failing level off on its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import structlog

from engram.autonomy.schedule import backoff
from engram.memory.consolidation import ConsolidationReport
from engram.memory.types import AccessLevel

log = structlog.get_logger("engram.autonomy.levels")


@dataclass
class LevelBackoff:
    """Which access levels the event and pressure jobs leave out of their checks, and until
    when; see the module docstring."""

    base: timedelta
    ceiling: timedelta
    #: Consecutive passes in which a level's batches failed, and none of them committed.
    failures: dict[AccessLevel, int] = field(default_factory=dict)
    until: dict[AccessLevel, datetime] = field(default_factory=dict)

    def awake(self, levels: Iterable[AccessLevel], now: datetime) -> tuple[AccessLevel, ...]:
        """``levels`` without those backed off at ``now`` (in the order given). A back-off
        ending further away than ``ceiling`` was set on a clock stepped back since (a clock
        a year ahead would hold the level back a year): it no longer holds."""
        return tuple(
            level for level in levels if not now < self.until.get(level, now) <= now + self.ceiling
        )

    def note(self, report: ConsolidationReport, now: datetime) -> None:
        """What a pass that ended at ``now`` did to each level it read: a level of which a
        batch failed and none committed is backed off (longer each time), one of which a
        batch committed is not any more; a level with neither keeps its state."""
        failed = set(report.failed_levels)
        committed = {batch.level for batch in report.batches if batch.committed}
        for level in report.levels:
            if level in committed:
                if self.failures.pop(level, None) is not None:
                    self.until.pop(level, None)
                    log.info("consolidation.level_resumed", access_level=level.value)
            elif level in failed:
                failures = self.failures[level] = self.failures.get(level, 0) + 1
                wait = backoff(failures, base=self.base, ceiling=self.ceiling)
                self.until[level] = now + wait
                log.warning(
                    "consolidation.level_backed_off",
                    access_level=level.value,
                    failures=failures,
                    retry_at=self.until[level].isoformat(),
                )


__all__ = ["LevelBackoff"]
