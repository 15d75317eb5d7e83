"""Every Prometheus metric of engram, with the names and labels of the specification (§8).

Metrics live on a registry passed in (never the global one), so each kernel, and each test,
has its own. Label values that are known in advance are pre-set to zero, so dashboards and
alerts see a series from the first scrape. Beside the specification's ten: background jobs,
consolidation batches by access level, the advisor, HTTP requests, search, the embedding
queue, the connection pool and circuit breakers (:mod:`engram.observability.runtime`), and
the process itself (CPU, memory, file descriptors).
"""

from __future__ import annotations

from itertools import product

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from engram.observability.runtime import BreakerSource, PoolSource, QueueSource, RuntimeGauges

# The *_created series double the exposition without helping any dashboard or alert.
disable_created_metrics()  # type: ignore[no-untyped-call]

# Label values known in advance. They mirror enums of engram.memory.types (which this layer
# may not import); a unit test keeps the two in step.
GATE_DECISIONS = ("approved", "rejected", "conflict")
DECISION_TYPES = ("external", "consolidation", "self_healing")
MEMORY_TYPES = (
    "belief", "decision", "episode", "skill", "entity", "preference", "reflection", "resource",
)  # fmt: skip
CONSOLIDATION_PATHS = ("fast", "slow")
ACCESS_LEVELS = ("public", "agent", "user", "system", "sensitive")
CONSOLIDATION_TRIGGERS = ("scheduled_deep", "scheduled_light", "event_driven", "pressure_driven")
#: How a consolidation batch that started ended (one skipped whole, or out of time, is neither);
#: ``unplanned`` counts a level whose planning failed in a job's pass.
CONSOLIDATION_BATCH_OUTCOMES = ("committed", "failed", "unplanned")
CONFLICT_CLASSES = ("contradiction", "supersession", "refinement", "unresolvable")
LAYER1_CHECKS = ("schema", "access", "pii", "rate_limit", "classification")
PII_DETECTORS = ("regex", "ner")
JOB_OUTCOMES = ("succeeded", "failed", "abandoned")
SEARCH_DEGRADED = ("false", "true")

_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1.0, 2.5, 5.0)
_SLOW = (1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0)
_DEPTH = (1, 2, 3, 5, 10, 20, 50, 100)
_UNIT = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_BATCH = (1, 2, 4, 8, 16, 32, 64, 128, 256)


#: Why a trained advisor left a decision to the heuristic (ADR-020).
ADVISOR_FALLBACK_REASONS = ("no_model", "error", "model_not_loadable")


class EngramMetrics:
    """The metrics of one kernel, registered on one registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.gate_decisions = Counter(
            "engram_gate_decisions_total",
            "Gate decisions by outcome and origin.",
            ["decision", "decision_type"],
            registry=r,
        )
        self.gate_evaluation_seconds = Histogram(
            "engram_gate_evaluation_seconds",
            "Time the Gate spends deciding (Layer 1 + Layer 2), embedding excluded.",
            ["decision_type"],
            buckets=_FAST,
            registry=r,
        )
        self.write_seconds = Histogram(
            "engram_write_seconds",
            "End-to-end write latency: embed, decide, persist and audit.",
            ["decision_type"],
            buckets=_FAST,
            registry=r,
        )
        self.memory_records = Gauge(
            "engram_memory_records",
            "Current (head, not forgotten) records by type and consolidation path.",
            ["type", "consolidation_path"],
            registry=r,
        )
        self.version_chain_depth = Histogram(
            "engram_version_chain_depth",
            "Number of versions of a record when a new version is written.",
            buckets=_DEPTH,
            registry=r,
        )
        self.pii_flags = Counter(
            "engram_pii_flags_total",
            "Records quarantined by PII screening, by detector.",
            ["detector"],
            registry=r,
        )
        self.consolidation_duration_seconds = Histogram(
            "engram_consolidation_duration_seconds",
            "Duration of consolidation runs by trigger.",
            ["trigger"],
            buckets=_SLOW,
            registry=r,
        )
        self.conflicts_detected = Counter(
            "engram_conflicts_detected_total",
            "Conflicts found between a new record and existing ones, by class.",
            ["classification"],
            registry=r,
        )
        self.decay_score = Histogram(
            "engram_decay_score",
            "Decay (relevance) scores computed, by memory type.",
            ["type"],
            buckets=_UNIT,
            registry=r,
        )
        self.gate_layer1_failures = Counter(
            "engram_gate_layer1_failures_total",
            "Layer 1 checks that failed, by check.",
            ["check"],
            registry=r,
        )
        # Beyond the specification's ten: the background jobs (engram.autonomy). Their label
        # is ``name``: Prometheus sets ``job`` on every series to the scrape job's name.
        self.job_runs = Counter(
            "engram_job_runs_total",
            "Background job runs by job name and outcome (abandoned: its kernel died mid-run).",
            ["name", "outcome"],
            registry=r,
        )
        self.job_duration_seconds = Histogram(
            "engram_job_duration_seconds",
            "Duration of background job runs.",
            ["name"],
            buckets=(0.01, 0.05, 0.1, 0.5, *_SLOW),
            registry=r,
        )
        self.job_start_delay_seconds = Histogram(
            "engram_job_start_delay_seconds",
            "Time from a job's due time to its start, on the kernel that ran it.",
            ["name"],
            buckets=(0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
            registry=r,
        )
        self.job_last_success = Gauge(
            "engram_job_last_success_timestamp_seconds",
            "Unix time of the job's last successful run on this kernel.",
            ["name"],
            registry=r,
        )
        # The learned advisor (ADR-020).
        self.advisor_fallbacks = Counter(
            "engram_advisor_fallbacks_total",
            "Decisions a trained advisor left to the heuristic (no_model, error), and model rows "
            "that could not be loaded (model_not_loadable).",
            ["reason"],
            registry=r,
        )
        self.advisor_shadow_errors = Counter(
            "engram_advisor_shadow_errors_total",
            "Errors of the shadow advisor (recorded in the audit row, never acted on).",
            ["reason"],
            registry=r,
        )
        self.consolidation_backlog = Gauge(
            "engram_consolidation_backlog",
            "Active fast-path records whose decay score fell below the threshold (what "
            "consolidation owes).",
            registry=r,
        )
        self.fast_path_limit = Gauge(
            "engram_fast_path_limit",
            "The configured fast-path limit (ENGRAM_FAST_PATH_LIMIT), for alert expressions.",
            registry=r,
        )
        self.fast_path_records = Gauge(
            "engram_fast_path_records",
            "Active fast-path records by access level: the pressure trigger compares each "
            "level with the fast-path limit.",
            ["access_level"],
            registry=r,
        )
        # Consolidation batches by level: the operator's signal of a level whose batches fail
        # (a job's pass no longer fails for them, ADR-019). Level names are no content, and
        # /metrics answers only callers who may read every level (ADR-022).
        self.consolidation_batches = Counter(
            "engram_consolidation_batches_total",
            "Consolidation batches that committed or failed, and levels whose planning failed "
            "(unplanned), by trigger and access level.",
            ["trigger", "access_level", "outcome"],
            registry=r,
        )
        # Work given up on or finished late (ADR-018): an outbox event whose subscriber kept
        # failing, and a release of a consolidation source that its event did not finish.
        self.outbox_abandoned = Counter(
            "engram_outbox_abandoned_total",
            "Outbox events given up on after ENGRAM_OUTBOX_MAX_ATTEMPTS deliveries, by event.",
            ["event"],
            registry=r,
        )
        self.releases_swept = Counter(
            "engram_consolidation_releases_swept_total",
            "Releases of a forgotten or changed consolidation source found undone by a "
            "scheduled pass's sweep: released, or failed (the summary still states the source).",
            ["outcome"],
            registry=r,
        )
        # Serving: requests by route template (never the raw path, whose ids would make a
        # series per record), searches, and the batches the embedding queue sends.
        self.http_requests = Counter(
            "engram_http_requests_total",
            "HTTP requests answered, by route template, method and status code.",
            ["route", "method", "status"],
            registry=r,
        )
        self.http_request_seconds = Histogram(
            "engram_http_request_seconds",
            "Time from a request's arrival to the end of its response, by route template.",
            ["route", "method"],
            buckets=_FAST,
            registry=r,
        )
        self.search_seconds = Histogram(
            "engram_search_seconds",
            "Search latency (embedding the query, the legs, ordering and resolving the hits); "
            "degraded: the text leg answered alone.",
            ["degraded"],
            buckets=_FAST,
            registry=r,
        )
        self.embedding_batch_size = Histogram(
            "engram_embedding_batch_size",
            "Texts per batch the embedding queue sends to the model.",
            buckets=_BATCH,
            registry=r,
        )
        self.runtime = RuntimeGauges()
        r.register(self.runtime)
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        self._preset()
        self._preset_late_work()

    def watch(self, *, pool: PoolSource, breaker: BreakerSource, embeddings: QueueSource) -> None:
        """Export the state of the kernel's pool, circuit breaker and embedding queue (read on
        each scrape), and count the queue's batches as they are sent."""
        self.runtime.watch(pool=pool, breakers=(breaker,), queue=embeddings)
        embeddings.on_batch(self.embedding_batch_size.observe)

    def preset_jobs(self, names: tuple[str, ...]) -> None:
        """Pre-set the job series of the given jobs (the scheduler knows them)."""
        for name in names:
            for outcome in JOB_OUTCOMES:
                self.job_runs.labels(name=name, outcome=outcome)
            self.job_duration_seconds.labels(name=name)
            self.job_start_delay_seconds.labels(name=name)

    def _preset(self) -> None:
        for decision, origin in product(GATE_DECISIONS, DECISION_TYPES):
            self.gate_decisions.labels(decision=decision, decision_type=origin)
        for origin in DECISION_TYPES:
            self.gate_evaluation_seconds.labels(decision_type=origin)
            self.write_seconds.labels(decision_type=origin)
        for memory_type, path in product(MEMORY_TYPES, CONSOLIDATION_PATHS):
            self.memory_records.labels(type=memory_type, consolidation_path=path)
        for level in ACCESS_LEVELS:
            self.fast_path_records.labels(access_level=level)
        for memory_type in MEMORY_TYPES:
            self.decay_score.labels(type=memory_type)
        for detector in PII_DETECTORS:
            self.pii_flags.labels(detector=detector)
        for trigger in CONSOLIDATION_TRIGGERS:
            self.consolidation_duration_seconds.labels(trigger=trigger)
        for trigger, level, outcome in product(
            CONSOLIDATION_TRIGGERS, ACCESS_LEVELS, CONSOLIDATION_BATCH_OUTCOMES
        ):
            self.consolidation_batches.labels(trigger=trigger, access_level=level, outcome=outcome)
        for classification in CONFLICT_CLASSES:
            self.conflicts_detected.labels(classification=classification)
        for check in LAYER1_CHECKS:
            self.gate_layer1_failures.labels(check=check)
        for reason in ADVISOR_FALLBACK_REASONS:
            self.advisor_fallbacks.labels(reason=reason)
        self.advisor_shadow_errors.labels(reason="error")
        for degraded in SEARCH_DEGRADED:
            self.search_seconds.labels(degraded=degraded)

    def _preset_late_work(self) -> None:
        for event in ("memory.forgotten", "memory.updated"):  # the releases' events
            self.outbox_abandoned.labels(event=event)
        for outcome in ("released", "failed"):
            self.releases_swept.labels(outcome=outcome)

    def exposition(self) -> tuple[bytes, str]:
        """The registry in Prometheus text format, with its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
