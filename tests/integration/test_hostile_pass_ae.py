"""Hostile pass AE: background jobs, consolidation and the outbox under faults that earlier
passes did not try. Each test failed before the fix its docstring names."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from engram import Kernel
from engram.autonomy.schedule import Every
from engram.autonomy.scheduler import Job, JobContext, Scheduler, SchedulerSettings
from engram.errors import DatabaseError, Quarantine
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
)
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DAY, DEEP, INCIDENT, LATE_ETL, head_of
from tests.integration.gate_helpers import BOSS, holding_head, lock_waiters
from tests.integration.lost_ack import with_lost_ack
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


# --- consolidation: a rollback after a release ---------------------------------------------

EXTERNAL = GateDecisionType.EXTERNAL


async def _seed(kernel: Kernel, texts: list[str]) -> list[UUID]:
    ids = []
    for n, text in enumerate(texts):
        record = MemoryRecord.draft(
            MemoryType.EPISODE,
            text,
            source_agent=BOSS.agent_id,
            event_time=DAY + timedelta(days=n),
        )
        result = await kernel.gate.evaluate(GateRequest(GateAction.CREATE, record, BOSS, EXTERNAL))
        assert result.record_id is not None, result.reason
        ids.append(result.record_id)
    await kernel.events.settled()
    return ids


async def _live_summaries(kernel: Kernel, source: UUID) -> set[UUID]:
    """Records not forgotten of which some version cites (derived_from) ``source``."""
    rows = await kernel.db.fetch(
        "SELECT DISTINCT s.record_id FROM memory_edges e "
        "JOIN memories s ON s.id = e.source_id JOIN memories t ON t.id = e.target_id "
        "WHERE e.kind = 'derived_from' AND t.record_id = $1",
        source,
    )
    heads = [await head_of(kernel, row["record_id"]) for row in rows]
    return {head.record_id for head in heads if head.status is not MemoryStatus.FORGOTTEN}


async def test_rolling_back_a_released_batch_leaves_what_a_later_batch_consumed(
    kernel: Kernel,
) -> None:
    """Batch 1 promoted four records; an agent forgot one, and the release forgot the belief
    and gave the other three back; batch 2 promoted those three again. Rolling back batch 1
    (an operator's command, still allowed: a release does not mark the batch) restored the
    three, which batch 2's belief still consumed: each fact then stood twice, in the fast
    path and in the live belief, and the next pass would summarise it a second time. A
    rollback (or a release) now leaves a source whose last consolidation is another batch's."""
    ids = await _seed(kernel, LATE_ETL)
    first = await kernel.consolidation.run(DEEP)
    (batch,) = first.batches
    assert set(batch.consumed) == set(ids)
    head = await head_of(kernel, ids[0])
    forgot = await kernel.gate.evaluate(
        GateRequest.forget(head, BOSS, EXTERNAL, expected_version=head.version)
    )
    assert forgot.record_id == ids[0], forgot.reason
    await kernel.events.settled()  # the release: the belief forgotten, three sources back
    for source in ids[1:]:
        assert (await head_of(kernel, source)).status is MemoryStatus.ACTIVE
    second = await kernel.consolidation.run(DEEP)
    assert set(second.consumed) == set(ids[1:])

    undone = await kernel.consolidation.rollback(batch.batch_id)

    assert () == undone.restored
    for source in ids[1:]:
        assert (await head_of(kernel, source)).status is MemoryStatus.CONSOLIDATED
        assert set(second.created) == await _live_summaries(kernel, source)


async def test_a_rollback_with_nothing_left_to_undo_recognises_its_own_lost_commit(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A batch whose every summary a release had undone already: its rollback writes no
    record, only the batch's mark. When the acknowledgement of that COMMIT was lost (the
    connection terminated after the commit), the adapter ran the transaction again, found
    the batch rolled back, and the operator was told "was rolled back already" (exit 4)
    for a rollback that had just succeeded. The mark now carries the instant the rollback
    chose, so its retry recognises its own commit (as `engram conflicts ack` does)."""
    ids = await _seed(kernel, LATE_ETL)
    (batch,) = (await kernel.consolidation.run(DEEP)).batches
    head = await head_of(kernel, ids[0])
    forgot = await kernel.gate.evaluate(
        GateRequest.forget(head, BOSS, EXTERNAL, expected_version=head.version)
    )
    assert forgot.record_id == ids[0], forgot.reason
    await kernel.events.settled()  # the release undid the batch's only item

    undone = await with_lost_ack(
        database.admin_url, kernel.consolidation.rollback(batch.batch_id), "COMMIT"
    )

    assert ((), ()) == (undone.retired, undone.restored)
    assert (await kernel.consolidation.batch(batch.batch_id)).rolled_back_at is not None


async def test_a_run_whose_finish_lost_its_acknowledgement_is_still_its_own(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A run's end is recorded by one statement; when the acknowledgement of its commit was
    lost, the adapter ran it again, found the run closed already and took it for a run
    another kernel had taken over: `engram jobs run` said the job was abandoned (exit 1) and
    the scheduler logged `job.taken_over` for a run that had succeeded. The retry now
    recognises its own record (the outcome and the instant it chose)."""
    body = Recorder()
    runner = scheduler(kernel, [Job("manual", MINUTE, body, "test")], Clock(_now()))
    outcome = await with_lost_ack(
        database.admin_url, runner.run_now("manual"), "$2 run id, $3 outcome"
    )
    assert "succeeded" == outcome.outcome
    (run,) = await runner.book.runs("manual")
    assert "succeeded" == run.outcome


async def test_a_takeover_whose_commit_lost_its_acknowledgement_counts_once(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A kernel that finds a job marked running with its lock free closes the dead holder's
    run as abandoned; a manual run (`engram jobs run`) abandoned so leaves the scheduled
    state alone. When that statement's acknowledgement was lost, its retry found no open run,
    took the takeover for a scheduled run's, and marked the due time that had succeeded
    abandoned (a failure more): the next claim ran that due time again. The retry now changes
    nothing when the first attempt closed the run."""
    body = Recorder()
    clock = Clock(_now())
    job = Job("hourly", Every(timedelta(hours=1)), body, "test")
    first = scheduler(kernel, [job], clock)
    await first.tick()
    clock.advance(hours=1)
    assert ["hourly"] == await first.tick()
    await first.wait_idle()
    gate = asyncio.Event()

    async def held(context: JobContext) -> Mapping[str, Any]:
        await gate.wait()
        return {}

    # a kernel that looks at its lock session once an hour: it does not notice the loss
    slow = Scheduler(
        kernel.db,
        [Job("hourly", Every(timedelta(hours=1)), held, "test")],
        metrics=kernel.metrics,
        clock=clock,
        settings=SchedulerSettings(poll_seconds=3600.0),
    )
    manual = asyncio.create_task(slow.run_now("hourly"))
    try:
        for _ in range(200):
            state = await slow.book.get("hourly")
            if state is not None and state.running:
                break
            await asyncio.sleep(0.05)
        holder = await kernel.db.fetchval(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted LIMIT 1"
        )
        assert await kernel.db.fetchval("SELECT pg_terminate_backend($1)", holder)
        other = scheduler(kernel, [job], clock)
        started = await with_lost_ack(
            database.admin_url, other.tick(), "The holder of a running job died"
        )
        assert [] == started
        state = await other.book.get("hourly")
        assert state is not None
        assert ("succeeded", 0, False) == (state.outcome, state.failures, state.running)
    finally:
        gate.set()
        await asyncio.gather(manual, return_exceptions=True)
        await slow.stop()
    assert 1 == len(body.dues)


# --- the admin desk: a release racing an agent's edit ------------------------------------


async def test_a_release_that_waited_for_an_agents_edit_reads_the_edit(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """An admin releases a quarantined record while its writer edits it (the address taken
    out). The release locks the record's head; it waited for the writer's transaction, and
    once that committed the row it waited for was no longer the head, so the locking read
    returned nothing and the admin was told "no record …" (404) for a record that exists.
    A locking read of a head that a writer closed meanwhile now reads and locks the head
    that writer made: the release finds the edited record, no longer quarantined (409)."""
    text = "The on-call lead for checkout-api is reachable at jana.novak@example.com."
    (record_id,) = await _seed(kernel, [text])
    head = await head_of(kernel, record_id)
    assert AccessLevel.SENSITIVE is head.access_level
    clean = MemoryRecord.draft(
        MemoryType.EPISODE,
        "The on-call lead for checkout-api is Jana Novak.",
        record_id=record_id,
        source_agent=BOSS.agent_id,
        event_time=head.event_time,
        access_level=AccessLevel.AGENT,
    )
    admin = CallerIdentity.system("cli:test-admin")
    async with holding_head(database.admin_url, record_id) as held:
        edit = asyncio.create_task(
            kernel.gate.evaluate(
                GateRequest(GateAction.UPDATE, clean, BOSS, EXTERNAL, head.version)
            )
        )
        await lock_waiters(held.watch, 1)
        release = asyncio.create_task(
            kernel.quarantine.release(
                record_id, admin=admin, reason="a work address", expected_version=head.version
            )
        )
        await lock_waiters(held.watch, 2)
        await held.release()
        edited = await edit
        (answer,) = await asyncio.gather(release, return_exceptions=True)
    assert 2 == edited.version, edited.reason
    assert isinstance(answer, Quarantine), repr(answer)
    assert "is not quarantined" in str(answer)


async def test_an_agents_correction_of_a_summary_outlives_the_release_of_a_source(
    kernel: Kernel,
) -> None:
    """An agent corrected a consolidated record (a new version adding alert ALRT-77, which
    no source holds); later another source of it was forgotten. The release that follows a
    forget forgot the summary as it stood, the agent's correction with it: acknowledged as
    stored, ALRT-77 was then in no live record. A release an agent's change starts now
    leaves a consolidated record an agent has written since (its sources stay consolidated
    under it), as a rollback does without --force."""
    ids = await _seed(kernel, INCIDENT)
    (made,) = (await kernel.consolidation.run(DEEP)).created
    summary = await head_of(kernel, made)
    corrected = MemoryRecord.draft(
        summary.type,
        summary.content + "\nCorrection: the pager fired at 02:08, alert ALRT-77.",
        record_id=made,
        source_agent=BOSS.agent_id,
        event_time=summary.event_time,
        access_level=summary.access_level,
        namespace=summary.namespace,
        metadata=dict(summary.metadata),
    )
    fixed = await kernel.gate.evaluate(
        GateRequest(GateAction.UPDATE, corrected, BOSS, EXTERNAL, summary.version)
    )
    assert 2 == fixed.version, fixed.reason
    head = await head_of(kernel, ids[0])
    forgot = await kernel.gate.evaluate(
        GateRequest.forget(head, BOSS, EXTERNAL, expected_version=head.version)
    )
    assert forgot.record_id == ids[0], forgot.reason
    await kernel.events.settled()

    live = await kernel.admin_temporal.query(limit=1000)
    assert [made] == [record.record_id for record in live if "ALRT-77" in record.content]
    for source in ids[1:]:
        assert (await head_of(kernel, source)).status is MemoryStatus.CONSOLIDATED
        assert {made} == await _live_summaries(kernel, source)
