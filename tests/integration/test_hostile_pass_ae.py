"""Hostile pass AE: background jobs, consolidation and the outbox under faults that earlier
passes did not try. Each test failed before the fix its docstring names."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engram import Kernel
from engram.autonomy.schedule import Every
from engram.autonomy.scheduler import Job, JobContext
from engram.errors import DatabaseError
from tests.integration.scheduler_helpers import Clock, scheduler

pytestmark = pytest.mark.usefixtures("schedulers")

MINUTE = Every(timedelta(minutes=1))


class Recorder:
    """A job body that records the due times and cursors it was given; fails when told."""

    def __init__(self) -> None:
        self.dues: list[datetime] = []
        self.cursors: list[datetime | None] = []
        self.fail = False

    async def __call__(self, context: JobContext) -> Mapping[str, Any]:
        self.dues.append(context.due)
        self.cursors.append(context.cursor)
        if self.fail:
            raise DatabaseError("disk full")
        return {"served": context.due.isoformat()}


def _now() -> datetime:
    """Now, on the grid of seconds (the database's clock is this machine's)."""
    return datetime.now(UTC).replace(microsecond=0)


async def test_a_due_time_recorded_by_a_clock_a_year_ahead_does_not_stall_the_job(
    kernel: Kernel,
) -> None:
    """A kernel whose clock was a year ahead (a VM restored with a wrong clock, corrected by
    NTP afterwards) ran a due time of next year and recorded it. Every kernel, that one once
    its clock was stepped back included, then took the job as done until next year: the
    recorded due time was later than any due time they reached. A recorded due time past
    both the kernel's next due time and the database's is now taken for a clock that was
    stepped back, and the current due time runs; the cursor handed to the run is no longer
    that future instant."""
    body = Recorder()
    clock = Clock(_now())
    job = Job("every-minute", MINUTE, body, "test")
    stepped = scheduler(kernel, [job], clock)
    assert [] == await stepped.tick()  # first sighting: marked
    real = clock.now
    clock.advance(days=365)
    assert ["every-minute"] == await stepped.tick()
    await stepped.wait_idle()
    ahead = MINUTE.latest_due(clock.now)
    state = await stepped.book.get("every-minute")
    assert state is not None
    assert (ahead, "succeeded") == (state.last_due, state.outcome)

    clock.now = real + timedelta(minutes=2)  # NTP steps the clock back
    other = scheduler(kernel, [job], clock)  # a kernel whose clock was always right
    assert ["every-minute"] == await other.tick()
    await other.wait_idle()
    assert MINUTE.latest_due(clock.now) == body.dues[-1]
    assert body.cursors[-1] is None  # not next year's instant

    clock.advance(minutes=1)  # the stepped kernel itself runs the next due time
    assert ["every-minute"] == await stepped.tick()
    await stepped.wait_idle()
    assert MINUTE.latest_due(clock.now) == body.dues[-1]
    assert 3 == len(body.dues) == len(set(body.dues))


async def test_a_back_off_recorded_by_a_clock_a_year_ahead_does_not_stall_the_job(
    kernel: Kernel,
) -> None:
    """The same clock a year ahead, and the run failed there: its retry time (a minute
    later, next year) held the job back on every kernel until then, the fault long gone. A
    retry time further ahead than the back-off's ceiling, on the kernel's clock and on the
    database's, is now ignored."""
    body = Recorder()
    clock = Clock(_now())
    job = Job("every-minute", MINUTE, body, "test")
    stepped = scheduler(kernel, [job], clock)
    await stepped.tick()
    real = clock.now
    clock.advance(days=365)
    body.fail = True
    assert ["every-minute"] == await stepped.tick()
    await stepped.wait_idle()
    state = await stepped.book.get("every-minute")
    assert state is not None
    assert ("failed", 1) == (state.outcome, state.failures)
    assert state.retry_at is not None
    assert state.retry_at > clock.now

    body.fail = False
    clock.now = real + timedelta(minutes=2)
    assert ["every-minute"] == await stepped.tick()
    await stepped.wait_idle()
    state = await stepped.book.get("every-minute")
    assert state is not None
    assert ("succeeded", 0) == (state.outcome, state.failures)
    assert MINUTE.latest_due(clock.now) == state.last_due


async def test_a_kernel_whose_clock_lags_does_not_run_a_due_time_again(kernel: Kernel) -> None:
    """What the fix above must not do: a kernel whose clock is behind the database's (by
    more than an interval) sees the due time the others ran as ahead of its own clock, but
    not of the database's: it runs nothing."""
    body = Recorder()
    clock = Clock(_now())
    job = Job("every-minute", MINUTE, body, "test")
    right = scheduler(kernel, [job], clock)
    await right.tick()
    clock.advance(minutes=1)
    assert ["every-minute"] == await right.tick()
    await right.wait_idle()
    late_clock = Clock(clock.now - timedelta(minutes=10))
    late = scheduler(kernel, [job], late_clock)
    for _ in range(3):
        assert [] == await late.tick()
        late_clock.advance(minutes=1)
        await asyncio.sleep(0)
    assert 1 == len(body.dues)
