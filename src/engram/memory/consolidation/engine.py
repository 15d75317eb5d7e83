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
up to ``max_candidates`` records of each, most open level first, and no batch joins two
levels. Records a caller may not read thus neither start, nor hold back, nor share a batch
(and its failure) with the consolidation of records it may read (ADR-019's amendment).
"""

from __future__ import annotations

import asyncio
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
from engram.memory.consolidation.actions import most_closed
from engram.memory.consolidation.candidates import Planner, PlannerSettings
from engram.memory.consolidation.model import (
    BatchItem,
    BatchReport,
    ConsolidationCandidate,
    ConsolidationReport,
    RollbackReport,
    SkipReason,
)
from engram.memory.consolidation.reversal import CONSOLIDATOR, SQL, BatchDesk, restate
from engram.memory.consolidation.summarize import Summarizer
from engram.memory.consolidation.watch import ConsolidationWatch, ordered
from engram.memory.gate.groups import GroupOutcome
from engram.memory.gate.librarian import LibrarianGate
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    AccessLevel,
    ConsolidationTrigger,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
)
from engram.observability.metrics import EngramMetrics

log = structlog.get_logger("engram.memory.consolidation")

CONSOLIDATED_EVENT = "memory.consolidated"
#: Batches committed side by side: one plans (Python) while the other commits (PostgreSQL).
BATCHES_IN_FLIGHT = 2

#: Called after each topic is written or skipped: (topics done, topics in all).
Progress = Callable[[int, int], None]


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
        deadline: float | None = None,
    ) -> tuple[list[ConsolidationCandidate], Counter[str], int]:
        """Each level planned on its own budget, most open first (a deadline reached while
        planning leaves the more closed levels for the next pass)."""
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
                deadline=deadline,
                clock=self._clock,
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
    ) -> ConsolidationReport:
        """One pass of ``trigger`` over ``levels`` (None: every level; a pressure-driven pass
        reads only those over the limit); see the module docstring. ``dry_run`` writes
        nothing."""
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
            report = await self._run(run_id, trigger, chosen, dry_run=dry_run, progress=progress)
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
    ) -> ConsolidationReport:
        started = time.perf_counter()
        deadline = self._clock() + self._settings.max_seconds  # planning counts too
        if trigger is ConsolidationTrigger.PRESSURE_DRIVEN:
            fast = await self.watch.fast_path()
            due = self.watch.pressure_of({level: fast.get(level, 0) for level in levels})
            under = [level for level in levels if due is None or level not in due.levels]
            if due is None:  # no pressure: nothing to read
                resting = sum(fast.get(level, 0) for level in under)
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
        planned, skipped, considered = await self._candidates(trigger, levels, deadline)
        if dry_run:
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
        batches = await self.commit(
            planned, trigger=trigger, run_id=run_id, progress=progress, deadline=deadline
        )
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
        run_id = run_id or uuid.uuid4()
        chunks = _chunks(planned, self._settings.batch_size)
        slots = asyncio.Semaphore(BATCHES_IN_FLIGHT)
        done = 0
        if deadline is None:
            deadline = self._clock() + self._settings.max_seconds
        errors: list[Exception] = []

        async def one(chunk: list[ConsolidationCandidate]) -> BatchReport:
            nonlocal done
            sources = sum(len(c.sources) for c in chunk)
            level = chunk[0].access_level
            async with slots:
                if self._clock() > deadline:  # out of time: left for the next pass
                    skipped = {SkipReason.TIMED_OUT.value: sources}
                    return BatchReport(
                        uuid.uuid4(), (), skipped, committed=False, trigger=trigger, level=level
                    )
                try:
                    batch = await self._commit(run_id, trigger, chunk)
                except Exception as exc:  # noqa: BLE001 - one batch's failure is reported
                    errors.append(exc)
                    log.error(
                        "consolidation.error",
                        run_id=str(run_id),
                        sources=sources,
                        error=type(exc).__name__,
                    )
                    skipped = {SkipReason.FAILED.value: sources}
                    return BatchReport(
                        uuid.uuid4(), (), skipped, committed=False, trigger=trigger, level=level
                    )
            done += len(chunk)
            if progress is not None:
                progress(done, len(planned))
            return batch

        batches = list(await asyncio.gather(*(one(chunk) for chunk in chunks)))
        if errors and len(errors) == len(chunks):
            raise errors[0]
        return batches

    async def _commit(
        self, run_id: UUID, trigger: ConsolidationTrigger, chunk: Sequence[ConsolidationCandidate]
    ) -> BatchReport:
        batch_id = uuid.uuid4()
        groups = [_requests(batch_id, n, candidate) for n, candidate in enumerate(chunk)]
        recorded: dict[str, Any] = {}

        async def finish(conn: Connection, outcomes: Sequence[GroupOutcome]) -> None:
            items, skipped = _summarise(chunk, outcomes)
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

    async def on_source_changed(self, event: Event) -> None:
        """Outbox subscriber of ``memory.forgotten`` and ``memory.updated``."""
        await self._desk.on_source_changed(event)


def _chunks(
    planned: Sequence[ConsolidationCandidate], size: int
) -> list[list[ConsolidationCandidate]]:
    """Topics in batches of about ``size`` sources (a larger topic is a batch of its own);
    a batch holds topics of one access level only."""
    chunks: list[list[ConsolidationCandidate]] = []
    current: list[ConsolidationCandidate] = []
    count = 0
    for candidate in planned:
        other_level = current and current[-1].access_level is not candidate.access_level
        if current and (other_level or count + len(candidate.sources) > size):
            chunks.append(current)
            current, count = [], 0
        current.append(candidate)
        count += len(candidate.sources)
    if current:
        chunks.append(current)
    return chunks


def _levels(levels: Iterable[AccessLevel] | None) -> tuple[AccessLevel, ...]:
    return tuple(AccessLevel) if levels is None else ordered(levels)


def _requests(batch_id: UUID, n: int, candidate: ConsolidationCandidate) -> list[GateRequest]:
    """One topic's requests: the consolidated record's CREATE, then each source's UPDATE."""
    sources = candidate.sources
    first = min(s.event_time or s.ingestion_time for s in sources)
    closest = most_closed(sources)
    record = MemoryRecord.draft(
        candidate.proposal_type,
        candidate.content,
        source_agent=CONSOLIDATOR.agent_id,
        metadata=candidate.metadata,
        event_time=first,
        access_level=candidate.access_level,
        source_confidence=candidate.confidence,
        evidence_links=[s.id for s in sources],
        namespace=sources[0].namespace,
        classification=closest.classification,
    )
    requests = [
        GateRequest(
            GateAction.CREATE,
            record,
            CONSOLIDATOR,
            GateDecisionType.CONSOLIDATION,
            request_id=f"consolidation:{batch_id}:{n}",
        )
    ]
    requests += [
        restate(
            source,
            MemoryStatus.CONSOLIDATED,
            request_id=f"consolidation:{batch_id}:{source.record_id}",
        )
        for source in sources
    ]
    return requests


def _summarise(
    chunk: Sequence[ConsolidationCandidate], outcomes: Sequence[GroupOutcome]
) -> tuple[list[BatchItem], dict[str, int]]:
    items: list[BatchItem] = []
    skipped: Counter[str] = Counter()
    for candidate, outcome in zip(chunk, outcomes, strict=True):
        if not outcome.written:
            reason = outcome.skipped or SkipReason.REJECTED.value
            skipped[reason] += len(candidate.sources)
            continue
        created = outcome.results[0]
        if created.record_id is None:  # pragma: no cover - an approved CREATE names its record
            raise RuntimeError("a consolidated record without an id")
        items.append(
            BatchItem(
                action=candidate.action,
                record_id=created.record_id,
                sources=candidate.source_ids,
                source_versions=tuple(s.id for s in candidate.sources),
            )
        )
    return items, dict(skipped)


__all__ = ["ConsolidationEngine", "ConsolidationSettings"]
