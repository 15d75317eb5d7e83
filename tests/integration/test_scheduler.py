"""The scheduler (engram.autonomy.scheduler) on a real database, time driven by a clock the
test moves: due times, exactly-once claims across schedulers, back-off, abandoned runs."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engram import Kernel
from engram.autonomy.schedule import Daily, Every
from engram.autonomy.scheduler import Job, JobContext
from engram.errors import DatabaseError, JobBusy, NotFound
from tests.integration.scheduler_helpers import Clock, scheduler

START = datetime(2026, 11, 25, 2, 59, 30, tzinfo=UTC)


class Recorder:
    """A job body that records the due times it served and can be told to fail or block."""

    def __init__(self) -> None:
        self.dues: list[datetime] = []
        self.fail = False
        self.gate: asyncio.Event | None = None

    async def __call__(self, context: JobContext) -> Mapping[str, Any]:
        self.dues.append(context.due)
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise DatabaseError("disk full")
        return {"served": context.due.isoformat()}


pytestmark = pytest.mark.usefixtures("schedulers")


async def test_a_daily_job_runs_once_per_due_time_and_waits_for_the_first(kernel: Kernel) -> None:
    """A new job waits for its next due time; then each 03:00 runs it once, however often the
    scheduler looks."""
    body = Recorder()
    clock = Clock(START)
    runner = scheduler(kernel, [Job("nightly", Daily(3), body, "test")], clock)
    assert [] == await runner.tick()  # first sighting: 02:00 yesterday... marked, not run
    clock.advance(seconds=40)  # 03:00:10
    assert ["nightly"] == await runner.tick()
    await runner.wait_idle()
    for _ in range(3):
        clock.advance(hours=1)
        assert [] == await runner.tick()
    clock.advance(days=1)
    assert ["nightly"] == await runner.tick()
    await runner.wait_idle()
    assert [START.replace(hour=3, minute=0, second=0) + timedelta(days=d) for d in (0, 1)] == (
        body.dues
    )
    runs = await runner.book.runs("nightly")
    assert ["succeeded", "succeeded"] == [run.outcome for run in runs]
    await runner.stop()


async def test_a_run_starts_when_it_is_claimed_not_when_its_tick_began(kernel: Kernel) -> None:
    """A watched job's run is recorded as started after the ready check that caused it, even
    when the check took a while (here the clock moves on inside it)."""
    body = Recorder()
    clock = Clock(START)

    async def slow_ready(context: JobContext) -> str | None:
        del context
        clock.advance(seconds=7)  # the check outlasts the tick's start
        return "something to do"

    job = Job("watched", Every(timedelta(seconds=30)), body, "test", ready=slow_ready)
    runner = scheduler(kernel, [job], clock)
    assert [] == await runner.tick()  # first sighting: marked, not run
    clock.advance(seconds=30)
    tick_began = clock.now
    assert ["watched"] == await runner.tick()
    await runner.wait_idle()
    (run,) = await runner.book.runs("watched")
    assert tick_began + timedelta(seconds=7) == run.started_at
    await runner.stop()


async def test_two_schedulers_on_one_database_run_each_due_time_once(kernel: Kernel) -> None:
    """Three schedulers (three kernels' worth of locks) polling the same due times: one run
    per due time in all."""
    body = Recorder()
    clock = Clock(START)
    job = Job("every-minute", Every(timedelta(minutes=1)), body, "test")
    runners = [scheduler(kernel, [job], clock) for _ in range(3)]
    await asyncio.gather(*(r.tick() for r in runners))
    for _ in range(5):
        clock.advance(minutes=1)
        await asyncio.gather(*(r.tick() for r in runners))
        await asyncio.gather(*(r.wait_idle() for r in runners))
    assert 5 == len(body.dues) == len(set(body.dues))
    for runner in runners:
        await runner.stop()


async def test_a_failure_is_retried_with_backoff_and_never_raised(kernel: Kernel) -> None:
    """A failing job is recorded with its reason, retried for the same due time after the
    back-off (doubling), and succeeds when the fault is gone."""
    body = Recorder()
    body.fail = True
    clock = Clock(START)
    runner = scheduler(
        kernel,
        [Job("flaky", Every(timedelta(hours=1)), body, "test")],
        clock,
        backoff_base=timedelta(minutes=1),
    )
    await runner.tick()
    clock.advance(seconds=31)  # 03:00:01
    await runner.tick()
    outcome = (await runner.wait_idle())[0]
    assert "failed" == outcome.outcome
    assert "DatabaseError: disk full" == outcome.detail["error"]
    state = await runner.book.get("flaky")
    assert state is not None
    assert state.failures == 1
    assert state.retry_at is not None
    assert timedelta(minutes=1) == state.retry_at - clock.now
    clock.advance(seconds=30)
    assert [] == await runner.tick()  # still backing off
    clock.advance(seconds=31)
    assert ["flaky"] == await runner.tick()  # the retry, same due time
    await runner.wait_idle()
    state = await runner.book.get("flaky")
    assert state is not None
    assert state.failures == 2
    assert timedelta(minutes=2) == state.retry_at - clock.now  # doubled
    body.fail = False
    clock.advance(minutes=2, seconds=1)
    await runner.tick()
    await runner.wait_idle()
    state = await runner.book.get("flaky")
    assert state is not None
    assert (state.outcome, state.failures) == ("succeeded", 0)
    dues = {due.isoformat() for due in body.dues}
    assert 1 == len(dues)
    attempts = [run.attempt for run in await runner.book.runs("flaky")]
    assert [3, 2, 1] == attempts
    await runner.stop()


async def test_a_run_whose_holder_vanished_is_abandoned_and_taken_over(kernel: Kernel) -> None:
    """When the session holding a job's lock dies mid-run, another scheduler records the run
    as abandoned and runs the same due time again; the old holder stops its run and records
    nothing over the new one. (The SIGKILL of a whole process: tests/e2e/test_workers.py.)"""
    body = Recorder()
    body.gate = asyncio.Event()
    clock = Clock(START)
    job = Job("long", Every(timedelta(hours=1)), body, "test")
    first, second = scheduler(kernel, [job], clock), scheduler(kernel, [job], clock)
    await first.tick()
    await second.tick()
    clock.advance(seconds=31)
    assert ["long"] == await first.tick()
    await asyncio.sleep(0.05)
    assert [] == await second.tick()  # the lock is held
    # The holder's connection dies: PostgreSQL frees the lock at once.
    holder_pid = await kernel.db.fetchval(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted LIMIT 1"
    )
    assert await kernel.db.fetchval("SELECT pg_terminate_backend($1)", holder_pid)
    await asyncio.sleep(0.1)
    second._seen.clear()
    assert ["long"] == await second.tick()
    state = await second.book.get("long")
    assert state is not None
    assert state.running
    assert state.holder == second.holder
    # Hold the new run's task before releasing the body: once released, the run may end
    # (and leave the running set) while the old holder is still stopping.
    new_run = second._running["long"]
    body.gate.set()
    await first.stop()  # its run ends; what it records must not touch the new run
    outcome = await new_run
    assert ("succeeded", 2) == (outcome.outcome, outcome.attempt)
    runs = {run.attempt: run for run in await second.book.runs("long")}
    assert ("abandoned", first.holder) == (runs[1].outcome, runs[1].holder)
    assert ("succeeded", second.holder) == (runs[2].outcome, runs[2].holder)
    assert {runs[1].due_at} == {runs[2].due_at}
    state = await second.book.get("long")
    assert state is not None
    assert (state.running, state.outcome) == (False, "succeeded")


async def test_manual_runs_refuse_unknown_and_busy_jobs(kernel: Kernel) -> None:
    """``run_now`` runs a job at once; an unknown name is NotFound; a job whose lock is held
    elsewhere is JobBusy naming the holder."""
    body = Recorder()
    clock = Clock(START)
    job = Job("manual", Every(timedelta(days=1)), body, "test")
    first, second = scheduler(kernel, [job], clock), scheduler(kernel, [job], clock)
    outcome = await first.run_now("manual")
    assert "succeeded" == outcome.outcome
    with pytest.raises(NotFound):
        await first.run_now("nope")
    body.gate = asyncio.Event()
    running = asyncio.create_task(first.run_now("manual"))
    await asyncio.sleep(0.1)
    with pytest.raises(JobBusy, match=first.holder):
        await second.run_now("manual")
    body.gate.set()
    await running
    await first.stop()
    await second.stop()


async def test_a_failed_manual_run_leaves_the_schedule_alone(kernel: Kernel) -> None:
    """An operator's run that fails neither re-opens a due time that succeeded nor delays
    the next one: a kernel that knows nothing of either (empty caches) runs nothing."""
    body = Recorder()
    clock = Clock(START)
    job = Job("hourly", Every(timedelta(hours=1)), body, "test")
    runner = scheduler(kernel, [job], clock)
    await runner.tick()
    clock.advance(seconds=31)
    assert ["hourly"] == await runner.tick()
    await runner.wait_idle()
    body.fail = True
    assert "failed" == (await runner.run_now("hourly")).outcome
    state = await runner.book.get("hourly")
    assert state is not None
    assert (state.outcome, state.failures, state.retry_at) == ("succeeded", 0, None)
    fresh = scheduler(kernel, [job], clock)
    assert [] == await fresh.tick()
    assert 2 == len(body.dues)


async def test_a_foreign_error_is_recorded_by_its_type_only(kernel: Kernel) -> None:
    """A failure that is not engram's own keeps only its type in the job's state and the log
    (its message may quote data)."""

    async def leaky(context: JobContext) -> Mapping[str, Any]:
        raise ValueError("the secret text of a memory")

    runner = scheduler(
        kernel, [Job("leaky", Every(timedelta(hours=1)), leaky, "test")], Clock(START)
    )
    outcome = await runner.run_now("leaky")
    assert ("failed", "ValueError") == (outcome.outcome, outcome.detail["error"])
    state = await runner.book.get("leaky")
    assert state is not None
    assert "secret" not in (state.detail or "")


async def test_a_kernel_that_loses_its_lock_connection_stops_its_run(kernel: Kernel) -> None:
    """While a job runs, each poll checks the connection holding its lock; when it dies (the
    lock is gone and another kernel may claim the job) the run is stopped and recorded as
    abandoned, and the next poll may claim the job afresh."""
    body = Recorder()
    body.gate = asyncio.Event()
    clock = Clock(START)
    runner = scheduler(kernel, [Job("long", Every(timedelta(hours=1)), body, "test")], clock)
    await runner.tick()
    clock.advance(seconds=31)
    async with runner.serving():
        for _ in range(100):
            state = await runner.book.get("long")
            if state is not None and state.running:
                break
            await asyncio.sleep(0.05)
        holder_pid = await kernel.db.fetchval(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted LIMIT 1"
        )
        assert await kernel.db.fetchval("SELECT pg_terminate_backend($1)", holder_pid)
        for _ in range(100):
            runs = await runner.book.runs("long")
            if runs and runs[-1].outcome != "running":
                break
            await asyncio.sleep(0.05)
    first = (await runner.book.runs("long"))[-1]
    assert ("abandoned", 1) == (first.outcome, first.attempt)
    assert "stopped before it finished" == first.detail["error"]
