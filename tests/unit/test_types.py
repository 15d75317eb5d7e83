"""Enums, the MemoryRecord envelope and the caller identity."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    ConflictClassification,
    ConsolidationTrigger,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    SourceKind,
    TrustLevel,
)


def test_memory_types_are_the_eight_of_the_specification() -> None:
    """MemoryType has exactly the eight types of the specification."""
    expected = {
        "belief", "decision", "episode", "skill", "entity", "preference", "reflection", "resource",
    }  # fmt: skip
    assert expected == {member.value for member in MemoryType}


@pytest.mark.parametrize(
    ("enum", "values"),
    [
        (AccessLevel, ["public", "agent", "user", "system", "sensitive"]),
        (GateDecisionType, ["external", "consolidation", "self_healing"]),
        (GateAction, ["CREATE", "UPDATE", "FORGET"]),
        (GateDecision, ["approved", "rejected", "conflict"]),
        (ConflictClassification, ["contradiction", "supersession", "refinement", "unresolvable"]),
        (
            ConsolidationTrigger,
            ["scheduled_deep", "scheduled_light", "event_driven", "pressure_driven"],
        ),
        (TrustLevel, ["trusted", "standard", "restricted", "read_only"]),
    ],
)
def test_enums_carry_the_specified_values(enum: type, values: list[str]) -> None:
    """Each enum of the specification has exactly its specified values, in order."""
    assert values == [member.value for member in enum]  # type: ignore[attr-defined]


def test_memory_status_covers_the_lifecycle() -> None:
    """MemoryStatus names active, superseded, consolidated and forgotten versions."""
    assert {"active", "superseded", "consolidated", "forgotten"} <= {s.value for s in MemoryStatus}


def test_access_levels_are_ordered_from_open_to_closed() -> None:
    """A clearance covers its own level and every more open one, never a closer one."""
    assert AccessLevel.USER.allows(AccessLevel.AGENT)
    assert AccessLevel.USER.allows(AccessLevel.USER)
    assert not AccessLevel.USER.allows(AccessLevel.SENSITIVE)
    assert AccessLevel.SENSITIVE.allows(AccessLevel.PUBLIC)
    assert [0, 1, 2, 3, 4] == [level.rank for level in AccessLevel]


def test_draft_fills_ids_version_and_timestamps() -> None:
    """A draft is version 1 of a new record whose lineage id is its own id."""
    before = datetime.now(UTC)
    record = MemoryRecord.draft(MemoryType.BELIEF, "The sky is blue.", source_agent="a1")
    assert 1 == record.version
    assert record.id == record.record_id
    assert record.superseded_by is None
    assert record.event_time is None
    assert before <= record.ingestion_time == record.created_at == record.updated_at
    assert record.gate_decision_id is None
    assert AccessLevel.AGENT == record.access_level
    assert MemoryStatus.ACTIVE == record.status
    assert "fast" == record.consolidation_path.value
    assert record.is_head


def test_draft_confidence_defaults_to_told_and_follows_source_kind() -> None:
    """Without a confidence a draft is 'told' (0.75); metadata.source_kind adjusts it."""
    told = MemoryRecord.draft(MemoryType.BELIEF, "x is y.", source_agent="a")
    observed = MemoryRecord.draft(
        MemoryType.BELIEF, "x is y.", source_agent="a", metadata={"source_kind": "observed"}
    )
    inferred = MemoryRecord.draft(
        MemoryType.BELIEF, "x is y.", source_agent="a", metadata={"source_kind": "inferred"}
    )
    explicit = MemoryRecord.draft(
        MemoryType.BELIEF, "x is y.", source_agent="a", source_confidence=0.3
    )
    assert [0.75, 0.9, 0.6, 0.3] == [
        told.source_confidence,
        observed.source_confidence,
        inferred.source_confidence,
        explicit.source_confidence,
    ]
    assert 0.9 == SourceKind.OBSERVED.default_confidence


def test_draft_can_continue_an_existing_lineage() -> None:
    """A draft given a record id is a new version id in that record's lineage."""
    lineage = uuid.uuid4()
    record = MemoryRecord.draft(MemoryType.BELIEF, "a is b.", source_agent="a", record_id=lineage)
    assert lineage == record.record_id
    assert lineage != record.id


def test_records_are_immutable_and_reject_unknown_fields() -> None:
    """The envelope is frozen and refuses fields it does not define."""
    record = MemoryRecord.draft(MemoryType.BELIEF, "a is b.", source_agent="a")
    with pytest.raises(ValidationError):
        record.content = "changed"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        MemoryRecord.model_validate({**record.model_dump(), "surprise": 1})


def test_confidence_outside_unit_interval_is_refused() -> None:
    """source_confidence must lie in [0, 1]."""
    with pytest.raises(ValidationError):
        MemoryRecord.draft(MemoryType.BELIEF, "a is b.", source_agent="a", source_confidence=1.5)


def test_read_only_callers_cannot_write() -> None:
    """A read-only caller never writes; every other trust level may."""
    assert not CallerIdentity("r", TrustLevel.READ_ONLY).can_write
    assert CallerIdentity("w", TrustLevel.RESTRICTED).can_write


def test_system_identity_has_full_clearance() -> None:
    """The identity of internal subsystems may write and read every level."""
    system = CallerIdentity.system("consolidation")
    assert "system:consolidation" == system.agent_id
    assert AccessLevel.SENSITIVE == system.max_write_level
    assert frozenset(MemoryType) == system.allowed_types


def test_records_read_back_from_rows_equal_validated_ones() -> None:
    """The fast construction of stored rows builds the same record as validation would."""
    from engram.memory.store.versions import record_from_row  # noqa: PLC0415

    record = MemoryRecord.draft(
        MemoryType.DECISION,
        "We chose Kafka.",
        source_agent="a",
        metadata={"rationale": "ordering"},
        event_time=datetime(2026, 1, 1, tzinfo=UTC),
    ).model_copy(
        update={"gate_decision_id": uuid.uuid4(), "gate_decision_type": GateDecisionType.EXTERNAL}
    )
    row = {
        **record.model_dump(),
        "type": record.type.value,
        "access_level": record.access_level.value,
        "gate_decision_type": "external",
        "status": record.status.value,
        "consolidation_path": record.consolidation_path.value,
        "evidence_links": list(record.evidence_links),
    }
    rebuilt = record_from_row(row)
    assert MemoryRecord.model_validate(record.model_dump()) == rebuilt
    assert record.model_dump() == rebuilt.model_dump()
    assert (
        record.model_copy(update={"version": 2}).version
        == rebuilt.model_copy(update={"version": 2}).version
    )
