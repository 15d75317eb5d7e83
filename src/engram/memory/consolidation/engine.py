"""The CLS consolidation engine: fast-path records become slow-path knowledge, reversibly.

A pass (:meth:`ConsolidationEngine.run`) reads the active fast-path heads its trigger covers,
groups them into topics (:mod:`.topics`), chooses each topic's action (:mod:`.actions`),
writes the consolidated text (:mod:`.summarize`) and commits the topics in batches of about
``batch_size`` sources. Each batch is one transaction through the Gate
(:meth:`~engram.memory.gate.librarian.LibrarianGate.evaluate_groups`): per topic, a CREATE of
the consolidated record (``decision_type = consolidation``, slow path, citing every source so
that it gets a ``derived_from`` edge to each) and an UPDATE of each source to status
``consolidated`` (a new version that ``supersedes`` the old one), each audited; then the
batch's row in ``consolidation_batches``. Sources are never deleted;
:meth:`ConsolidationEngine.rollback` forgets the consolidated records and restores the
sources to ``active``, again in one transaction through the Gate. See ADR-018.

Each access level is consolidated on its own: a pass reads the levels it is given (every
level for the scheduled passes, those its watch found due for the event and pressure passes),
up to ``max_candidates`` records of each, most open level first, each level planned and
committed before the next is planned, and no batch joins two levels. Each level has its own
deadline within ``max_seconds`` (:func:`level_deadline`): the time a more closed level takes
never runs a more open one past it, and a flood at a more open level leaves a more closed
one a fixed share of every pass. Records a caller may not read thus neither start, nor hold
back, nor share a batch (and its failure) or the pass's time with the consolidation of
records it may read (ADR-019's amendments).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import structlog

from engram.infra.db import Connection, DatabaseAdapter
from engram.infra.events import Event, EventBus
from engram.memory.consolidation import batching
from engram.memory.consolidation.batching import Progress
from engram.memory.consolidation.candidates import Planner, PlannerSettings
from engram.memory.consolidation.committer import Committer
from engram.memory.consolidation.model import (
    BatchReport,
    ConsolidationCandidate,
    ConsolidationReport,
    RollbackReport,
    SkipReason,
    SweepReport,
)
from engram.memory.consolidation.reversal import SQL, BatchDesk
from engram.memory.consolidation.summarize import Summarizer
from engram.memory.consolidation.watch import ConsolidationWatch, ordered
from engram.memory.gate.groups import GroupOutcome
from engram.memory.gate.librarian import LibrarianGate
from engram.memory.types import AccessLevel, ConsolidationTrigger
from engram.observability.metrics import EngramMetrics

log = structlog.get_logger("engram.memory.consolidation")

CONSOLIDATED_EVENT = "memory.consolidated"
#: The share of a pass's ``max_seconds`` kept for each level more closed than a given one
#: (ADR-019, amendment of 2026-11-29): see :func:`level_deadline`.
LEVEL_RESERVE = 0.05


def level_deadline(started: float, max_seconds: float, level: AccessLevel) -> float:
    """When a pass that began at ``started`` stops planning and starting batches of
    ``level``: ``LEVEL_RESERVE`` of ``max_seconds`` is kept for each more closed level,
    whether or not it has work. The most closed level ends with the pass; the most open
    may use 80 % of it. A flood at an open level thus leaves every more closed level its
    turn in each pass, and that turn never depends on what a more closed level holds: the
    time a level gets is decided by the levels more open than it, whose records its
    readers may read, and by nothing else."""
    closer = len(AccessLevel) - 1 - level.rank
    return started + max_seconds * (1.0 - LEVEL_RESERVE * closer)


@dataclass(frozen=True, slots=True)
class ConsolidationSettings:
    """How passes run (``ENGRAM_CONSOLIDATION_*``; see the README's table)."""

    batch_size: int = 100
    max_candidates: int = 20_000
    light_window: timedelta = timedelta(hours=24)
    event_threshold: int = 5
    fast_path_limit: int = 10_000
    #: Fast-path records whose decay score fell below this are owed to consolidation.
    decay_threshold: float = 0.5
    #: A pass starts no batch after this long; what it committed stays (spec §6).
    max_seconds: float = 1800.0
    planner: PlannerSettings = field(default_factory=PlannerSettings)


class ConsolidationEngine:
    """``run``, ``evaluate_candidates``, ``rollback`` and the batch listing."""

    def __init__(
        self,
        *,
        db: DatabaseAdapter,
        gate: LibrarianGate,
        events: EventBus,
        metrics: EngramMetrics,
        summarizer: Summarizer,
        settings: ConsolidationSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._db = db
        self._gate = gate
        self._events = events
        self._metrics = metrics
        self._settings = settings or ConsolidationSettings()
        self._planner = Planner(db, summarizer, self._settings.planner)
        self.watch = ConsolidationWatch(
            db,
            event_threshold=self._settings.event_threshold,
            fast_path_limit=self._settings.fast_path_limit,
            decay_threshold=self._settings.decay_threshold,
            event_horizon=self._settings.light_window,
        )
        self._desk = BatchDesk(db, gate)

    async def evaluate_candidates(
        self,
        trigger: ConsolidationTrigger = ConsolidationTrigger.SCHEDULED_DEEP,
        *,
        levels: Iterable[AccessLevel] | None = None,
    ) -> list[ConsolidationCandidate]:
        """What a pass of ``trigger`` over ``levels`` (None: every level) would consolidate
        now (nothing is written)."""
        planned, _, _ = await self._candidates(trigger, _levels(levels))
        return planned

    async def _candidates(
        self,
        trigger: ConsolidationTrigger,
        levels: Sequence[AccessLevel],
        started: float | None = None,
        ready: Callable[[ConsolidationCandidate], None] | None = None,
        crossed: Callable[[], None] | None = None,
    ) -> tuple[list[ConsolidationCandidate], Counter[str], int]:
        """Each level planned on its own budget, most open first, until its
        :func:`level_deadline` for a pass that began at ``started`` (None: no limit)."""
        settings = self._settings
        since = None
        if trigger is ConsolidationTrigger.SCHEDULED_LIGHT:
            since = datetime.now(UTC) - settings.light_window
        min_topic = settings.event_threshold if trigger is ConsolidationTrigger.EVENT_DRIVEN else 1
        planned: list[ConsolidationCandidate] = []
        skipped: Counter[str] = Counter()
        considered = 0
        for level in levels:
            found, left, read = await self._planner.plan(
                since=since,
                limit=settings.max_candidates,
                min_topic=min_topic,
                level=level,
                deadline=None if started is None else self._deadline(started, level),
                clock=self._clock,
                ready=ready,
                crossed=crossed,
            )
            planned += found
            skipped.update(left)
            considered += read
        return planned, skipped, considered

    async def run(
        self,
        trigger: ConsolidationTrigger,
        *,
        dry_run: bool = False,
        progress: Progress | None = None,
        levels: Iterable[AccessLevel] | None = None,
        raise_failed: bool = True,
    ) -> ConsolidationReport:
        """One pass of ``trigger`` over ``levels`` (None: every level; a pressure-driven pass
        reads only those over the limit); see the module docstring. ``dry_run`` writes
        nothing. When every batch of the pass failed, or a level's planning raised, the
        first error is raised if ``raise_failed`` (an operator's run, whose reader sees
        every level); a job's pass only reports them (``failed_levels``, ``unplanned_levels``)
        and goes on with the next level: whether it fails must not depend on a more closed
        level (ADR-019). Either way each batch, and each level whose planning failed, is
        counted by level in ``engram_consolidation_batches_total``."""
        run_id = uuid.uuid4()
        started = time.perf_counter()
        chosen = _levels(levels)
        log.info(
            "consolidation.started",
            trigger=trigger.value,
            run_id=str(run_id),
            levels=[level.value for level in chosen],
        )
        try:
            report = await self._run(
                run_id,
                trigger,
                chosen,
                dry_run=dry_run,
                progress=progress,
                raise_failed=raise_failed,
            )
        except Exception as exc:
            log.error(
                "consolidation.error",
                trigger=trigger.value,
                run_id=str(run_id),
                error=type(exc).__name__,
            )
            raise
        finally:
            elapsed = time.perf_counter() - started
            self._metrics.consolidation_duration_seconds.labels(trigger=trigger.value).observe(
                elapsed
            )
        log.info(
            "consolidation.completed",
            trigger=trigger.value,
            run_id=str(run_id),
            dry_run=dry_run,
            candidates=report.candidates,
            batches=len(report.batches),
            items_consolidated=len(report.consumed),
            created=len(report.created),
            failed_levels=[level.value for level in report.failed_levels],
            skipped=dict(report.skipped),
            duration_ms=round(report.duration_seconds * 1000),
        )
        if not dry_run and report.created:
            await self._gate.refresh_record_gauge()
        return report

    async def _run(
        self,
        run_id: UUID,
        trigger: ConsolidationTrigger,
        levels: tuple[AccessLevel, ...],
        *,
        dry_run: bool,
        progress: Progress | None,
        raise_failed: bool,
    ) -> ConsolidationReport:
        started = time.perf_counter()
        began = self._clock()  # planning counts too
        if trigger is ConsolidationTrigger.PRESSURE_DRIVEN:
            fast = await self.watch.fast_path()
            due = self.watch.pressure_of({level: fast.get(level, 0) for level in levels})
            if due is None:  # no pressure: nothing to read
                resting = sum(fast.get(level, 0) for level in levels)
                return ConsolidationReport(
                    run_id=run_id,
                    trigger=trigger,
                    dry_run=dry_run,
                    candidates=resting,
                    batches=(),
                    skipped={SkipReason.UNDER_LIMIT.value: resting} if resting else {},
                    duration_seconds=time.perf_counter() - started,
                    levels=(),
                )
            levels = due.levels
        if dry_run:
            planned, skipped, considered = await self._candidates(trigger, levels, began)
            return ConsolidationReport(
                run_id=run_id,
                trigger=trigger,
                dry_run=True,
                candidates=considered,
                batches=(),
                skipped=dict(skipped),
                duration_seconds=time.perf_counter() - started,
                planned=tuple(planned),
                levels=levels,
            )
        # Each level is planned and committed before the next is planned, each until its own
        # deadline: the time a more closed level takes must not run a more open one past it,
        # nor a more open one's take the whole pass from a more closed one (ADR-019).
        planned, skipped, considered = [], Counter[str](), 0
        batches: list[BatchReport] = []
        errors: list[Exception] = []
        timed_out: list[AccessLevel] = []
        unplanned: list[AccessLevel] = []
        for level in levels:
            committer = self._committer(
                trigger,
                run_id,
                None if progress is None else batching.shifted(progress, len(planned)),
                self._deadline(began, level),
            )
            try:  # each topic's batch starts as soon as it is planned
                found, left, read = await self._candidates(
                    trigger, (level,), began, ready=committer.add, crossed=committer.crossed
                )
                made, failed = await committer.finish()
            except BaseException as exc:
                # batches of this level that committed before the error still count
                ended = await committer.abandon()
                self._count(trigger, ended)
                if raise_failed or not isinstance(exc, Exception):  # a cancellation stops all
                    raise
                # a job's pass: the level failed, not the pass; the next level is read as
                # if nothing had happened here (whether a job fails must not depend on a
                # more closed level, ADR-019)
                self._unplanned(run_id, trigger, level, exc)
                batches += ended
                unplanned.append(level)
                continue
            self._count(trigger, made)
            planned += found
            skipped.update(left)
            considered += read
            batches += made
            errors += failed
            if left.get(SkipReason.TIMED_OUT.value) or any(
                b.skipped.get(SkipReason.TIMED_OUT.value) for b in made
            ):
                timed_out.append(level)
        if raise_failed and errors and len(errors) == len(batches):  # every batch failed
            raise errors[0]
        for batch in batches:
            for reason, n in batch.skipped.items():
                skipped[reason] += n
        return ConsolidationReport(
            run_id=run_id,
            trigger=trigger,
            dry_run=False,
            candidates=considered,
            batches=tuple(batches),
            skipped=dict(skipped),
            duration_seconds=time.perf_counter() - started,
            planned=tuple(planned),
            levels=levels,
            timed_out_levels=tuple(timed_out),
            unplanned_levels=tuple(unplanned),
        )

    async def commit(
        self,
        planned: Sequence[ConsolidationCandidate],
        *,
        trigger: ConsolidationTrigger,
        run_id: UUID | None = None,
        progress: Progress | None = None,
        deadline: float | None = None,
    ) -> list[BatchReport]:
        """Write ``planned`` candidates (from :meth:`evaluate_candidates`) in batches. A topic
        whose source moved on since it was planned is skipped (``source_changed``), never
        written over; the others commit. No batch starts after ``deadline`` (by the engine's
        clock; default ``max_seconds`` from now): the rest is ``timed_out``. A batch that
        fails is ``failed`` and logged, the others go on; when every batch fails, the first
        error is raised."""
        committer = self._committer(
            trigger,
            run_id or uuid.uuid4(),
            progress,
            self._clock() + self._settings.max_seconds if deadline is None else deadline,
        )
        for candidate in planned:
            committer.add(candidate)
        batches, errors = await committer.finish()
        self._count(trigger, batches)
        if errors and len(errors) == len(batches):
            raise errors[0]
        return batches

    def _count(self, trigger: ConsolidationTrigger, batches: Sequence[BatchReport]) -> None:
        """Each batch that committed or failed, by level (``engram_consolidation_batches_total``:
        the operator's signal of a failing level, ADR-019)."""
        for batch in batches:
            if batch.level is None or not (batch.committed or batch.failed):
                continue
            self._metrics.consolidation_batches.labels(
                trigger=trigger.value,
                access_level=batch.level.value,
                outcome="committed" if batch.committed else "failed",
            ).inc()

    def _unplanned(
        self, run_id: UUID, trigger: ConsolidationTrigger, level: AccessLevel, exc: Exception
    ) -> None:
        """A level whose planning (or its committer) raised in a job's pass: logged by type
        only (a foreign message may quote a record) and counted (``outcome="unplanned"``)."""
        log.error(
            "consolidation.error",
            trigger=trigger.value,
            run_id=str(run_id),
            access_level=level.value,
            stage="planning",
            error=type(exc).__name__,
        )
        self._metrics.consolidation_batches.labels(
            trigger=trigger.value, access_level=level.value, outcome="unplanned"
        ).inc()

    def _committer(
        self,
        trigger: ConsolidationTrigger,
        run_id: UUID,
        progress: Progress | None,
        deadline: float,
    ) -> Committer:
        return Committer(
            lambda chunk: self._commit(run_id, trigger, chunk),
            trigger=trigger,
            run_id=run_id,
            batch_size=self._settings.batch_size,
            deadline=deadline,
            clock=self._clock,
            progress=progress,
        )

    async def _commit(
        self, run_id: UUID, trigger: ConsolidationTrigger, chunk: Sequence[ConsolidationCandidate]
    ) -> BatchReport:
        batch_id = uuid.uuid4()
        groups = [batching.requests(batch_id, n, candidate) for n, candidate in enumerate(chunk)]
        recorded: dict[str, Any] = {}

        async def finish(conn: Connection, outcomes: Sequence[GroupOutcome]) -> None:
            items, skipped = batching.summarise(chunk, outcomes)
            recorded.update(items=items, skipped=skipped)
            if not items:
                return
            decisions = [r.decision_id for o in outcomes if o.written for r in o.results]
            recorded["created_at"] = await conn.fetchval(
                SQL["insert_batch"],
                batch_id,
                run_id,
                trigger.value,
                [item.to_json() for item in items],
                skipped,
                decisions,
            )
            payload = {
                "batch_id": str(batch_id),
                "trigger": trigger.value,
                "created": [str(item.record_id) for item in items],
                "consumed": [str(s) for item in items for s in item.sources],
            }
            await self._events.publish(conn, Event(CONSOLIDATED_EVENT, batch_id, payload))

        outcomes = await self._gate.evaluate_groups(groups, finish=finish)
        for candidate, outcome in zip(chunk, outcomes, strict=True):
            log.info(
                "consolidation.item_processed",
                batch_id=str(batch_id),
                action=candidate.action.value,
                sources=len(candidate.sources),
                written=outcome.written,
                skipped=outcome.skipped,
            )
        items = recorded.get("items", [])
        return BatchReport(
            batch_id=batch_id,
            items=tuple(items),
            skipped=recorded.get("skipped", {}),
            committed=bool(items),
            created_at=recorded.get("created_at"),
            trigger=trigger,
            level=chunk[0].access_level,
        )

    # --- batches and their reversal (engram.memory.consolidation.reversal) -----------------

    async def batches(self, *, limit: int = 50) -> list[BatchReport]:
        """The most recent committed batches, newest first."""
        return await self._desk.batches(limit=limit)

    async def batch(self, batch_id: UUID) -> BatchReport:
        """One committed batch; :class:`~engram.errors.NotFound` when there is none."""
        return await self._desk.batch(batch_id)

    async def rollback(self, batch_id: UUID, *, force: bool = False) -> RollbackReport:
        """Undo a batch (:meth:`.reversal.BatchDesk.rollback`)."""
        return await self._desk.rollback(batch_id, force=force)

    async def release(self, record_id: UUID) -> list[UUID]:
        """Undo what consumed a forgotten or changed record (``BatchDesk.release``)."""
        return await self._desk.release(record_id)

    async def sweep_releases(self) -> SweepReport:
        """Finish the releases their events did not (``BatchDesk.sweep``)."""
        return await self._desk.sweep()

    def _deadline(self, started: float, level: AccessLevel) -> float:
        return level_deadline(started, self._settings.max_seconds, level)

    async def on_source_changed(self, event: Event) -> None:
        """Outbox subscriber of ``memory.forgotten`` and ``memory.updated``."""
        await self._desk.on_source_changed(event)


def _levels(levels: Iterable[AccessLevel] | None) -> tuple[AccessLevel, ...]:
    return tuple(AccessLevel) if levels is None else ordered(levels)


__all__ = ["ConsolidationEngine", "ConsolidationSettings"]
