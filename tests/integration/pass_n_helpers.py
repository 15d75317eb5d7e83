"""What hostile pass N's differential tests share: a clock that moves as work is done, the
consolidation jobs of a kernel built over an engine with other settings, and what a caller
reads of its records after the jobs ran."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from engram import Kernel
from engram.autonomy.catalogue import standard_jobs
from engram.autonomy.scheduler import Job
from engram.memory.consolidation import ConsolidationEngine
from engram.memory.types import CallerIdentity
from engram.protocols.views import record_view, search_view
from tests.integration.scheduler_helpers import Clock, scheduler
from tests.integration.twin_helpers import normalised


class WorkClock:
    """A monotonic clock that moves one second each time it is read: every topic the engine
    plans and every batch it starts looks at the clock once, so time passes with the work
    done (deterministically, where real planning time would vary). ``step = 0`` stops it:
    then no deadline is ever reached."""

    def __init__(self, step: float = 1.0) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def jobs_over(kernel: Kernel, engine: ConsolidationEngine, *names: str) -> list[Job]:
    """The kernel's standard jobs of those names, run by ``engine``."""
    jobs = standard_jobs(
        kernel.settings,
        db=kernel.db,
        gate=kernel.gate,
        consolidation=engine,
        temporal=kernel.temporal,
        embedding_ping=kernel.embeddings.ping,
        metrics=kernel.metrics,
    )
    chosen = [job for job in jobs if job.name in names]
    assert sorted(job.name for job in chosen) == sorted(names)
    return chosen


async def checks(
    kernel: Kernel, jobs: Sequence[Job], count: int, clock: Clock | None = None
) -> list[list[str]]:
    """``count`` checks of a scheduler on ``clock`` (a new one: now), moved by one watch
    period after each (a job's first check is its first sighting); the jobs each check
    started, after they finished."""
    clock = clock or Clock(datetime.now(UTC))
    runner = scheduler(kernel, jobs, clock)
    started = []
    for _ in range(count):
        started.append(await runner.tick())
        await runner.wait_idle()
        await kernel.events.settled()
        clock.advance(seconds=kernel.settings.consolidation_watch_seconds)
    await runner.stop()
    return started


async def reads(
    kernel: Kernel, caller: CallerIdentity, ids: Sequence[UUID | None], query: str
) -> list[Any]:
    """What ``caller`` reads: each of ``ids`` as it is now, a search with and without
    consolidated records, and every record of its listing (summaries included), normalised."""
    out: list[Any] = []
    for record_id in ids:
        assert record_id is not None
        head = await kernel.temporal.current(record_id, caller=caller, count_read=False)
        out.append(None if head is None else [head.status.value, head.content])
    for options in ({}, {"include_consolidated": True}):
        found = await kernel.retrieval.search(caller, query, **options)
        out.append(search_view(found))
    page = sorted(await kernel.temporal.page(caller=caller), key=lambda r: r.content)
    out.append([record_view(r) for r in page])
    return normalised(out)
