"""The ten metrics of the specification and engram's own beside them, on an injected registry."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engram.memory.types import (
    AccessLevel,
    ConflictClassification,
    ConsolidationPath,
    ConsolidationTrigger,
    GateDecision,
    GateDecisionType,
    MemoryType,
)
from engram.observability import metrics as m
from engram.observability.metrics import EngramMetrics
from tests.unit.runtime_fakes import FakeBreaker, FakePool, FakeQueue

SPECIFIED = {
    "engram_gate_decisions_total": ("counter", {"decision", "decision_type"}),
    "engram_gate_evaluation_seconds": ("histogram", {"decision_type"}),
    "engram_write_seconds": ("histogram", {"decision_type"}),
    "engram_memory_records": ("gauge", {"type", "consolidation_path"}),
    "engram_version_chain_depth": ("histogram", set()),
    "engram_pii_flags_total": ("counter", {"detector"}),
    "engram_consolidation_duration_seconds": ("histogram", {"trigger"}),
    "engram_conflicts_detected_total": ("counter", {"classification"}),
    "engram_decay_score": ("histogram", {"type"}),
    "engram_gate_layer1_failures_total": ("counter", {"check"}),
}
#: Beside the specification's ten: the background jobs' series (ADR-019).
JOBS = {
    "engram_job_runs_total": ("counter", {"name", "outcome"}),
    "engram_job_duration_seconds": ("histogram", {"name"}),
    "engram_job_start_delay_seconds": ("histogram", {"name"}),
    "engram_job_last_success_timestamp_seconds": ("gauge", set()),
    "engram_consolidation_backlog": ("gauge", set()),
    "engram_fast_path_limit": ("gauge", set()),
    "engram_fast_path_records": ("gauge", {"access_level"}),
    # batches per level: the operator's signal of a failing level (ADR-019)
    "engram_consolidation_batches_total": ("counter", {"trigger", "access_level", "outcome"}),
    # the learned advisor (ADR-020)
    "engram_advisor_fallbacks_total": ("counter", {"reason"}),
    "engram_advisor_shadow_errors_total": ("counter", {"reason"}),
    # work given up on or finished late: the outbox, a consolidation source's release
    "engram_outbox_abandoned_total": ("counter", {"event"}),
    "engram_consolidation_releases_swept_total": ("counter", {"outcome"}),
}
#: Serving and infrastructure: HTTP, search, the embedding queue, the pool, the breakers.
SERVING = {
    "engram_http_requests_total": ("counter", {"route", "method", "status"}),
    "engram_http_request_seconds": ("histogram", {"route", "method"}),
    "engram_search_seconds": ("histogram", {"degraded"}),
    "engram_embedding_batch_size": ("histogram", set()),
    "engram_embedding_queue_depth": ("gauge", set()),
    "engram_db_pool_connections": ("gauge", {"state"}),
    "engram_db_pool_max_connections": ("gauge", set()),
    "engram_db_pool_waiting": ("gauge", set()),
    "engram_db_pool_wait_seconds_total": ("counter", set()),
    "engram_circuit_breaker_state": ("gauge", {"dependency"}),
}
#: What prometheus_client's process and platform collectors add (on Linux).
PROCESS = {
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
    "python_info",
}


def _families(metrics: EngramMetrics) -> dict[str, tuple[str, set[str]]]:
    payload, _ = metrics.exposition()
    found: dict[str, tuple[str, set[str]]] = {}
    for family in text_string_to_metric_families(payload.decode()):
        labels = {
            label for sample in family.samples for label in sample.labels if label not in {"le"}
        }
        name = family.name + "_total" if family.type == "counter" else family.name
        found[name] = (family.type, labels)
    return found


def test_exposition_has_exactly_the_specified_metrics() -> None:
    """Every metric of §8 is exported with its type and labels, the job, serving and
    infrastructure metrics beside them (series pre-set once a scheduler names its jobs and a
    kernel hands over its pool, breaker and queue), the process's own, and nothing else."""
    metrics = EngramMetrics()
    metrics.preset_jobs(("decay_refresh",))
    metrics.http_requests.labels(route="/healthz", method="GET", status="200").inc()
    metrics.http_request_seconds.labels(route="/healthz", method="GET").observe(0.001)
    metrics.watch(pool=FakePool(), breaker=FakeBreaker(), embeddings=FakeQueue())
    found = _families(metrics)
    assert SPECIFIED | JOBS | SERVING == {n: v for n, v in found.items() if n.startswith("engram_")}
    assert PROCESS == {n for n in found if not n.startswith("engram_")}


def test_registries_are_independent() -> None:
    """Two kernels (or two tests) never share counters."""
    first, second = EngramMetrics(), EngramMetrics()
    first.gate_decisions.labels(decision="approved", decision_type="external").inc()
    value = second.gate_decisions.labels(decision="approved", decision_type="external")._value.get()
    assert 0 == value


@pytest.mark.parametrize(
    ("labels", "enum"),
    [
        (m.GATE_DECISIONS, GateDecision),
        (m.DECISION_TYPES, GateDecisionType),
        (m.MEMORY_TYPES, MemoryType),
        (m.CONSOLIDATION_PATHS, ConsolidationPath),
        (m.ACCESS_LEVELS, AccessLevel),
        (m.CONSOLIDATION_TRIGGERS, ConsolidationTrigger),
        (m.CONFLICT_CLASSES, ConflictClassification),
    ],
)
def test_preset_label_values_match_the_enums(labels: tuple[str, ...], enum: type) -> None:
    """Label values pre-set to zero are exactly the values of the matching enum."""
    assert [member.value for member in enum] == list(labels)  # type: ignore[attr-defined]
