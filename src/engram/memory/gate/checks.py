"""Layer 1 of the Gate: hard checks that no advisor can override.

Order (specification §5.1): schema → access → PII → rate limit → classification. Access and
rate limit apply to external writes only; the others to every origin. Every check yields a
:class:`CheckResult`; any failed one rejects the request. PII screening never fails a write:
a finding quarantines the record (``access_level = sensitive``), and so does a detector error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from engram.memory.gate import pii
from engram.memory.gate.access import write_denial
from engram.memory.gate.rate_limit import Limiter
from engram.memory.schemas import looks_imperative, looks_like_injection, validate_record
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
)

SCHEMA, ACCESS, PII, RATE_LIMIT, CLASSIFICATION = (
    "schema",
    "access",
    "pii",
    "rate_limit",
    "classification",
)

#: Types whose content must read as a statement, not an instruction or a question.
DECLARATIVE_TYPES = frozenset({MemoryType.BELIEF, MemoryType.ENTITY, MemoryType.REFLECTION})


@dataclass(frozen=True, slots=True)
class CheckResult:
    """Outcome of one Layer 1 check."""

    name: str
    passed: bool
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def ok(cls, name: str, detail: str = "ok", **data: Any) -> CheckResult:
        """A passed check."""
        return cls(name, passed=True, detail=detail, data=data)

    @classmethod
    def fail(cls, name: str, detail: str, **data: Any) -> CheckResult:
        """A failed check: the request is rejected."""
        return cls(name, passed=False, detail=detail, data=data)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form for the audit log and adapters."""
        return {"name": self.name, "passed": self.passed, "detail": self.detail, **self.data}


@dataclass(frozen=True, slots=True)
class Layer1Input:
    """Everything Layer 1 looks at for one request."""

    action: GateAction
    record: MemoryRecord
    caller: CallerIdentity
    decision_type: GateDecisionType
    expected_version: int | None
    head: MemoryRecord | None
    missing_evidence: Sequence[str] = ()
    evidence_above: Sequence[str] = ()
    status: MemoryStatus | None = None


@dataclass(frozen=True, slots=True)
class Layer1Outcome:
    """The checks, and the record as Layer 1 leaves it (quarantined or not)."""

    checks: list[CheckResult]
    record: MemoryRecord
    pii_kinds: tuple[str, ...] = ()
    pii_error: bool = False
    retry_after_seconds: float | None = None
    #: The PII detector version that read the record (None: nothing was scanned, as for a
    #: FORGET, an internal restatement or a self-healing change); stored with the version
    #: for the rescan job.
    screened_with: str | None = None

    @property
    def passed(self) -> bool:
        """True when no check failed."""
        return all(check.passed for check in self.checks)

    @property
    def failures(self) -> list[CheckResult]:
        """The checks that failed, in order."""
        return [check for check in self.checks if not check.passed]


def run_layer1(
    request: Layer1Input,
    limiter: Limiter,
    *,
    declarative_types: frozenset[MemoryType] = DECLARATIVE_TYPES,
) -> Layer1Outcome:
    """Run the five checks in order and return their results and the (modified) record.

    ``declarative_types`` overrides which types must read as statements (audit replay tries
    other policies with it; the Gate always uses the default)."""
    external = request.decision_type is GateDecisionType.EXTERNAL
    checks = [check_schema(request)]
    checks.append(check_access(request) if external else _skipped(ACCESS))
    pii_check, record, kinds, errored = check_pii(request)
    checks.append(pii_check)
    # A self-healing change (the PII rescan's) counts as read only when the job that made it
    # says so, once its consequences are written too: a crash in between leaves it unread.
    scanned = (
        request.action is not GateAction.FORGET
        and not _restatement(request)
        and request.decision_type is not GateDecisionType.SELF_HEALING
    )
    retry_after = None
    if external:
        rate_check = check_rate(request, limiter)
        retry_after = rate_check.data.get("retry_after_seconds")
        checks.append(rate_check)
    else:
        checks.append(_skipped(RATE_LIMIT))
    checks.append(check_classification(request, declarative_types))
    return Layer1Outcome(
        checks, record, kinds, errored, retry_after, pii.DETECTOR_VERSION if scanned else None
    )


def _skipped(name: str) -> CheckResult:
    return CheckResult.ok(name, "not applied to internal origins")


def check_schema(request: Layer1Input) -> CheckResult:
    """Envelope, type rules, and what the action needs (expected version, a live target)."""
    problems: list[str] = []
    head = request.head
    internal = request.decision_type is not GateDecisionType.EXTERNAL
    if request.action is GateAction.CREATE:
        if request.record.record_id != request.record.id:
            problems.append("CREATE starts a new record: record_id must equal id")
        problems.extend(validate_record(request.record, internal=internal))
    else:
        if request.action is GateAction.UPDATE and request.expected_version is None:
            problems.append("UPDATE requires expected_version")
        if head is None:
            problems.append(f"no record {request.record.record_id}")
        elif head.status is MemoryStatus.FORGOTTEN:
            problems.append(f"record {request.record.record_id} is forgotten")
        if request.action is GateAction.UPDATE:
            if head is not None and head.type is not request.record.type:
                problems.append(
                    f"a {head.type.value} record cannot become a {request.record.type.value}"
                )
            problems.extend(validate_record(request.record, internal=internal))
    problems.extend(f"evidence_links: no record {ref}" for ref in request.missing_evidence)
    problems.extend(
        f"evidence_links: record {ref} is above this record's access level "
        f"({request.record.access_level.value}): its readers could not read it"
        for ref in request.evidence_above
    )
    if request.status is not None and request.decision_type is GateDecisionType.EXTERNAL:
        problems.append("status: only internal origins set the status of a version")
    if problems:
        return CheckResult.fail(SCHEMA, "; ".join(problems), problems=problems)
    return CheckResult.ok(SCHEMA)


def check_access(request: Layer1Input) -> CheckResult:
    """The caller may write this type at this level (and change the existing record)."""
    target = request.head if request.action is not GateAction.CREATE else None
    proposed = request.record if request.action is not GateAction.FORGET else request.head
    if proposed is None:  # FORGET of an unknown record: schema already failed
        proposed = request.record
    denial = write_denial(request.caller, proposed, existing=target)
    if denial is not None:
        return CheckResult.fail(ACCESS, denial)
    return CheckResult.ok(ACCESS)


def screened_text(record: MemoryRecord) -> str:
    """What PII screening reads of a record: every text a reader gets back with it (content,
    metadata as JSON, classification and namespace)."""
    metadata = json.dumps(record.metadata, ensure_ascii=False, default=str)
    return f"{record.content}\n{metadata}\n{record.classification or ''}\n{record.namespace}"


def _restatement(request: Layer1Input) -> bool:
    """An internal request that stores the current version's content, metadata and level."""
    head, record = request.head, request.record
    return (
        request.decision_type is not GateDecisionType.EXTERNAL
        and head is not None
        and (record.content, record.metadata, record.access_level)
        == (head.content, head.metadata, head.access_level)
    )


def check_pii(request: Layer1Input) -> tuple[CheckResult, MemoryRecord, tuple[str, ...], bool]:
    """Screen content and metadata; a finding (or a detector error) quarantines the record."""
    record = request.record
    if request.action is GateAction.FORGET:
        return CheckResult.ok(PII, "nothing is stored by FORGET"), record, (), False
    if _restatement(request):
        # An internal restatement (a conflict resolution) stores nothing new: the level the
        # version has, quarantined or released by an admin, is kept as it is.
        return CheckResult.ok(PII, "restates the current version"), record, (), False
    try:
        kinds = tuple(sorted({finding.kind.value for finding in pii.scan(screened_text(record))}))
        errored = False
    except Exception as exc:  # noqa: BLE001 - any detector failure quarantines (fail safe)
        kinds, errored = ("detector_error",), True
        detail = f"detector failed ({type(exc).__name__}); quarantined as sensitive"
    else:
        detail = f"quarantined as sensitive: {', '.join(kinds)}" if kinds else "no PII found"
    if not kinds:
        return CheckResult.ok(PII, detail), record, (), False
    metadata = {
        **record.metadata,
        "pii": {"kinds": list(kinds), "detector": pii.DETECTOR_VERSION},
    }
    quarantined = record.model_copy(
        update={"access_level": AccessLevel.SENSITIVE, "metadata": metadata}
    )
    check = CheckResult.ok(PII, detail, quarantined=True, kinds=list(kinds))
    return check, quarantined, kinds, errored


def check_rate(request: Layer1Input, limiter: Limiter) -> CheckResult:
    """One token from the caller's bucket; a refusal says when to retry."""
    caller = request.caller
    decision = limiter.acquire(caller.agent_id, caller.trust_level, caller.writes_per_minute)
    if decision.allowed:
        return CheckResult.ok(RATE_LIMIT)
    retry = round(decision.retry_after_seconds, 3)
    if decision.per_minute <= 0:
        return CheckResult.fail(RATE_LIMIT, "this agent may not write")
    return CheckResult.fail(
        RATE_LIMIT,
        f"more than {decision.per_minute:g} writes per minute; retry after {retry:g} s",
        retry_after_seconds=retry,
    )


def check_classification(
    request: Layer1Input, declarative_types: frozenset[MemoryType] = DECLARATIVE_TYPES
) -> CheckResult:
    """The content fits its type, and it does not address the agent that will read it."""
    if request.action is GateAction.FORGET:
        return CheckResult.ok(CLASSIFICATION, "nothing is stored by FORGET")
    record = request.record
    if looks_like_injection(record.content):
        return CheckResult.fail(
            CLASSIFICATION,
            "content addresses the reading agent (instruction injection); not stored as knowledge",
        )
    if record.type in declarative_types:
        if looks_imperative(record.content):
            return CheckResult.fail(
                CLASSIFICATION,
                f"a {record.type.value} states what is so; this reads as an instruction "
                "(store it as a skill or preference)",
            )
        if record.content.rstrip().endswith("?"):
            return CheckResult.fail(
                CLASSIFICATION, f"a {record.type.value} states what is so, not a question"
            )
    return CheckResult.ok(CLASSIFICATION)


def with_schema_failure(layer1: Layer1Outcome, problem: str) -> Layer1Outcome:
    """``layer1`` with its schema check failed for ``problem`` (found while writing)."""
    checks = [CheckResult.fail(SCHEMA, problem) if c.name == SCHEMA else c for c in layer1.checks]
    return replace(layer1, checks=checks)
