"""Which approved plans the Gate writes in one statement (engram.memory.gate.at_once), and
the audit payload it splits around the time the statement stamps."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from engram.memory.audit.entry import AuditEntry
from engram.memory.conflict.detection import ConflictResult
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.advisor import AdvisorAction, AdvisorDecision
from engram.memory.gate.at_once import writes_at_once
from engram.memory.gate.checks import Layer1Outcome
from engram.memory.gate.plan import Plan, without_merge
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    ConflictClassification,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    TrustLevel,
)

WRITER = caller_for_tier("agent-a", TrustLevel.STANDARD)


def _plan(
    action: GateAction = GateAction.CREATE,
    advised: AdvisorAction = AdvisorAction.ADD,
    *classes: ConflictClassification,
) -> Plan:
    record = MemoryRecord.draft(MemoryType.BELIEF, "The cache holds 5 GB.", source_agent="agent-a")
    conflicts = tuple(
        ConflictResult(kind, uuid.uuid4(), uuid.uuid4(), 0.8, "test") for kind in classes
    )
    advice = AdvisorDecision(advised, 0.7, 0.5, "test", "heuristic@2", conflicts=conflicts)
    request = GateRequest(action, record, WRITER, GateDecisionType.EXTERNAL)
    return Plan(request, Layer1Outcome([], record), record, None, advice, None, (0.1,), {})


def test_a_new_record_admitted_as_it_stands_is_written_at_once() -> None:
    """A CREATE with ADD advice and no conflict needs no read inside its write."""
    assert writes_at_once(_plan())


@pytest.mark.parametrize(
    "kinds", [(ConflictClassification.UNRESOLVABLE,), (ConflictClassification.REFINEMENT,)]
)
def test_conflicts_that_change_no_record_are_written_at_once(
    kinds: tuple[ConflictClassification, ...],
) -> None:
    """An unresolvable conflict or a refinement is a link (and an escalation), no change."""
    assert writes_at_once(_plan(GateAction.CREATE, AdvisorAction.ADD, *kinds))


@pytest.mark.parametrize(
    "kind", [ConflictClassification.SUPERSESSION, ConflictClassification.CONTRADICTION]
)
def test_a_state_changing_conflict_keeps_the_transaction(kind: ConflictClassification) -> None:
    """Its resolution is planned against the older record as the write reads it."""
    plan = _plan(GateAction.CREATE, AdvisorAction.ADD, ConflictClassification.UNRESOLVABLE, kind)
    assert not writes_at_once(plan)


@pytest.mark.parametrize(
    ("action", "advised"),
    [
        (GateAction.CREATE, AdvisorAction.NOOP),
        (GateAction.CREATE, AdvisorAction.UPDATE),
        (GateAction.UPDATE, AdvisorAction.ADD),
        (GateAction.FORGET, AdvisorAction.ADD),
    ],
)
def test_other_writes_keep_the_transaction(action: GateAction, advised: AdvisorAction) -> None:
    """A NOOP, an UPDATE advice, an UPDATE or a FORGET read or lock records as they write."""
    assert not writes_at_once(_plan(action, advised))


def test_the_payload_around_the_time_joins_into_the_whole_payload() -> None:
    """Before + the time field (length-prefixed) + after is the payload the chain hashes."""
    for moment in (
        datetime(2026, 11, 26, 15, 0, 0, tzinfo=UTC),
        datetime(2026, 11, 26, 15, 0, 0, 42, tzinfo=UTC),
    ):
        entry = AuditEntry(
            decision_id=uuid.uuid4(),
            request_id="r",
            occurred_at=moment,
            action="CREATE",
            decision="approved",
            outcome="created",
            decision_type="external",
            reason="stored as a new record",
            agent_id="agent-a",
            caller="{}",
            record_id=uuid.uuid4(),
            version_id=uuid.uuid4(),
            input_snapshot="{}",
            layer1_checks="[]",
            layer2_decision=None,
            decision_source="heuristic@2",
            duration_ms=1.5,
        )
        before, after = entry.payload_around_occurred_at()
        text = moment.isoformat().encode()
        assert before + len(text).to_bytes(8, "big") + text + after == entry.payload()


def test_a_self_healing_create_records_no_conflict_and_goes_at_once() -> None:
    """A repair restates records whose conflicts were recorded already: nothing to read."""
    plan = _plan(GateAction.CREATE, AdvisorAction.ADD, ConflictClassification.SUPERSESSION)
    healing = replace(
        plan,
        request=replace(plan.request, decision_type=GateDecisionType.SELF_HEALING),
    )
    assert not writes_at_once(plan)
    assert writes_at_once(healing)


def test_a_merge_whose_record_kept_moving_becomes_a_new_record_on_the_last_attempt() -> None:
    """without_merge turns a CREATE's merge into an ADD (no target) that is written at once;
    an UPDATE request and a NOOP are left as they are."""
    merging = _plan(GateAction.CREATE, AdvisorAction.UPDATE)
    target = MemoryRecord.draft(MemoryType.BELIEF, "The cache holds 4 GB.", source_agent="agent-a")
    assert merging.advice is not None
    merging = replace(
        merging,
        target=target,
        advice=replace(merging.advice, target_record_id=target.record_id),
    )
    kept = without_merge(merging)
    assert kept.advice is not None
    assert AdvisorAction.ADD is kept.advice.action
    assert (None, None) == (kept.target, kept.advice.target_record_id)
    assert "kept changing" in kept.advice.rationale
    assert writes_at_once(kept)
    for unchanged in (
        _plan(GateAction.UPDATE, AdvisorAction.UPDATE),
        _plan(GateAction.CREATE, AdvisorAction.NOOP),
    ):
        assert unchanged is without_merge(unchanged)
