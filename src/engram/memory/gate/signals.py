"""Signals of the Gate: the specification's metrics and the ``gate.*`` log events.

Log lines carry identifiers and outcomes only; the caller is redacted for records above the
agent access level.
"""

from __future__ import annotations

import time
from dataclasses import replace
from uuid import UUID

import structlog

from engram.memory.gate.advisor import AdvisorDecision
from engram.memory.gate.checks import CheckResult, Layer1Outcome
from engram.memory.gate.plan import Plan, Timing
from engram.memory.gate.requests import (
    GateRequest,
    GateResult,
    GateTimings,
    Proposal,
    WriteOutcome,
)
from engram.memory.types import AccessLevel, GateDecisionType
from engram.observability.metrics import CONSOLIDATION_PATHS, MEMORY_TYPES, EngramMetrics

log = structlog.get_logger("engram.memory.gate.librarian")


class GateSignals:
    """Records one evaluation in the metrics and the log."""

    def __init__(self, metrics: EngramMetrics) -> None:
        self._metrics = metrics

    def records(self, counts: list[tuple[str, str, int]]) -> None:
        """Set ``engram_memory_records`` to these head counts (absent pairs: zero)."""
        gauge = self._metrics.memory_records
        seen = set()
        for memory_type, path, n in counts:
            gauge.labels(type=memory_type, consolidation_path=path).set(n)
            seen.add((memory_type, path))
        for memory_type in MEMORY_TYPES:
            for path in CONSOLIDATION_PATHS:
                if (memory_type, path) not in seen:
                    gauge.labels(type=memory_type, consolidation_path=path).set(0)

    def write(
        self,
        request: GateRequest,
        result: GateResult,
        plan: Plan,
        evaluation_seconds: float,
        timing: Timing,
    ) -> GateResult:
        origin = request.decision_type.value
        metrics = self._metrics
        metrics.gate_evaluation_seconds.labels(decision_type=origin).observe(evaluation_seconds)
        metrics.write_seconds.labels(decision_type=origin).observe(
            time.perf_counter() - timing.started
        )
        if plan.layer1.pii_kinds:
            metrics.pii_flags.labels(detector="regex").inc()
        if plan.layer1.pii_error:
            metrics.gate_layer1_failures.labels(check="pii").inc()
        if plan.advice is not None and request.decision_type is not GateDecisionType.SELF_HEALING:
            for conflict in plan.advice.conflicts:
                metrics.conflicts_detected.labels(
                    classification=conflict.classification.value
                ).inc()
        record = result.modified_record
        if record is not None and result.outcome in (WriteOutcome.CREATED, WriteOutcome.UPDATED):
            metrics.version_chain_depth.observe(record.version)
        if record is not None and result.outcome in (WriteOutcome.CREATED, WriteOutcome.FORGOTTEN):
            delta = 1 if result.outcome is WriteOutcome.CREATED else -1
            metrics.memory_records.labels(
                type=record.type.value, consolidation_path=record.consolidation_path.value
            ).inc(delta)
        return self.decision(request, result, timing, evaluation_seconds=evaluation_seconds)

    def rejected(self, failures: list[CheckResult]) -> None:
        """Count each failed Layer 1 check of a rejected request."""
        for check in failures:
            self._metrics.gate_layer1_failures.labels(check=check.name).inc()

    def decision(
        self,
        request: Proposal,
        result: GateResult,
        timing: Timing,
        *,
        evaluation_seconds: float | None = None,
    ) -> GateResult:
        origin = request.decision_type.value
        self._metrics.gate_decisions.labels(
            decision=result.decision.value, decision_type=origin
        ).inc()
        if evaluation_seconds is None:
            evaluation_seconds = (
                time.perf_counter() - timing.started - timing.waited_for_embedding_seconds
            )
            self._metrics.gate_evaluation_seconds.labels(decision_type=origin).observe(
                evaluation_seconds
            )
        level = (
            result.modified_record.access_level
            if result.modified_record is not None
            else request.access_level
        )
        log.info(
            "gate.evaluate",
            decision_id=str(result.decision_id),
            decision_type=origin,
            action=request.action.value,
            memory_type=request.memory_type,
            decision=result.decision.value,
            outcome=result.outcome.value,
            duration_ms=round((time.perf_counter() - timing.started) * 1000, 3),
            caller=(
                request.caller_identity.agent_id
                if AccessLevel.AGENT.allows(level)
                else "[redacted]"
            ),
        )
        total = time.perf_counter() - timing.started
        timings = GateTimings(
            embedding_ms=round(timing.embedding_run_seconds * 1000, 3),
            evaluation_ms=round(evaluation_seconds * 1000, 3),
            total_ms=round(total * 1000, 3),
        )
        return replace(result, timings=timings)

    def layer1(self, decision_id: UUID, request: GateRequest, layer1: Layer1Outcome) -> None:
        log.debug(
            "gate.layer1",
            decision_id=str(decision_id),
            decision_type=request.decision_type.value,
            action=request.action.value,
            passed=layer1.passed,
            failed=[c.name for c in layer1.failures],
            quarantined=bool(layer1.pii_kinds),
        )

    def layer2(self, decision_id: UUID, advice: AdvisorDecision | None) -> None:
        if advice is None:
            return
        log.debug(
            "gate.layer2",
            decision_id=str(decision_id),
            advice=advice.action.value,
            source=advice.source,
            conflicts=len(advice.conflicts),
            importance=advice.importance,
        )
