"""What goes into the Librarian Gate and what comes out of it.

Adapters build a :class:`GateRequest` (they alone set ``decision_type``; nothing a caller
sends can make a request internal) and read a :class:`GateResult`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from engram.errors import ValidationFailed
from engram.memory.audit.entry import caller_json
from engram.memory.conflict.detection import ConflictResult
from engram.memory.gate.advisor import AdvisorAction, AdvisorDecision
from engram.memory.gate.checks import CheckResult
from engram.memory.storable import audited_input, json_safe
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    ConflictClassification,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    WriteOutcome,
)


@dataclass(frozen=True, slots=True)
class GateRequest:
    """Input to the Librarian Gate.

    For UPDATE and FORGET, ``record.record_id`` names the record; for UPDATE the rest of
    ``record`` is the proposed new content. ``request_id`` makes the request idempotent: a
    second evaluation with the same id returns the first one's result and writes nothing.
    """

    action: GateAction
    record: MemoryRecord
    caller_identity: CallerIdentity
    decision_type: GateDecisionType
    expected_version: int | None = None
    request_id: str | None = None
    #: Status of the new version; only internal origins may set it (conflict resolution marks
    #: records ``challenged``). Layer 1 rejects it on external requests.
    status: MemoryStatus | None = None

    def __post_init__(self) -> None:
        """Refuse a request made for anything but an identity (in process, ``None`` or an
        agent's name raised AttributeError deep in the Gate; hostile pass R)."""
        given: object = self.caller_identity
        if not isinstance(given, CallerIdentity):
            raise ValidationFailed(errors=["caller_identity: a CallerIdentity"])

    @classmethod
    def forget(
        cls,
        target: MemoryRecord,
        caller: CallerIdentity,
        decision_type: GateDecisionType,
        *,
        expected_version: int | None = None,
        request_id: str | None = None,
    ) -> GateRequest:
        """A FORGET of ``target`` (a version of the record, as the caller read it)."""
        return cls(GateAction.FORGET, target, caller, decision_type, expected_version, request_id)

    def snapshot(self) -> dict[str, Any]:
        """The full input, as recorded in the audit log.

        A record the schema check refuses may hold what storage cannot (a NUL, a lone
        surrogate, NaN in metadata, metadata nested past what pydantic serialises): the
        snapshot then has it escaped (:func:`engram.memory.storable.json_safe`) and says so
        with ``"escaped": true``. An approved record never needs this; its snapshot is as is.
        """
        record = self.record.model_dump(mode="json", exclude={"metadata"})
        record["metadata"] = self.record.metadata
        safe = json_safe(
            {
                "action": self.action.value,
                "expected_version": self.expected_version,
                "request_id": self.request_id,
                "status": None if self.status is None else self.status.value,
                "record": record,
            }
        )
        snapshot: dict[str, Any] = safe.value
        if safe.altered:
            snapshot["escaped"] = True
        return snapshot

    @property
    def record_id(self) -> UUID:
        """The record the request is about."""
        return self.record.record_id

    @property
    def memory_type(self) -> str:
        """The type of the proposed record, for metrics and logs."""
        return self.record.type.value

    @property
    def access_level(self) -> AccessLevel:
        """The level of the proposed record (logs redact the caller above ``agent``)."""
        return self.record.access_level


@dataclass(frozen=True, slots=True)
class RefusedInput:
    """Input an adapter could not even turn into a record: recorded and signalled like any
    other rejected request, with the input itself as the snapshot (bounded and escaped by
    :func:`engram.memory.storable.audited_input`)."""

    action: GateAction
    caller_identity: CallerIdentity
    decision_type: GateDecisionType
    raw: Mapping[str, Any]
    request_id: str | None = None
    record_id: None = None
    memory_type: None = None

    def snapshot(self) -> dict[str, Any]:
        """The input as the audit log keeps it."""
        return {"action": self.action.value, **audited_input(self.raw)}

    @property
    def access_level(self) -> AccessLevel:
        """The level the input asked for (the default, ``agent``, when it named none)."""
        level = self.raw.get("access_level")
        valid = {member.value for member in AccessLevel}
        return (
            AccessLevel(level) if isinstance(level, str) and level in valid else AccessLevel.AGENT
        )


#: What a decision is about: a request the Gate evaluated, or input refused before that.
Proposal = GateRequest | RefusedInput


@dataclass(frozen=True, slots=True)
class GateTimings:
    """Where one evaluation's time went, in milliseconds."""

    embedding_ms: float
    evaluation_ms: float
    total_ms: float


@dataclass(frozen=True, slots=True)
class GateResult:
    """Output of the Librarian Gate."""

    decision: GateDecision
    decision_id: UUID
    reason: str
    layer1_checks: list[CheckResult]
    layer2_decision: AdvisorDecision | None
    modified_record: MemoryRecord | None
    outcome: WriteOutcome = WriteOutcome.NONE
    record_id: UUID | None = None
    version: int | None = None
    current_version: int | None = None
    retry_after_seconds: float | None = None
    degraded: bool = False
    replayed: bool = False
    failed_checks: list[CheckResult] = field(default_factory=list)
    timings: GateTimings | None = None

    @property
    def approved(self) -> bool:
        """True for an APPROVED decision."""
        return self.decision is GateDecision.APPROVED


def advisor_decision_from_json(data: dict[str, Any] | None) -> AdvisorDecision | None:
    """Rebuild Layer 2's decision from its audit-log form."""
    if data is None:
        return None
    return AdvisorDecision(
        action=AdvisorAction(data["action"]),
        confidence=float(data["confidence"]),
        importance=float(data["importance"]),
        rationale=data["rationale"],
        source=data["source"],
        target_record_id=_uuid(data.get("target_record_id")),
        update_candidate_of=_uuid(data.get("update_candidate_of")),
        route_to_consolidation=bool(data.get("route_to_consolidation", False)),
        conflicts=tuple(
            ConflictResult(
                classification=ConflictClassification(c["classification"]),
                existing_record_id=UUID(c["existing_record_id"]),
                existing_version_id=UUID(c["existing_version_id"]),
                similarity=float(c["similarity"]),
                reason=c["reason"],
            )
            for c in data.get("conflicts", [])
        ),
    )


def checks_from_json(text: str) -> list[CheckResult]:
    """Rebuild Layer 1's results from their audit-log form."""
    checks = []
    for item in json.loads(text):
        extra = {k: v for k, v in item.items() if k not in {"name", "passed", "detail"}}
        checks.append(CheckResult(item["name"], bool(item["passed"]), item["detail"], extra))
    return checks


def _uuid(value: object) -> UUID | None:
    return None if value in (None, "") else UUID(str(value))


def result_json(result: GateResult) -> dict[str, Any]:
    """A JSON-ready summary of a result (adapters and the CLI print this)."""
    return {
        "decision": result.decision.value,
        "decision_id": str(result.decision_id),
        "reason": result.reason,
        "outcome": result.outcome.value,
        "record_id": None if result.record_id is None else str(result.record_id),
        "version": result.version,
        "current_version": result.current_version,
        "retry_after_seconds": result.retry_after_seconds,
        "degraded": result.degraded,
        "replayed": result.replayed,
        "layer1_checks": [check.to_json() for check in result.layer1_checks],
        "layer2_decision": (
            None if result.layer2_decision is None else result.layer2_decision.to_json()
        ),
    }


__all__ = [
    "GateRequest",
    "GateResult",
    "WriteOutcome",
    "advisor_decision_from_json",
    "caller_json",
    "checks_from_json",
    "result_json",
]
