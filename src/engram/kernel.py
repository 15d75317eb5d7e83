"""The composition root: :func:`open_kernel` wires adapters and subsystems into a :class:`Kernel`.

This is the only module that imports concrete infrastructure (asyncpg pool, embedded server,
fastembed workers, alembic runner); everything else receives Protocols.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import structlog

from engram.agents.registry import AgentRegistry
from engram.autonomy.catalogue import standard_jobs
from engram.autonomy.scheduler import Scheduler, SchedulerSettings
from engram.config import EMBEDDING_DIMENSION, EngramSettings
from engram.errors import EngramError
from engram.infra import migrate
from engram.infra.db import DatabaseAdapter
from engram.infra.embedded_server import make_private
from engram.infra.embedding_batcher import BatchingEmbedder
from engram.infra.embeddings import EmbeddingAdapter, NoModel
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.infra.inprocess_embedder import InProcessEmbedder
from engram.infra.llm import OpenAICompatibleGenerator
from engram.infra.local_model import LocalModel
from engram.infra.model_files import ensure_default_model
from engram.infra.outbox import OutboxEventBus
from engram.infra.postgres import PostgresDatabase
from engram.infra.webhook import WebhookSink
from engram.memory.admin.quarantine import QuarantineDesk
from engram.memory.admin.replay import AuditReplayer
from engram.memory.audit.log import AuditLog
from engram.memory.audit.state import AuditState
from engram.memory.conflict.detection import ConflictDetector
from engram.memory.consolidation import (
    CheckedSummarizer,
    ConsolidationEngine,
    ConsolidationSettings,
    ExtractiveSummarizer,
    Summarizer,
)
from engram.memory.gate.advisor import HeuristicAdvisor
from engram.memory.gate.librarian import LibrarianGate
from engram.memory.gate.managed import ManagedAdvisor, configured_advisor
from engram.memory.gate.probe import probe_audit_write, probe_gate
from engram.memory.gate.rate_limit import SharedRateLimiter
from engram.memory.gate.reopen import LEVEL_CHANGED
from engram.memory.gate.resolution import CONFLICTS_FOUND
from engram.memory.rl.models import ModelStore
from engram.memory.temporal.engine import TemporalEngine
from engram.memory.temporal.reads import ReadRecorder
from engram.memory.types import AccessLevel
from engram.notifications.dispatcher import (
    ESCALATED_EVENTS,
    AdminQueue,
    LogSink,
    NotificationDispatcher,
    NotificationSink,
)
from engram.notifications.relay import WebhookRelay
from engram.observability.health import HealthChecks
from engram.observability.metrics import EngramMetrics
from engram.provision import check_schema, connect_database, database_urls, schema_revision
from engram.retrieval.search import Retrieval

log = structlog.get_logger("engram.kernel")

#: How long the gauges read from the database on a scrape stay fresh.
GAUGE_REFRESH_SECONDS = 15.0


@dataclass
class StartupTimings:
    """How long each step of :func:`open_kernel` took, in seconds."""

    embedded_server: float = 0.0
    migrations: float = 0.0
    embeddings: float = 0.0
    database_pool: float = 0.0
    total: float = 0.0
    first_embedding_ms: float | None = None


@dataclass
class Kernel:
    """A running engram kernel; subsystems are attributes."""

    settings: EngramSettings
    db: DatabaseAdapter
    embeddings: EmbeddingAdapter
    metrics: EngramMetrics
    health: HealthChecks
    gate: LibrarianGate
    temporal: TemporalEngine
    audit: AuditLog
    events: OutboxEventBus
    conflicts: ConflictDetector
    notifications: NotificationDispatcher
    admin_queue: AdminQueue
    #: Sends escalations to ``ENGRAM_WEBHOOK_URL`` (None without one); started when ready.
    webhook_relay: WebhookRelay | None
    retrieval: Retrieval
    quarantine: QuarantineDesk
    agents: AgentRegistry
    #: Admin tools: reads that count for no decay, audit replay and audit state (ADR-014).
    admin_temporal: TemporalEngine
    replay: AuditReplayer
    audit_state: AuditState
    consolidation: ConsolidationEngine
    #: Trained advisor policies (ADR-020): `engram advisor …` and the managed advisor read them.
    advisor_models: ModelStore
    #: The background jobs; started by `engram serve` (ENGRAM_SCHEDULER) and `engram worker`.
    scheduler: Scheduler
    embedded: bool
    head_revision: str
    timings: StartupTimings = field(default_factory=StartupTimings)
    _gauges_at: float = field(default=float("-inf"), repr=False)

    async def schema_revision(self) -> str | None:
        """The migration revision the database is at (``None`` before the first one)."""
        return await schema_revision(self.db)

    async def refresh_gauges(self) -> None:
        """Read the database-wide gauges (records by type and path, fast-path records by level,
        the consolidation backlog)
        afresh, at most every :data:`GAUGE_REFRESH_SECONDS`: every kernel on one database then
        exports the same counts, whichever of them wrote or consolidated (called on each
        scrape of ``/metrics``)."""
        now = time.monotonic()
        if now - self._gauges_at < GAUGE_REFRESH_SECONDS:
            return
        self._gauges_at = now
        await self.gate.refresh_record_gauge()
        watch = self.consolidation.watch
        self.metrics.consolidation_backlog.set(await watch.backlog())
        fast = await watch.fast_path()
        for level in AccessLevel:
            self.metrics.fast_path_records.labels(access_level=level.value).set(fast.get(level, 0))

    async def check_migrations(self) -> None:
        """Raise :class:`MigrationError` unless the schema is at the code's head revision."""
        await check_schema(self.db, self.head_revision)


@asynccontextmanager
async def open_kernel(
    database_url: str | None = None,
    *,
    data_dir: Path | str | None = None,
    settings: EngramSettings | None = None,
    embeddings: EmbeddingAdapter | None = None,
    metrics: EngramMetrics | None = None,
    model: bool = True,
) -> AsyncIterator[Kernel]:
    """Start (or attach to) the database, migrate it, load the model and yield a kernel.

    Without a database URL (argument or ``ENGRAM_DATABASE_URL``) a private PostgreSQL is
    started in the data dir and stopped on exit. ``embeddings`` lets several kernels share
    one loaded model (tests do); a kernel closes only the adapters it created.

    ``model=False`` opens a kernel for reading and administering what is stored: no model
    worker, no migrations (the schema must already be at the code's head), no warm-up; any
    use of the model raises :class:`~engram.errors.EmbeddingError` saying so.
    """
    settings = settings or EngramSettings()
    overrides: dict[str, object] = {}
    if not model:
        overrides["migrate_on_start"] = False
        embeddings = embeddings or NoModel(EMBEDDING_DIMENSION, settings.embedding_model_name)
    if database_url is not None:
        overrides["database_url"] = database_url
    if data_dir is not None:
        overrides["data_dir"] = Path(data_dir).expanduser()  # noqa: ASYNC240 - no I/O, a string op
    if overrides:
        settings = settings.model_copy(update=overrides)

    timings = StartupTimings()
    started = time.perf_counter()
    async with AsyncExitStack() as stack:
        step = time.perf_counter()
        runtime_url, migration_url = await database_urls(settings, stack)
        if settings.embedded:
            timings.embedded_server = time.perf_counter() - step

        async def run_migrations() -> None:
            if migration_url is None or not settings.migrate_on_start:
                return
            step = time.perf_counter()
            await asyncio.to_thread(migrate.upgrade, migration_url)
            timings.migrations = time.perf_counter() - step

        async def load_embeddings() -> EmbeddingAdapter:
            if embeddings is not None:
                return embeddings
            step = time.perf_counter()
            embedder = await _start_embedder(settings)
            stack.push_async_callback(embedder.close)
            timings.embeddings = time.perf_counter() - step
            timings.first_embedding_ms = embedder.first_embedding_ms
            return embedder

        # Migrating and loading the model are independent; do them side by side.
        _, embedder = await asyncio.gather(run_migrations(), load_embeddings())

        step = time.perf_counter()
        db = await connect_database(settings, runtime_url, stack)
        timings.database_pool = time.perf_counter() - step

        kernel = _assemble(
            settings,
            db=db,
            embedder=embedder,
            metrics=metrics or EngramMetrics(),
            stack=stack,
            timings=timings,
        )
        if not model:
            await kernel.check_migrations()  # no migrating here: say what to run instead
            yield kernel
            return
        await _make_ready(kernel)
        timings.total = time.perf_counter() - started
        log.info(
            "kernel.opened",
            embedded=settings.embedded,
            schema=kernel.head_revision,
            startup_ms=round(timings.total * 1000),
            embedded_server_ms=round(timings.embedded_server * 1000),
            migrations_ms=round(timings.migrations * 1000),
            embeddings_ms=round(timings.embeddings * 1000),
            first_embedding_ms=(
                None if timings.first_embedding_ms is None else round(timings.first_embedding_ms)
            ),
            database_pool_ms=round(timings.database_pool * 1000),
        )
        yield kernel
        log.info("kernel.closing")


def _assemble(
    settings: EngramSettings,
    *,
    db: PostgresDatabase,
    embedder: EmbeddingAdapter,
    metrics: EngramMetrics,
    stack: AsyncExitStack,
    timings: StartupTimings,
) -> Kernel:
    """Wire the subsystems on top of the open adapters; closers go on ``stack``."""
    batched = BatchingEmbedder(
        embedder,
        max_batch=settings.embedding_batch_size,
        max_in_flight=max(1, settings.embedding_workers),
    )
    stack.push_async_callback(batched.close)
    metrics.watch(pool=db, breaker=db.breaker, embeddings=batched)  # read on each scrape
    events = OutboxEventBus(
        db,
        max_attempts=settings.outbox_max_attempts,
        retry_seconds=settings.outbox_retry_seconds,
        on_abandoned=lambda name: metrics.outbox_abandoned.labels(event=name).inc(),
    )
    stack.push_async_callback(events.close)
    audit = AuditLog(
        db,
        checkpoint_every=settings.audit_checkpoint_every,
        checkpoint_seconds=settings.audit_checkpoint_seconds,
    )
    stack.push_async_callback(audit.drain)  # before the pool closes: a seal may be running
    conflicts = ConflictDetector(embeddings=batched)
    reads = ReadRecorder(db)
    stack.push_async_callback(reads.close)
    advisor_models = ModelStore(db)
    advisor = configured_advisor(settings, HeuristicAdvisor(conflicts), advisor_models, metrics)
    if isinstance(advisor, ManagedAdvisor):
        stack.push_async_callback(advisor.close)
    gate = LibrarianGate(
        db=db,
        embeddings=batched,
        advisor=advisor,
        audit=audit,
        events=events,
        metrics=metrics,
        limiter=SharedRateLimiter(db),
    )
    relay: WebhookRelay | None = None
    if settings.webhook_url is not None:
        # Sent by a relay of its own, outside the outbox; its backoff replaces the pause
        # the sink keeps when the outbox calls it (migration 0021).
        url = settings.webhook_url.get_secret_value()
        relay = WebhookRelay(db, WebhookSink(url, pause_seconds=0.0))
        stack.push_async_callback(relay.close)  # before the pool closes: it may be sending
    admin_queue = AdminQueue(db, webhook=None if relay is None else relay.wake)
    sinks: list[NotificationSink] = [LogSink(), admin_queue]
    notifications = NotificationDispatcher(sinks)
    for name in ESCALATED_EVENTS:
        events.subscribe(name, notifications.handle)
    events.subscribe(CONFLICTS_FOUND, gate.resolve_conflicts)
    events.subscribe(LEVEL_CHANGED, gate.reopen_raised)
    temporal = TemporalEngine(db, reads=reads, metrics=metrics)
    admin_temporal = TemporalEngine(db)  # no read recorder: admin reads are not uses
    consolidation = ConsolidationEngine(
        db=db,
        gate=gate,
        events=events,
        metrics=metrics,
        summarizer=_summarizer(settings),
        settings=ConsolidationSettings(
            batch_size=settings.consolidation_batch_size,
            max_candidates=settings.consolidation_max_candidates,
            light_window=timedelta(hours=settings.consolidation_light_window_hours),
            event_threshold=settings.consolidation_event_threshold,
            fast_path_limit=settings.fast_path_limit,
            decay_threshold=settings.consolidation_decay_threshold,
            max_seconds=settings.consolidation_max_seconds,
        ),
    )
    # A source an agent forgets or changes takes its summaries back with it (ADR-018).
    for name in ("memory.forgotten", "memory.updated"):
        events.subscribe(name, consolidation.on_source_changed)
    jobs = standard_jobs(
        settings,
        db=db,
        gate=gate,
        consolidation=consolidation,
        temporal=temporal,
        embedding_ping=embedder.ping,
        metrics=metrics,
    )
    scheduler = Scheduler(
        db,
        jobs,
        metrics=metrics,
        settings=SchedulerSettings(
            poll_seconds=settings.scheduler_poll_seconds,
            backoff_base=timedelta(seconds=settings.job_backoff_seconds),
            backoff_ceiling=timedelta(seconds=settings.job_backoff_max_seconds),
        ),
    )
    stack.push_async_callback(scheduler.stop)  # before the pool closes: jobs may be running
    return Kernel(
        settings=settings,
        db=db,
        embeddings=batched,
        metrics=metrics,
        health=HealthChecks(),
        gate=gate,
        temporal=temporal,
        audit=audit,
        events=events,
        conflicts=conflicts,
        notifications=notifications,
        admin_queue=admin_queue,
        webhook_relay=relay,
        retrieval=Retrieval(db, batched, temporal, metrics=metrics),
        quarantine=QuarantineDesk(db, audit),
        agents=AgentRegistry(db),
        admin_temporal=admin_temporal,
        replay=AuditReplayer(db, audit=audit, embeddings=batched, resolver=conflicts),
        audit_state=AuditState(db, reader=admin_temporal),
        consolidation=consolidation,
        advisor_models=advisor_models,
        scheduler=scheduler,
        embedded=settings.embedded,
        head_revision=migrate.head_revision(),
        timings=timings,
    )


async def _make_ready(kernel: Kernel) -> None:
    """Readiness checks, and on a current schema: gauges, outbox, advisor and a warm-up."""
    db = kernel.db
    schema_current = await _schema_current(kernel)
    if schema_current:
        await _start_deliveries(kernel)
    kernel.health.add("database", db.ping, timeout_seconds=5.0)
    kernel.health.add(
        "migrations", _migrations_check(kernel, started=schema_current), timeout_seconds=5.0
    )
    kernel.health.add("embedding_model", kernel.embeddings.ping, timeout_seconds=2.0)
    _add_spec_checks(kernel)
    if not schema_current:
        return
    if isinstance(kernel.gate.advisor, ManagedAdvisor):
        await kernel.gate.advisor.look()
    # Warm up what the 200 ms Gate check is not about: the first decision builds its rules
    # and prepares a cold statement, and concurrent checks open pool connections.
    await probe_gate(db, kernel.gate.advisor)
    await asyncio.gather(*(db.ping() for _ in range(4)))


def _add_spec_checks(kernel: Kernel) -> None:
    """The specification's readiness checks (§8) beside database, migrations and model."""
    gate, db, watch = kernel.gate, kernel.db, kernel.consolidation.watch

    async def backlog() -> None:
        owed = await watch.backlog()
        kernel.metrics.consolidation_backlog.set(owed)
        if owed >= 2 * watch.fast_path_limit:
            raise RuntimeError(
                f"{owed} fast-path records decayed below {watch.decay_threshold:g} await "
                f"consolidation; the limit is 2 x {watch.fast_path_limit}"
            )

    limiter = gate.limiter if isinstance(gate.limiter, SharedRateLimiter) else None
    cache = kernel.settings.readiness_cache_seconds
    checks: list[tuple[str, Callable[[], Awaitable[None]], float]] = [
        ("gate", lambda: probe_gate(db, gate.advisor, limiter), 0.2),
        ("audit_log", lambda: probe_audit_write(db, kernel.audit), 1.0),
        ("consolidation_backlog", backlog, 5.0),
    ]
    for name, check, timeout in checks:
        kernel.health.add(name, check, timeout_seconds=timeout, cache_seconds=cache)


def _summarizer(settings: EngramSettings) -> Summarizer:
    """The extractive summariser, or an LLM checked against it when one is configured."""
    extractive = ExtractiveSummarizer()
    if settings.summarizer_url is None:
        return extractive
    key = settings.summarizer_api_key
    generator = OpenAICompatibleGenerator(
        settings.summarizer_url.get_secret_value(),
        model=settings.summarizer_model,
        api_key=None if key is None else key.get_secret_value(),
        timeout_seconds=settings.summarizer_timeout_seconds,
    )
    return CheckedSummarizer(generator, extractive)


async def _start_deliveries(kernel: Kernel) -> None:
    """On a current schema: the record gauge, what a previous run left in the outbox (it is
    delivered) and the webhook relay; each step may run twice."""
    await kernel.gate.refresh_record_gauge()
    await kernel.events.resume()
    if kernel.webhook_relay is not None:
        kernel.webhook_relay.start()


def _migrations_check(kernel: Kernel, *, started: bool) -> Callable[[], Awaitable[None]]:
    """The schema's readiness check. A kernel opened on a schema behind head starts no
    delivery; the first check that finds it current (``engram migrate`` ran meanwhile)
    starts them, where only a restart did (hostile pass AI)."""
    pending = not started

    async def check() -> None:
        nonlocal pending
        await kernel.check_migrations()
        if pending:
            await _start_deliveries(kernel)
            pending = False
            log.info("kernel.schema_now_current", revision=kernel.head_revision)

    return check


async def _schema_current(kernel: Kernel) -> bool:
    try:
        await kernel.check_migrations()
    except EngramError:
        log.warning("kernel.schema_not_current", expected=kernel.head_revision)
        return False
    return True


async def _start_embedder(settings: EngramSettings) -> LocalModel:
    if settings.embedding_model_path is None:
        make_private(settings.data_dir)
        await asyncio.to_thread(ensure_default_model, settings.model_dir)
    common: dict[str, Any] = {
        "model_name": settings.embedding_model_name,
        "pooling": settings.embedding_pooling,
        "dimension": EMBEDDING_DIMENSION,
        "threads": settings.embedding_threads,
        "spin": settings.embedding_spin,
        "timeout_seconds": settings.embedding_timeout_seconds,
    }
    embedder: LocalModel
    if settings.embedding_workers == 0:
        embedder = InProcessEmbedder(settings.model_dir, **common)
    else:
        embedder = FastembedEmbedder(
            settings.model_dir, workers=settings.embedding_workers, **common
        )
    try:
        await embedder.start()
    except BaseException:
        await embedder.close()
        raise
    return embedder
