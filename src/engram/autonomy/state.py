"""The jobs' shared state in PostgreSQL: who runs what, and how each run ended.

Exclusion comes from a session-level advisory lock per job, held on the scheduler's own
connection (:meth:`DatabaseAdapter.session`) for as long as the run lasts. PostgreSQL drops it
when that connection ends, so a kernel that dies (SIGKILL included) frees its jobs at once;
the next kernel to take the lock finds the job still marked running, records the run as
abandoned and runs that due time again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from engram.errors import EngramError, UniqueViolation
from engram.infra.db import Connection, DatabaseAdapter, Row
from engram.infra.sql import load_queries

SQL = load_queries("engram.autonomy.sql", "jobs.sql")
log = structlog.get_logger("engram.autonomy.state")


@dataclass(frozen=True, slots=True)
class JobState:
    """One row of ``engram.jobs``."""

    name: str
    last_due: datetime | None
    running: bool
    holder: str | None
    started_at: datetime | None
    finished_at: datetime | None
    outcome: str | None
    detail: str | None
    duration_ms: float | None
    failures: int
    retry_at: datetime | None
    runs: int
    cursor: datetime | None

    @classmethod
    def from_row(cls, row: Row) -> JobState:
        return cls(**{name: row[name] for name in cls.__slots__})


@dataclass(frozen=True, slots=True)
class JobRun:
    """One row of ``engram.job_runs``: an attempt at one due time."""

    id: int
    job: str
    due_at: datetime
    attempt: int
    manual: bool
    holder: str
    started_at: datetime
    finished_at: datetime | None
    outcome: str
    detail: dict[str, Any]

    @classmethod
    def from_row(cls, row: Row) -> JobRun:
        return cls(**{name: row[name] for name in cls.__slots__})


class JobBook:
    """Reads and writes the job tables; locks go through the caller's session."""

    def __init__(self, db: DatabaseAdapter) -> None:
        self._db = db

    async def ensure(self, names: list[str]) -> None:
        """Make sure every job has its row."""
        await self._db.execute(SQL["ensure_jobs"], names)

    @staticmethod
    async def try_lock(session: Connection, name: str) -> bool:
        """Take the job's advisory lock on ``session`` if nobody holds it."""
        return bool(await session.fetchval(SQL["try_lock"], name))

    @staticmethod
    async def unlock(session: Connection, name: str) -> None:
        """Release the job's advisory lock held on ``session``."""
        await session.fetchval(SQL["unlock"], name)

    async def get(self, name: str) -> JobState | None:
        row = await self._db.fetchrow(SQL["job"], name)
        return None if row is None else JobState.from_row(row)

    async def get_or_none(self, name: str) -> JobState | None:
        """The job's row, or None when it cannot be read now (a run being recorded goes on)."""
        try:
            return await self.get(name)
        except EngramError:
            return None

    async def all(self) -> list[JobState]:
        return [JobState.from_row(row) for row in await self._db.fetch(SQL["all_jobs"])]

    async def ahead(
        self, job: str, recorded: datetime, bound: Callable[[datetime], datetime], now: datetime
    ) -> bool:
        """Whether ``recorded`` (a due or retry time a kernel wrote) lies past ``bound`` of
        the clock ``now`` and of the database's: written on a clock stepped back since, it
        would hold the job back until then (a clock a year ahead: a year), so it is not
        obeyed. A kernel whose own clock lags is told apart by the database's clock."""
        if recorded <= bound(now):
            return False
        if recorded <= bound(max(now, await self._db.fetchval(SQL["now"]))):
            return False
        log.warning("job.clock_stepped", job=job, recorded=recorded.isoformat())
        return True

    async def last_attempt(self, name: str, due: datetime) -> int:
        return int(await self._db.fetchval(SQL["last_attempt"], name, due))

    async def mark_checked(self, name: str, due: datetime) -> None:
        await self._db.execute(SQL["mark_checked"], name, due)

    async def abandon(self, name: str, now: datetime, *, retry_at: datetime) -> None:
        """Close the run a dead kernel left open (a scheduled one may be retried at
        ``retry_at``)."""
        await self._db.execute(SQL["abandon_run"], name, now, retry_at)

    async def start(
        self, name: str, *, due: datetime, attempt: int, manual: bool, holder: str, now: datetime
    ) -> int:
        """Record the start of a run; its id."""
        try:
            row = await self._db.fetchrow(SQL["start_run"], name, due, attempt, manual, holder, now)
        except UniqueViolation:
            # A retry after a COMMIT whose acknowledgement was lost meets the run it recorded
            # (same holder, same start): that run is this one.
            row = await self._db.fetchrow(SQL["own_run"], name, due, attempt, holder, now)
            if row is None:
                raise
        if row is None:
            raise LookupError(f"no job {name!r}")
        return int(row["run_id"])

    async def finish(
        self,
        name: str,
        run_id: int,
        *,
        outcome: str,
        now: datetime,
        detail: dict[str, Any],
        summary: str,
        duration_ms: float,
        retry_at: datetime | None,
        cursor: datetime | None,
        holder: str,
        manual: bool,
    ) -> int | None:
        """Record how a run ended; the job's consecutive failures after it (None when another
        kernel took the job over meanwhile and nothing was recorded)."""
        failures = await self._db.fetchval(
            SQL["finish_run"],
            name,
            run_id,
            outcome,
            now,
            json.loads(json.dumps(detail, default=str)),
            summary,
            duration_ms,
            retry_at,
            cursor,
            holder,
            manual,
        )
        if failures is None:
            # A retry after a commit whose acknowledgement was lost finds the run it closed
            # (this outcome, this instant): that record is this one's.
            failures = await self._db.fetchval(SQL["own_finish"], name, run_id, outcome, now)
        return None if failures is None else int(failures)

    async def runs(self, job: str | None = None, *, limit: int = 100) -> list[JobRun]:
        """The latest runs, newest first."""
        return [
            JobRun.from_row(row) for row in await self._db.fetch(SQL["recent_runs"], job, limit)
        ]

    async def prune(self, before: datetime) -> int:
        """Delete finished runs that started before ``before``; how many."""
        status = await self._db.execute(SQL["prune_runs"], before)
        return int(status.split()[-1])
