"""The vocabulary of background jobs: a job, what a run knows, how it ended, the scheduler's
settings (:mod:`engram.autonomy.scheduler` runs them)."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from engram.autonomy.schedule import Schedule, backoff
from engram.autonomy.state import JobState
from engram.errors import EngramError

Clock = Callable[[], datetime]


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a run knows: the due time it serves, whether an operator asked for it, and the due
    time of the job's last successful scheduled run (``cursor``; None before the first)."""

    due: datetime
    manual: bool
    cursor: datetime | None
    now: datetime


JobBody = Callable[[JobContext], Awaitable[Mapping[str, Any]]]
Condition = Callable[[JobContext], Awaitable[str | None]]


@dataclass(frozen=True, slots=True)
class Job:
    """A named piece of background work.

    ``run`` returns a small JSON-ready summary (counts, never memory content). ``ready``, for a
    watched job, says why it should run now (or None: not now)."""

    name: str
    schedule: Schedule
    run: JobBody
    description: str
    ready: Condition | None = None
    #: Jobs sharing a lock never run at the same time (the job's own name when None).
    lock: str | None = None

    @property
    def lock_key(self) -> str:
        return self.lock or self.name


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How one run ended."""

    job: str
    due: datetime
    attempt: int
    outcome: str
    detail: Mapping[str, Any]
    duration_ms: float


@dataclass
class Claim:
    """A run this kernel has claimed (its lock held, its start recorded)."""

    job: Job
    due: datetime
    attempt: int
    manual: bool
    run_id: int
    cursor: datetime | None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class JobStatus:
    """A job as ``engram jobs list`` shows it."""

    name: str
    description: str
    schedule: str
    next_due: datetime
    state: JobState | None

    @classmethod
    def of(cls, job: Job, now: datetime, state: JobState | None) -> JobStatus:
        """``job`` as it stands at ``now`` with its stored ``state``."""
        schedule = job.schedule
        return cls(job.name, job.description, schedule.describe(), schedule.next_due(now), state)


def default_holder() -> str:
    """This process, as other kernels see it in ``engram jobs list``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass
class SchedulerSettings:
    """How often the scheduler looks, and how it backs off."""

    poll_seconds: float = 5.0
    backoff_base: timedelta = timedelta(minutes=1)
    backoff_ceiling: timedelta = timedelta(hours=1)
    max_concurrent: int = 3
    #: How long stopping waits for running jobs before it cancels them.
    stop_grace_seconds: float = 5.0
    holder: str = field(default_factory=default_holder)

    def retry_wait(self, failures: int) -> timedelta:
        """The back-off after ``failures`` consecutive failures (or abandoned runs)."""
        return backoff(failures, base=self.backoff_base, ceiling=self.backoff_ceiling)


def being_cancelled() -> bool:
    """True when the current task itself was asked to stop (not only what it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def error_text(exc: BaseException) -> str:
    """What a failed run records and logs: engram's own message (written to be shown), or
    only the type of anything else (a foreign message may quote data)."""
    if isinstance(exc, EngramError):
        return f"{type(exc).__name__}: {exc}"[:500]
    return type(exc).__name__


def summary(outcome: str, detail: Mapping[str, Any]) -> str:
    """One line for ``engram jobs list``."""
    if "error" in detail:
        return str(detail["error"])[:500]
    parts: list[str] = []
    for key, value in detail.items():
        if isinstance(value, Mapping):  # one level down: skipped={"failed": 3} -> skipped.failed=3
            parts.extend(f"{key}.{inner}={count}" for inner, count in value.items())
        elif isinstance(value, list | tuple):  # levels=["public", "agent"] -> levels=public/agent
            parts.append(f"{key}={'/'.join(str(item) for item in value) or '-'}")
        else:
            parts.append(f"{key}={value}")
    return (", ".join(parts) or outcome)[:500]
