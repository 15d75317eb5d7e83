"""Batches started while a level's topics are still being planned.

A pass used to plan all of a level's topics before committing any, so a level whose planning
took most of its time (a backlog, or a slow outside summariser) committed nothing and stayed
due for ever. A :class:`Committer` is handed each topic as it is planned, closes a batch as
soon as the next topic would not fit in it (:func:`~.batching.chunks`' rule) and starts it at
once, at most ``BATCHES_IN_FLIGHT`` at a time. A batch that gets its slot after the deadline
(by the engine's clock, read once per batch until it has passed) is ``timed_out``, except
the last batch of a level whose planning the deadline cut short: every topic in it was
planned in time, and without it a level whose plan fits in one batch would commit nothing
whenever its planning ran out of time. It overruns the deadline by at most one batch, as a
batch already committing does.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence

import structlog

from engram.memory.consolidation.batching import Progress
from engram.memory.consolidation.model import BatchReport, ConsolidationCandidate, SkipReason
from engram.memory.types import ConsolidationTrigger

log = structlog.get_logger("engram.memory.consolidation")

#: Batches committed side by side: one plans (Python) while the other commits (PostgreSQL).
BATCHES_IN_FLIGHT = 2

Commit = Callable[[Sequence[ConsolidationCandidate]], Awaitable[BatchReport]]


class Committer:
    """Commits the topics it is given in batches of about ``batch_size`` sources."""

    def __init__(
        self,
        commit: Commit,
        *,
        trigger: ConsolidationTrigger,
        run_id: uuid.UUID,
        batch_size: int,
        deadline: float,
        clock: Callable[[], float],
        progress: Progress | None = None,
    ) -> None:
        self._commit = commit
        self._trigger = trigger
        self._run_id = run_id
        self._batch_size = batch_size
        self._deadline = deadline
        self._clock = clock
        self._progress = progress
        self._slots = asyncio.Semaphore(BATCHES_IN_FLIGHT)
        self._current: list[ConsolidationCandidate] = []
        self._sources = 0
        self._started: list[asyncio.Task[BatchReport]] = []
        self._errors: list[Exception] = []
        self._given = 0
        self._done = 0
        self._late = False  # once out of time, the clock is not read again
        self._crossed = False

    def add(self, candidate: ConsolidationCandidate) -> None:
        """Take one planned topic; the batch before it starts if the topic does not fit."""
        other_level = self._current and self._current[-1].access_level is not candidate.access_level
        if self._current and (
            other_level or self._sources + len(candidate.sources) > self._batch_size
        ):
            self._start()
        self._current.append(candidate)
        self._sources += len(candidate.sources)
        self._given += 1

    def crossed(self) -> None:
        """The deadline stopped the planning of the topics given, each of them begun before
        it (the planner calls this): :meth:`finish` starts their last batch."""
        self._crossed = True

    async def finish(self) -> tuple[list[BatchReport], list[Exception]]:
        """Start the last batch and wait for all: their reports in order, and the errors of
        those that failed (reported, not raised). After :meth:`crossed` the last batch
        starts whatever the clock says."""
        if self._current:
            self._start(checked=not self._crossed)
        return list(await asyncio.gather(*self._started)), self._errors

    async def abandon(self) -> list[BatchReport]:
        """Planning failed or the pass was cancelled: the batches started are cancelled (one
        in its transaction rolls back, as a cancelled commit always did) and nothing more
        is written; the next pass finds the topics again. The reports of the batches that
        had already ended, committed or failed, are returned (the engine still counts them)."""
        self._current = []
        for task in self._started:
            task.cancel()
        ended = await asyncio.gather(*self._started, return_exceptions=True)
        return [report for report in ended if isinstance(report, BatchReport)]

    def _start(self, *, checked: bool = True) -> None:
        chunk, self._current, self._sources = self._current, [], 0
        self._started.append(asyncio.ensure_future(self._one(chunk, checked)))

    async def _one(self, chunk: list[ConsolidationCandidate], checked: bool) -> BatchReport:
        sources = sum(len(c.sources) for c in chunk)
        level = chunk[0].access_level
        async with self._slots:
            if checked:
                self._late = self._late or self._clock() > self._deadline
            if checked and self._late:  # out of time: left for the next pass
                skipped = {SkipReason.TIMED_OUT.value: sources}
                return BatchReport(
                    uuid.uuid4(), (), skipped, committed=False, trigger=self._trigger, level=level
                )
            try:
                batch = await self._commit(chunk)
            except Exception as exc:  # noqa: BLE001 - one batch's failure is reported
                self._errors.append(exc)
                log.error(
                    "consolidation.error",
                    run_id=str(self._run_id),
                    access_level=level.value,
                    sources=sources,
                    error=type(exc).__name__,
                )
                skipped = {SkipReason.FAILED.value: sources}
                return BatchReport(
                    uuid.uuid4(), (), skipped, committed=False, trigger=self._trigger, level=level
                )
        self._done += len(chunk)
        if self._progress is not None:
            self._progress(self._done, self._given)
        return batch
