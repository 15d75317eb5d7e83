"""The kernel's background jobs, by name (``engram jobs list`` shows them in this order).

===========================  ============================================  ==================
job                          what it does                                  when (default)
===========================  ============================================  ==================
``consolidation_deep``       a full consolidation pass                     daily 03:00 UTC
``consolidation_light``      a pass over records ingested recently         every 60 min
``consolidation_event``      a pass when a topic has grown                 checked every 30 s
``consolidation_pressure``   a pass when the fast path is over its limit   checked every 30 s
``reembed``                  embeds records stored without an embedding    every 5 min
``pii_rescan``               rescans records an older detector screened    every 60 min
``decay_refresh``            recomputes every live record's decay score    every 60 min
``retention``                deletes delivered events, closed escalations  daily 04:30 UTC
                             and job runs past ``ENGRAM_RETENTION_DAYS``
``advisor_train``            trains a candidate advisor on logged          daily 03:30 UTC
                             decisions and feedback (ADR-020)
``advisor_train_pressure``   the same, once enough new feedback arrived    checked every 5 min
===========================  ============================================  ==================

The consolidation jobs share one lock (``consolidation``): two passes never run at once, on
one kernel or across kernels. A scheduled pass whose batches fail does not fail its job (an
operator's run still does when every batch failed): the event and pressure jobs back the
failing level off on its own (:mod:`.levels`), and ``engram_consolidation_batches_total``
tells the operator (ADR-019). The deep and light passes first finish the releases of
forgotten or changed sources that their outbox events did not (ADR-018's sweep,
``engram_consolidation_releases_swept_total``). Every record a job changes is a write
through the Gate (``consolidation`` or ``self_healing``); the decay refresh and retention
change bookkeeping only (decay scores, delivered events, closed escalations, job runs).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

import structlog

from engram.autonomy.healing import PiiRescan, reembed_missing
from engram.autonomy.jobs import Job, JobBody, JobContext
from engram.autonomy.levels import LevelBackoff
from engram.autonomy.schedule import Daily, Every
from engram.autonomy.state import JobBook
from engram.config import EngramSettings
from engram.infra.db import DatabaseAdapter
from engram.infra.sql import load_queries
from engram.memory.consolidation import ConsolidationEngine, ConsolidationReport
from engram.memory.gate.librarian import LibrarianGate
from engram.memory.rl.models import ModelStore
from engram.memory.rl.runs import train_candidate
from engram.memory.rl.windows import HORIZON
from engram.memory.temporal.engine import TemporalEngine
from engram.memory.types import AccessLevel, ConsolidationTrigger
from engram.observability.metrics import EngramMetrics

log = structlog.get_logger("engram.autonomy.catalogue")

SQL = load_queries("engram.autonomy.sql", "retention.sql")
CONSOLIDATION_LOCK = "consolidation"
ADVISOR_LOCK = "advisor"
#: A self-healing or decay run stops starting new batches after this long; the next run
#: goes on where it stopped.
JOB_SLICE_SECONDS = 300.0


def _summary(report: ConsolidationReport | None) -> dict[str, Any]:
    """A pass's job summary (None: no pass was due)."""
    if report is None:
        return {
            "levels": [],
            "candidates": 0,
            "batches": 0,
            "failed_batches": 0,
            "failed_levels": [],
            "consumed": 0,
            "skipped": {},
        }
    return {
        "levels": [level.value for level in report.levels],
        "candidates": report.candidates,
        "batches": len(report.batches),
        "failed_batches": report.failed_batches,
        "failed_levels": [level.value for level in report.failed_levels],
        "consumed": len(report.consumed),
        "skipped": dict(report.skipped),
    }


@dataclass
class _Bodies:
    """The work of each standard job, over the kernel's parts."""

    settings: EngramSettings
    db: DatabaseAdapter
    gate: LibrarianGate
    consolidation: ConsolidationEngine
    temporal: TemporalEngine
    embedding_ping: Callable[[], Awaitable[None]]
    metrics: EngramMetrics
    rescan: PiiRescan
    #: What the last pressure pass of each access level on this kernel saw and took, as
    #: (fast-path records before, records consumed): a level's pass that could take nothing
    #: is not repeated until that level's fast path has grown by a topic's worth of records.
    pressure_seen: dict[AccessLevel, tuple[int, int]] = field(default_factory=dict)
    #: The levels whose batches failed, left out of the event and pressure checks a while.
    held_back: LevelBackoff = field(init=False)

    def __post_init__(self) -> None:
        self.held_back = LevelBackoff(
            base=timedelta(seconds=self.settings.job_backoff_seconds),
            ceiling=timedelta(seconds=self.settings.job_backoff_max_seconds),
        )

    async def _pass(
        self,
        context: JobContext,
        trigger: ConsolidationTrigger,
        levels: tuple[AccessLevel, ...] | None = None,
    ) -> ConsolidationReport:
        """A pass for a job: its failed batches are reported, not raised, unless an operator
        asked for it (whether a job fails, and backs off every level, must not depend on a
        more closed level); the levels they failed at are backed off (ADR-019)."""
        began = time.monotonic()
        report = await self.consolidation.run(trigger, levels=levels, raise_failed=context.manual)
        self.held_back.note(report, _ended(context, began))
        return report

    def consolidate(self, trigger: ConsolidationTrigger) -> JobBody:
        async def run(context: JobContext) -> Mapping[str, Any]:
            swept = await self._sweep()
            return {**_summary(await self._pass(context, trigger)), **swept}

        return run

    async def _sweep(self) -> dict[str, int]:
        """Finish the releases of forgotten or changed sources that their events did not
        (ADR-018), before the pass plans: the sources they give back are then consolidated
        again, without what the agent took back. Returns the releases made and failed for
        the job's summary. A sweep whose look-up fails, for whatever reason, counts as one
        failed release and the pass goes on (it fails by itself when the database is down)."""
        try:
            report = await self.consolidation.sweep_releases()
            released, failed = report.released, report.failed
        except Exception as exc:  # noqa: BLE001 - the pass runs whatever the sweep met
            log.error("consolidation.release_sweep_failed", error=type(exc).__name__)
            released, failed = 0, 1
        self.metrics.releases_swept.labels(outcome="released").inc(released)
        self.metrics.releases_swept.labels(outcome="failed").inc(failed)
        return {"releases_swept": released, "releases_failed": failed}

    async def event_ready(self, context: JobContext) -> str | None:
        awake = self.held_back.awake(AccessLevel, context.now)
        if not awake:
            return None
        watch = self.consolidation.watch
        due = await watch.event_due(await watch.event_marks(context.cursor), awake)
        return None if due is None else due.reason

    async def event_pass(self, context: JobContext) -> Mapping[str, Any]:
        """The levels whose topics grew since their last event-driven pass (an operator's
        run: every level); their marks then move to this run's due time, or to the watch's
        horizon taken before the pass if that is earlier (a write still open then). A level
        backed off (its batches failed) is left out until its back-off ends; its mark stays."""
        trigger = ConsolidationTrigger.EVENT_DRIVEN
        if context.manual:
            return _summary(await self._pass(context, trigger))
        watch = self.consolidation.watch
        marks = await watch.event_marks(context.cursor)
        awake = self.held_back.awake(AccessLevel, context.now)
        due = await watch.event_due(marks, awake) if awake else None
        report = None
        if due is not None:
            # taken before the pass reads: a write still open now may commit after that read
            # with an earlier ingestion time; the marks stop short of it (and of the future)
            horizon = await watch.horizon()
            report = await self._pass(context, trigger, due.levels)
            # a level whose batch failed, or that ran out of time, stays due: its next check
            # runs it again
            done = [level for level in due.levels if level not in report.unfinished_levels]
            marks.update(dict.fromkeys(done, min(context.due, horizon)))
        await watch.set_event_marks(marks)
        return _summary(report)

    async def _pressing(
        self, now: datetime
    ) -> tuple[dict[AccessLevel, int], tuple[AccessLevel, ...]]:
        """Fast-path counts per level, and the levels over the limit that a pass may relieve
        (none backed off at ``now``)."""
        watch = self.consolidation.watch
        fast = await watch.fast_path()  # counted once per check
        due = watch.pressure_of(fast)
        if due is None:
            return fast, ()
        pressing = []
        for level in self.held_back.awake(due.levels, now):
            before, consumed = self.pressure_seen.get(level, (0, -1))
            if consumed != 0 or fast[level] - before >= watch.event_threshold:
                pressing.append(level)
        return fast, tuple(pressing)

    async def pressure_ready(self, context: JobContext) -> str | None:
        fast, pressing = await self._pressing(context.now)
        due = self.consolidation.watch.pressure_of({level: fast[level] for level in pressing})
        return None if due is None else due.reason

    async def relieve(self, context: JobContext) -> Mapping[str, Any]:
        trigger = ConsolidationTrigger.PRESSURE_DRIVEN
        fast, pressing = await self._pressing(context.now)
        # an operator's run: every level over the limit (the engine's choice)
        chosen = None if context.manual else pressing
        report = await self._pass(context, trigger, chosen)
        for level in report.levels:
            if level in report.unfinished_levels:  # tried again on the next check
                self.pressure_seen.pop(level, None)
            else:
                self.pressure_seen[level] = (fast.get(level, 0), report.consumed_at(level))
        return _summary(report)

    async def train_advisor(self, context: JobContext) -> Mapping[str, Any]:
        run = await train_candidate(self.db, until=context.now - HORIZON)
        if run.model is None:
            return {"skipped": run.reason, "decisions": run.decisions}
        curve = run.model.metrics.get("reward_curve") or [0.0]
        return {
            "candidate": run.model.version,
            "decisions": run.decisions,
            "reward_before": curve[0],
            "reward_after": curve[-1],
        }

    async def feedback_ready(self, context: JobContext) -> str | None:
        wanted = self.settings.advisor_train_feedback
        # since the newest model or this trigger's last run, whichever is later: a run that
        # stored nothing (too few decisions) is not repeated until enough new feedback came
        given = await ModelStore(self.db).feedback_since_training(context.cursor, wanted)
        return f"{given} feedback rows since the last training" if given >= wanted else None

    async def reembed(self, context: JobContext) -> Mapping[str, Any]:
        del context
        try:
            await self.embedding_ping()
        except Exception as exc:  # noqa: BLE001 - a model that is down is a reason to wait
            return {"skipped": f"embedding model unavailable ({type(exc).__name__})"}
        totals = {"candidates": 0, "repaired": 0, "still_degraded": 0}
        deadline = time.monotonic() + JOB_SLICE_SECONDS
        while time.monotonic() < deadline:
            report = await reembed_missing(self.gate, self.db)
            for key, value in asdict(report).items():
                totals[key] += value
            if report.repaired == 0 or report.candidates < 100:
                break
        return totals

    async def pii_rescan(self, context: JobContext) -> Mapping[str, Any]:
        del context
        return (await self.rescan.run()).summary()

    async def decay_refresh(self, context: JobContext) -> Mapping[str, Any]:
        read = written = 0
        after = None
        deadline = time.monotonic() + JOB_SLICE_SECONDS
        while time.monotonic() < deadline:
            n, w, after = await self.temporal.refresh_decay(now=context.now, after=after)
            read, written = read + n, written + w
            if after is None:
                break
        backlog = await self.consolidation.watch.backlog()
        self.metrics.consolidation_backlog.set(backlog)
        await self.gate.refresh_record_gauge()
        return {"records": read, "changed": written, "backlog": backlog}

    async def retention(self, context: JobContext) -> Mapping[str, Any]:
        before = context.now - timedelta(days=self.settings.retention_days)
        events = 0
        while True:
            status = await self.db.execute(SQL["prune_outbox"], before, 10_000)
            deleted = int(status.split()[-1])
            events += deleted
            if deleted < 10_000:
                break
        status = await self.db.execute(SQL["prune_escalations"], before)
        runs = await JobBook(self.db).prune(before)
        return {"events": events, "escalations": int(status.split()[-1]), "job_runs": runs}


def _ended(context: JobContext, began: float) -> datetime:
    """When a run that began at ``began`` (monotonic) ends, on the scheduler's clock (which a
    test moves): a back-off counts from the end of the pass, as the scheduler's does."""
    return context.now + timedelta(seconds=time.monotonic() - began)


def standard_jobs(
    settings: EngramSettings,
    *,
    db: DatabaseAdapter,
    gate: LibrarianGate,
    consolidation: ConsolidationEngine,
    temporal: TemporalEngine,
    embedding_ping: Callable[[], Awaitable[None]],
    metrics: EngramMetrics,
    rescan: PiiRescan | None = None,
) -> list[Job]:
    """The jobs every kernel registers (see the module docstring)."""
    work = _Bodies(
        settings,
        db,
        gate,
        consolidation,
        temporal,
        embedding_ping,
        metrics,
        rescan or PiiRescan(gate, db, metrics, release=consolidation.release),
    )
    metrics.fast_path_limit.set(consolidation.watch.fast_path_limit)
    watch_every = Every(timedelta(seconds=settings.consolidation_watch_seconds))
    minutes = timedelta(minutes=1)
    return [
        Job(
            "consolidation_deep",
            Daily(settings.consolidation_hour),
            work.consolidate(ConsolidationTrigger.SCHEDULED_DEEP),
            "full consolidation pass over the fast path",
            lock=CONSOLIDATION_LOCK,
        ),
        Job(
            "consolidation_light",
            Every(minutes * settings.consolidation_light_minutes),
            work.consolidate(ConsolidationTrigger.SCHEDULED_LIGHT),
            "consolidation pass over recently ingested records",
            lock=CONSOLIDATION_LOCK,
        ),
        Job(
            "consolidation_event",
            watch_every,
            work.event_pass,
            "consolidation pass when a topic has grown past the threshold",
            ready=work.event_ready,
            lock=CONSOLIDATION_LOCK,
        ),
        Job(
            "consolidation_pressure",
            watch_every,
            work.relieve,
            "consolidation pass when the fast path is over its limit",
            ready=work.pressure_ready,
            lock=CONSOLIDATION_LOCK,
        ),
        Job(
            "reembed",
            Every(minutes * settings.reembed_minutes),
            work.reembed,
            "embed records stored without an embedding (self-healing)",
        ),
        Job(
            "pii_rescan",
            Every(minutes * settings.pii_rescan_minutes),
            work.pii_rescan,
            "rescan records another PII detector version screened (self-healing)",
        ),
        Job(
            "decay_refresh",
            Every(minutes * settings.decay_refresh_minutes),
            work.decay_refresh,
            "recompute decay scores and the consolidation backlog",
        ),
        Job(
            "retention",
            Daily(4, 30),
            work.retention,
            "delete delivered events, closed escalations and job runs past retention",
        ),
        Job(
            "advisor_train",
            Daily(settings.consolidation_hour, 30),
            work.train_advisor,
            "train a candidate advisor on the logged decisions and their feedback",
            lock=ADVISOR_LOCK,
        ),
        Job(
            "advisor_train_pressure",
            Every(minutes * 5),
            work.train_advisor,
            "train a candidate advisor once enough new feedback has arrived",
            ready=work.feedback_ready,
            lock=ADVISOR_LOCK,
        ),
    ]
