"""The scheduler: runs each registered job at its due times, on one kernel at a time.

Every kernel process sharing a database runs a :class:`Scheduler` over the same registry. On
each poll a scheduler asks, for every job, which due instant is the latest (a fixed point in
UTC, :mod:`.schedule`); when that is newer than the one it last saw done, it tries to *claim*
the job:

1. take the job's advisory lock on its own session (another kernel holding it: skip);
2. read the job's row: done for this due time already (skip), failed or abandoned and past its
   back-off (retry the same due time, next attempt), still marked running although the lock
   was free (its holder died: record the run as abandoned, then run it again), or new;
3. for a watched job (event and pressure triggers) ask its condition; when it does not hold the
   due time is marked checked and nothing runs (a claim that fails is tried at the next poll);
4. record the run's start, run it in a task, record how it ended, release the lock.

A failure is logged with its reason and counted; the job is retried after an exponential
back-off (``base``, doubled per consecutive failure, at most ``ceiling``). Nothing a job
raises reaches the server. Time comes from an injected clock (UTC ``datetime``), so tests move
it by hours without sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import datetime
from typing import Any, TypeVar

import structlog

from engram.autonomy.jobs import (
    Claim,
    Clock,
    Job,
    JobContext,
    JobStatus,
    RunOutcome,
    SchedulerSettings,
    being_cancelled,
    error_text,
    summary,
)
from engram.autonomy.state import JobBook
from engram.errors import DatabaseError, EngramError, JobBusy, NotFound
from engram.infra.db import Connection, DatabaseAdapter
from engram.memory.types import utc_now
from engram.observability.metrics import EngramMetrics

log = structlog.get_logger("engram.autonomy.scheduler")
T = TypeVar("T")


class Scheduler:
    """Runs the jobs of one kernel; see the module docstring."""

    def __init__(
        self,
        db: DatabaseAdapter,
        jobs: Sequence[Job],
        *,
        metrics: EngramMetrics,
        settings: SchedulerSettings | None = None,
        clock: Clock = utc_now,
    ) -> None:
        names = [job.name for job in jobs]
        if len(set(names)) != len(names):
            raise ValueError("two jobs share a name")
        self._db = db
        self._book = JobBook(db)
        self._jobs = {job.name: job for job in jobs}
        self._metrics = metrics
        self._settings = settings or SchedulerSettings()
        self._clock = clock
        self._running: dict[str, asyncio.Task[RunOutcome]] = {}
        self._bodies: dict[str, asyncio.Future[Any]] = {}  # the jobs' own work
        self._held: set[str] = set()  # lock keys this kernel holds (locks are re-entrant)
        self._seen: dict[str, datetime] = {}  # latest due time known to be done or checked
        self._not_before: dict[str, datetime] = {}  # back-off of a failed job
        self._session: Connection | None = None
        self._session_stack: AsyncExitStack | None = None
        self._session_lock = asyncio.Lock()
        self._ensured = False
        self._stop = asyncio.Event()
        self._closed = False  # stopped: claims nothing more
        metrics.preset_jobs(tuple(names))

    @property
    def holder(self) -> str:
        return self._settings.holder

    @property
    def settings(self) -> SchedulerSettings:
        return self._settings

    @property
    def jobs(self) -> list[Job]:
        return list(self._jobs.values())

    # --- the loop ---------------------------------------------------------------------------

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[Scheduler]:
        """Run the polling loop for the duration of the block."""
        self._stop.clear()
        self._closed = False
        loop = asyncio.create_task(self._loop(), name="engram-scheduler")
        log.info("scheduler.started", holder=self.holder, jobs=len(self._jobs))
        try:
            yield self
        finally:
            # The loop first (a poll in progress could claim a job), then the runs.
            self._stop.set()
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop
            await self.stop()
            log.info("scheduler.stopped", holder=self.holder)

    async def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                await self._check_session()
                await self.tick()
            except Exception as exc:  # noqa: BLE001 - the loop outlives any failure
                log.warning("scheduler.tick_failed", error=error_text(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self._settings.poll_seconds)

    async def tick(self) -> list[str]:
        """Claim and start every job that is due now; the names started."""
        now = self._clock()
        started: list[str] = []
        for job in self._jobs.values():
            if len(self._running) >= self._settings.max_concurrent:
                break
            if self._busy(job):
                continue
            due = job.schedule.latest_due(now)
            seen = self._seen.get(job.name)
            # (past these bounds: a clock stepped back; the claim asks the database)
            if seen is not None and due <= seen <= job.schedule.next_due(now):
                continue
            wait = self._not_before.get(job.name)
            if wait is not None and now < wait <= now + self._settings.backoff_ceiling:
                continue
            try:
                claim = await self._claim(job, due, now=now, manual=False)
            except Exception as exc:  # noqa: BLE001 - one job's check holds back no other
                # tried at the next poll: a back-off on a clock that stands still or jumps
                # (a test's) would hold the due time back as long, for the database's fault
                log.warning("job.claim_failed", job=job.name, error=error_text(exc))
                continue
            if claim is not None:
                self._running[job.name] = asyncio.create_task(
                    self._execute(claim), name=f"engram-job-{job.name}"
                )
                started.append(job.name)
        return started

    def _busy(self, job: Job) -> bool:
        """This kernel holds the job's lock, or still finishes a run of its lock group (one
        whose lock was lost and is being recorded)."""
        running = {self._jobs[name].lock_key for name in self._running}
        return job.lock_key in self._held or job.lock_key in running

    async def _check_session(self) -> None:
        """While jobs run, make sure the session holding their locks is alive: if it died,
        PostgreSQL released the locks and another kernel may claim those jobs."""
        async with self._session_lock:
            if not self._held or self._session is None:
                return
            try:
                await self._session.fetchval("SELECT 1")
            except EngramError:
                await self._session_lost()

    async def wait_idle(self) -> list[RunOutcome]:
        """Wait for the runs in progress on this kernel; their outcomes."""
        done = await asyncio.gather(*self._running.values(), return_exceptions=True)
        return [outcome for outcome in done if isinstance(outcome, RunOutcome)]

    async def stop(self) -> None:
        """Let running jobs finish within the grace period, cancel the rest, close the session."""
        self._closed = True
        tasks = list(self._running.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self._settings.stop_grace_seconds)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        await self._close_session()

    # --- manual runs and status -------------------------------------------------------------

    async def run_now(self, name: str) -> RunOutcome:
        """Run one job at once, whatever its schedule (``engram jobs run``)."""
        job = self._jobs.get(name)
        if job is None:
            raise NotFound(f"no job {name!r}; known: {', '.join(self._jobs)}")
        now = self._clock()
        claim = None
        if not self._busy(job):
            claim = await self._claim(job, now, now=now, manual=True)
        if claim is None:
            running = [
                f"{state.name} on {state.holder}"
                for state in await self._book.all()
                if state.running and self._jobs.get(state.name, job).lock_key == job.lock_key
            ]
            raise JobBusy(
                f"job {name!r} cannot start now: "
                + (", ".join(running) or "another kernel holds its lock")
                + " is running"
            )
        return await self._watched(self._execute(claim))

    async def run_alone(self, lock: str, work: Callable[[], Awaitable[T]]) -> T:
        """Run ``work`` (``engram consolidate``) holding the jobs' ``lock``, so no job of that
        lock runs beside it: JobBusy while a kernel holds it, DatabaseError if it is lost."""
        if self._closed or not await self._try_lock(lock):
            raise JobBusy(f"the {lock!r} lock is held: one of its jobs is running")
        body = self._bodies[f"lock:{lock}"] = asyncio.ensure_future(work())  # see _session_lost
        try:
            return await self._watched(body)
        except asyncio.CancelledError:
            if being_cancelled():
                raise
            raise DatabaseError(f"the {lock!r} lock's connection was lost; stopped") from None
        finally:
            self._bodies.pop(f"lock:{lock}", None)
            await self._unlock(lock)

    async def _watched(self, run: Awaitable[T]) -> T:
        """``run``, with its lock session checked every poll as the loop does (a manual run
        may have none beside it: its lock lost, it would go on beside another kernel's)."""
        done = asyncio.Event()
        watch = asyncio.create_task(self._watch_session(done), name="engram-lock-watch")
        try:
            return await run
        finally:
            done.set()
            await watch

    async def _watch_session(self, done: asyncio.Event) -> None:
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), self._settings.poll_seconds)
            if not done.is_set():
                await self._check_session()

    async def statuses(self) -> list[JobStatus]:
        """Every registered job with its schedule, next due time and stored state."""
        await self._ensure()
        states = {state.name: state for state in await self._book.all()}
        now = self._clock()
        return [JobStatus.of(job, now, states.get(job.name)) for job in self._jobs.values()]

    @property
    def book(self) -> JobBook:
        return self._book

    # --- claiming ---------------------------------------------------------------------------

    async def _ensure(self) -> None:
        if not self._ensured:
            await self._book.ensure(list(self._jobs))
            self._ensured = True

    async def _lock_session(self) -> Connection:
        if self._session is None:
            stack = AsyncExitStack()
            try:
                self._session = await stack.enter_async_context(self._db.session())
            except BaseException:
                await stack.aclose()
                raise
            self._session_stack = stack
        return self._session

    async def _close_session(self) -> None:
        stack, self._session, self._session_stack = self._session_stack, None, None
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()

    async def _session_lost(self) -> None:
        """The lock session died, and PostgreSQL released its locks: another kernel may now
        claim the jobs running here, so they are stopped (each is safe to stop)."""
        await self._close_session()
        self._held.clear()
        for name, body in list(self._bodies.items()):
            log.warning("job.lock_lost", job=name)
            body.cancel()

    async def _try_lock(self, key: str) -> bool:
        async with self._session_lock:
            if key in self._held:
                return False
            try:
                taken = await JobBook.try_lock(await self._lock_session(), key)
            except EngramError:
                await self._session_lost()
                raise
            if taken:
                self._held.add(key)
            return taken

    async def _unlock(self, key: str) -> None:
        async with self._session_lock:
            if key not in self._held:
                return
            self._held.discard(key)
            if self._session is None:
                return
            try:
                await JobBook.unlock(self._session, key)
            except EngramError:
                await self._session_lost()

    async def _claim(self, job: Job, due: datetime, *, now: datetime, manual: bool) -> Claim | None:
        if self._closed:
            return None
        await self._ensure()
        if not await self._try_lock(job.lock_key):
            return None
        try:
            claim = await self._claim_locked(job, due, now=now, manual=manual)
        except BaseException:
            await self._unlock(job.lock_key)
            raise
        if claim is None:
            await self._unlock(job.lock_key)
        return claim

    async def _abandon_dead(self, job: Job, now: datetime) -> None:
        """The lock was free, so a kernel that marked a job of this lock running is gone."""
        for other in self._jobs.values():
            if other.lock_key == job.lock_key:
                found = await self._book.get(other.name)
                if found is not None and found.running:
                    log.warning("job.abandoned", job=other.name, holder=found.holder)
                    self._metrics.job_runs.labels(name=other.name, outcome="abandoned").inc()
                    # The first takeover runs at once; a job that keeps killing its kernel
                    # (it runs out of memory, say) backs off like one that fails.
                    wait = self._settings.retry_wait(found.failures)
                    await self._book.abandon(other.name, now, retry_at=now + wait)

    async def _claim_locked(
        self, job: Job, due: datetime, *, now: datetime, manual: bool
    ) -> Claim | None:
        await self._abandon_dead(job, now)
        state = await self._book.get(job.name)
        if state is None:  # pragma: no cover - _ensure inserted it
            raise LookupError(f"no row for job {job.name!r}")
        if not manual:
            if state.last_due is None:
                # A job seen for the first time waits for its next due time (as cron does):
                # a new kernel does not start with a burst of every job.
                await self._book.mark_checked(job.name, due)
                self._seen[job.name] = due
                return None
            ceiling, later = self._settings.backoff_ceiling, job.schedule.next_due
            retry = state.retry_at if state.failures else None
            if (
                retry is not None
                and retry > now
                and not await self._book.ahead(job.name, retry, lambda at: at + ceiling, now)
            ):
                self._not_before[job.name] = retry
                return None
            unfinished = state.outcome in ("failed", "abandoned")
            if state.last_due >= due:
                if unfinished and state.last_due == due:
                    due = state.last_due  # the same due time again: a retry or a takeover
                elif not await self._book.ahead(job.name, state.last_due, later, now):
                    self._seen[job.name] = state.last_due
                    return None
        # a cursor past the due time claimed was set on a clock stepped back since
        cursor = state.cursor if state.cursor is None or state.cursor <= due else None
        context = JobContext(due=due, manual=manual, cursor=cursor, now=now)
        reason = None
        if job.ready is not None and not manual:
            reason = await job.ready(context)
            if reason is None:
                await self._book.mark_checked(job.name, due)
                self._seen[job.name] = due
                return None
        attempt = await self._book.last_attempt(job.name, due) + 1
        # The run starts now, not when the tick began: the ready check and the jobs claimed
        # before this one in the same tick take time, and a start recorded before the check
        # that caused it would read as a run started before its reason existed.
        run_id = await self._book.start(
            job.name, due=due, attempt=attempt, manual=manual, holder=self.holder, now=self._clock()
        )
        return Claim(job, due, attempt, manual, run_id, cursor, reason)

    # --- running ----------------------------------------------------------------------------

    async def _execute(self, claim: Claim) -> RunOutcome:
        job = claim.job
        started_at = self._clock()
        if not claim.manual:
            delay = max(0.0, (started_at - claim.due).total_seconds())
            self._metrics.job_start_delay_seconds.labels(name=job.name).observe(delay)
        log.info("job.started", job=job.name, due=claim.due.isoformat(), attempt=claim.attempt)
        started = time.perf_counter()
        context = JobContext(claim.due, claim.manual, claim.cursor, started_at)
        detail: dict[str, Any] = {} if claim.reason is None else {"because": claim.reason}
        outcome = "succeeded"
        body = asyncio.ensure_future(job.run(context))
        self._bodies[job.name] = body
        try:
            detail.update(await body)
        except asyncio.CancelledError:
            outcome = "abandoned"
            detail["error"] = "stopped before it finished"
            if being_cancelled():  # the kernel is stopping: record, then stop too
                await self._finish(claim, outcome, detail, started)
                raise
        except Exception as exc:  # noqa: BLE001 - a job failure never reaches the server
            outcome = "failed"
            detail["error"] = error_text(exc)
        return await self._finish(claim, outcome, detail, started)

    async def _finish(
        self, claim: Claim, outcome: str, detail: dict[str, Any], started: float
    ) -> RunOutcome:
        """Record the run (even while this task is being cancelled) and forget it here."""
        try:
            return await asyncio.shield(self._record(claim, outcome, detail, started))
        finally:
            self._running.pop(claim.job.name, None)
            self._bodies.pop(claim.job.name, None)

    async def _record(
        self, claim: Claim, outcome: str, detail: dict[str, Any], started: float
    ) -> RunOutcome:
        job = claim.job
        duration = time.perf_counter() - started
        now = self._clock()
        failures = 0
        retry_at = None
        if outcome == "failed" and not claim.manual:
            state = await self._book.get_or_none(job.name)
            failures = (state.failures if state is not None else 0) + 1
            retry_at = now + self._settings.retry_wait(failures)
        line = summary(outcome, detail)
        recorded: int | None = 0
        try:
            recorded = await self._book.finish(
                job.name,
                claim.run_id,
                outcome=outcome,
                now=now,
                detail=detail,
                summary=line,
                duration_ms=duration * 1000,
                retry_at=retry_at,
                cursor=claim.due if outcome == "succeeded" and not claim.manual else None,
                holder=self.holder,
                manual=claim.manual,
            )
        except EngramError as exc:
            # The row stays "running"; whoever next holds the lock records it as abandoned.
            log.warning("job.record_failed", job=job.name, error=type(exc).__name__)
        finally:
            await self._unlock(job.lock_key)
        if recorded is None:
            # Another kernel took the job over after this one lost its lock: its run counts.
            log.warning("job.taken_over", job=job.name, outcome=outcome)
            return RunOutcome(
                job.name, claim.due, claim.attempt, "abandoned", detail, duration * 1000
            )
        self._metrics.job_runs.labels(name=job.name, outcome=outcome).inc()
        self._metrics.job_duration_seconds.labels(name=job.name).observe(duration)
        if outcome == "succeeded":
            self._metrics.job_last_success.labels(name=job.name).set(time.time())
            self._not_before.pop(job.name, None)
            if not claim.manual:
                self._seen[job.name] = claim.due
            log.info("job.succeeded", job=job.name, duration_ms=round(duration * 1000, 1))
        elif outcome == "failed" and retry_at is not None:
            self._not_before[job.name] = retry_at
            log.warning(
                "job.failed",
                job=job.name,
                reason=detail.get("error"),
                failures=failures,
                retry_at=retry_at.isoformat(),
            )
        return RunOutcome(job.name, claim.due, claim.attempt, outcome, detail, duration * 1000)


__all__ = ["Job", "JobContext", "JobStatus", "RunOutcome", "Scheduler", "SchedulerSettings"]
