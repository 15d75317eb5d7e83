"""What the Gate decided before it writes (:class:`Plan`), and what an approval records.

The transactional write path (:mod:`~engram.memory.gate.write_path`) and the one-statement
write (:mod:`~engram.memory.gate.at_once`) both take a :class:`Plan`, stamp the new version
with :func:`stamped` and say the same in the audit row, the event and the result
(:func:`approval_reason`, :func:`approval_entry`, :func:`record_event`,
:func:`approved_result`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from uuid import UUID

from engram.memory.audit.log import AuditEntry, canonical_json
from engram.memory.gate.advisor import AdvisorAction, AdvisorDecision
from engram.memory.gate.checks import CheckResult, Layer1Outcome
from engram.memory.gate.requests import GateRequest, GateResult, Proposal, WriteOutcome, caller_json
from engram.memory.storable import MAX_AUDITED_INPUT_BYTES, audited_input
from engram.memory.types import (
    ConsolidationPath,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
)


@dataclass(frozen=True, slots=True)
class Timing:
    """When an evaluation started, how long it waited for the embedding after its checks
    (``waited_for_embedding_seconds``) and how long computing the embedding took
    (``embedding_run_seconds``; it starts before the checks and overlaps them)."""

    started: float
    waited_for_embedding_seconds: float = 0.0
    embedding_run_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything decided before the transaction starts."""

    request: GateRequest
    layer1: Layer1Outcome
    record: MemoryRecord
    head: MemoryRecord | None
    advice: AdvisorDecision | None
    target: MemoryRecord | None
    embedding: tuple[float, ...]
    evidence: Mapping[UUID, UUID]
    fingerprint: bytes = b""
    embedding_model: str | None = None
    new_version_id: UUID = field(default_factory=uuid.uuid4)
    #: Close neighbours (version id, similarity) that get ``relates_to`` edges (gate.links).
    related: tuple[tuple[UUID, float], ...] = ()

    @property
    def expected_version(self) -> int | None:
        """The version the request expects, in the store's numbering: the caller named the
        head the Gate screened, in its own numbering (``engram.memory.temporal.numbering``),
        and optimistic concurrency holds the write to that stored version."""
        expected = self.request.expected_version
        return expected if expected is None or self.head is None else self.head.version

    @property
    def vector(self) -> list[float] | None:
        """The embedding, or None in degraded mode."""
        return list(self.embedding) if self.embedding else None


def audit_entry(
    request: Proposal,
    *,
    decision_id: UUID,
    decision: GateDecision,
    outcome: WriteOutcome,
    reason: str,
    checks: list[CheckResult],
    advice: AdvisorDecision | None,
    record_id: UUID | None,
    version_id: UUID | None,
    duration_ms: float,
    occurred_at: datetime | None = None,
) -> AuditEntry:
    """The audit row of one evaluation (JSON fields as canonical text); ``occurred_at``
    defaults to now (writes pass the database time they stamped on the version)."""
    return AuditEntry(
        decision_id=decision_id,
        request_id=request.request_id or str(decision_id),
        occurred_at=occurred_at or datetime.now(UTC),
        action=request.action.value,
        decision=decision.value,
        outcome=outcome.value,
        decision_type=request.decision_type.value,
        reason=reason,
        agent_id=request.caller_identity.agent_id,
        caller=canonical_json(caller_json(request.caller_identity)),
        record_id=record_id,
        version_id=version_id,
        input_snapshot=_snapshot(request, decision),
        layer1_checks=canonical_json([check.to_json() for check in checks]),
        layer2_decision=None if advice is None else canonical_json(advice.to_json(audit=True)),
        decision_source=advice.source if advice is not None else "layer1",
        duration_ms=round(duration_ms, 3),
    )


def _snapshot(request: Proposal, decision: GateDecision) -> str:
    """The audited input: whole, except a rejected one beyond ``MAX_AUDITED_INPUT_BYTES``,
    which is kept as an excerpt with its size and SHA-256 (the log is append-only: a refused
    10 MB record must not stay in it forever). Approved input is whole, for replay."""
    snapshot = request.snapshot()
    text = canonical_json(snapshot)
    if not isinstance(request, GateRequest):
        return text  # refused input is bounded already (audited_input)
    if decision is GateDecision.REJECTED and len(text.encode()) > MAX_AUDITED_INPUT_BYTES:
        text = canonical_json({"action": request.action.value, **audited_input(snapshot)})
    return text


def stamped(
    plan: Plan,
    decision_id: UUID,
    *,
    version: int,
    record_id: UUID,
    path: ConsolidationPath | None = None,
) -> MemoryRecord:
    """The new version as stored. A consolidation CREATE starts on the slow path; a new
    version stays on its record's path (``path``); anything else starts on the fast one."""
    if path is None:
        consolidating = plan.request.decision_type is GateDecisionType.CONSOLIDATION
        path = ConsolidationPath.SLOW if consolidating else ConsolidationPath.FAST
    return plan.record.model_copy(
        update={
            "record_id": record_id,
            "version": version,
            "superseded_by": None,
            "gate_decision_id": decision_id,
            "gate_decision_type": plan.request.decision_type,
            "expected_version": plan.expected_version,
            "status": plan.request.status or MemoryStatus.ACTIVE,
            "consolidation_path": path,
            "ingestion_time_end": None,
        }
    )


def next_version(plan: Plan, decision_id: UUID, head: MemoryRecord) -> MemoryRecord:
    """The plan's record stored as the version after ``head`` (its record's live head), on
    its record's path, with the id the plan chose for it.

    A caller's new version that keeps the head's content restates the claim: the event times
    it leaves out are the head's (as Layer 2 reads such a proposal, ``advisor._unchanged``).
    Stored as "now", a change of metadata alone moved the claim's start to the change and
    reopened a validity a newer claim had ended; the resolver then ended older claims again
    at each such change, later each time (seen in a CI run: one record restated ten times).
    Internal writers (self-healing, consolidation) state their event times whole."""
    update: dict[str, object] = {"id": plan.new_version_id}
    record = plan.record
    restated = plan.request.action is GateAction.UPDATE and record.content == head.content
    if plan.request.decision_type is GateDecisionType.EXTERNAL and restated:
        if record.event_time is None:
            update["event_time"] = head.event_time
        ended = head.event_time_end
        # a claim dated at or after its end is stated true again from then: no end to keep
        if record.event_time_end is None and (
            record.event_time is None or ended is None or record.event_time < ended
        ):
            update["event_time_end"] = ended
    following = stamped(
        plan,
        decision_id,
        version=head.version + 1,
        record_id=head.record_id,
        path=head.consolidation_path,
    )
    return following.model_copy(update=update)


def updated_reason(version: int) -> str:
    """How an approved UPDATE's reason begins (the version in the numbering it is told in)."""
    return f"stored as version {version}"


def approval_reason(plan: Plan, outcome: WriteOutcome, record: MemoryRecord) -> str:
    """The reason an approved write gives (the audit row in the stored numbering, the result
    in the caller's: ``engram.memory.gate.replay.as_read_by``)."""
    reason = {
        WriteOutcome.CREATED: "stored as a new record",
        WriteOutcome.UPDATED: updated_reason(record.version),
        WriteOutcome.FORGOTTEN: "forgotten; its history stays readable",
        WriteOutcome.REINFORCED: "already known; the existing record was reinforced",
    }[outcome]
    if plan.advice is not None:
        reason = f"{reason} ({plan.advice.rationale})"
    if plan.layer1.pii_kinds:
        reason += f"; quarantined as sensitive ({', '.join(plan.layer1.pii_kinds)})"
    return reason


def approved_result(
    plan: Plan,
    *,
    decision_id: UUID,
    reason: str,
    outcome: WriteOutcome,
    record: MemoryRecord,
) -> GateResult:
    """What the caller of an approved write gets back."""
    return GateResult(
        decision=GateDecision.APPROVED,
        decision_id=decision_id,
        reason=reason,
        layer1_checks=plan.layer1.checks,
        layer2_decision=plan.advice,
        modified_record=record,
        outcome=outcome,
        record_id=record.record_id,
        version=record.version,
        degraded=(outcome is not WriteOutcome.FORGOTTEN and not plan.embedding),
    )


def created_version(plan: Plan, decision_id: UUID) -> MemoryRecord:
    """A CREATE's first version (a record's first version has the record's id)."""
    first = stamped(plan, decision_id, version=1, record_id=plan.record.record_id)
    return first.model_copy(update={"id": plan.record.id})


def record_event(record: MemoryRecord, plan: Plan, decision_id: UUID) -> dict[str, object]:
    """The payload of ``memory.created``, ``memory.updated`` and ``memory.forgotten``:
    identifiers, never content."""
    return {
        "record_id": str(record.record_id),
        "version_id": str(record.id),
        "version": record.version,
        "type": record.type.value,
        "namespace": record.namespace,
        "access_level": record.access_level.value,
        "decision_id": str(decision_id),
        "decision_type": plan.request.decision_type.value,
        "agent_id": plan.request.caller_identity.agent_id,
    }


def approval_entry(
    plan: Plan,
    *,
    decision_id: UUID,
    timing: Timing,
    outcome: WriteOutcome,
    reason: str,
    record: MemoryRecord,
    occurred_at: datetime | None = None,
) -> AuditEntry:
    """The audit row of an approved write of ``record``; its duration runs until now."""
    return audit_entry(
        plan.request,
        decision_id=decision_id,
        decision=GateDecision.APPROVED,
        outcome=outcome,
        reason=reason,
        checks=plan.layer1.checks,
        advice=plan.advice,
        record_id=record.record_id,
        version_id=record.id,
        duration_ms=(time.perf_counter() - timing.started) * 1000,
        occurred_at=occurred_at,
    )


def without_merge(plan: Plan) -> Plan:
    """``plan`` with a CREATE's merge advice (UPDATE into the nearest record) turned into an
    ADD: the Gate's last attempt when the record it merged into kept moving on, so that the
    proposal is stored as a new record rather than answered with a conflict (its conflicts
    with that record, left out of the merge advice, are not linked)."""
    advice = plan.advice
    if (
        advice is None
        or advice.action is not AdvisorAction.UPDATE
        or plan.request.action is not GateAction.CREATE
    ):
        return plan
    kept = replace(
        advice,
        action=AdvisorAction.ADD,
        rationale=f"{advice.rationale}; the record it would merge into kept changing: "
        "stored as a new record",
        target_record_id=None,
    )
    return replace(plan, advice=kept, target=None)
