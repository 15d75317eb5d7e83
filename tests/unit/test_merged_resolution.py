"""A resolution never ends or challenges a consolidated narrative that tells several records'
accounts together (engram.memory.gate.resolution.plan_resolution, merged_sources): a later
claim changes one account at most, so the conflict goes to a person instead."""

from __future__ import annotations

from typing import Any

import pytest

from engram.memory.conflict.detection import ConflictResult
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.resolution import Step, merged_sources, plan_resolution
from engram.memory.types import (
    ConflictClassification,
    ConsolidationPath,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    TrustLevel,
)

TRUSTED = caller_for_tier("boss", TrustLevel.TRUSTED)
NARRATIVE = (
    "Paged at 02:10 for checkout-api; rolled back to v4.2.0 at 02:31; the root cause was the "
    "connection pool capped at 20 in v4.3.0."
)
NEWER = MemoryRecord.draft(
    MemoryType.BELIEF,
    "The checkout-api connection pool is capped at 200 since v4.3.1.",
    source_agent="boss",
)


def consolidated(action: str, sources: Any, path: ConsolidationPath) -> MemoryRecord:
    """A record as consolidation makes it (``path`` slow), with its ``consolidation`` note."""
    record = MemoryRecord.draft(
        MemoryType.EPISODE,
        NARRATIVE,
        source_agent="system:consolidation",
        metadata={"consolidation": {"action": action, "sources": sources}},
    )
    return record.model_copy(update={"consolidation_path": path})


def conflict(kind: ConflictClassification, older: MemoryRecord) -> ConflictResult:
    """A conflict of ``kind`` the proposal ``NEWER`` found with ``older``."""
    return ConflictResult(kind, older.record_id, older.id, 0.8, "test")


@pytest.mark.parametrize(
    "kind", [ConflictClassification.SUPERSESSION, ConflictClassification.CONTRADICTION]
)
@pytest.mark.parametrize("origin", list(GateDecisionType))
def test_a_merged_narrative_is_escalated_never_ended_or_challenged(
    kind: ConflictClassification, origin: GateDecisionType
) -> None:
    """Whoever writes the newer claim (a trusted agent, or an internal writer, who may change
    any other record): nothing ends or challenges the narrative; an agent's own record is
    challenged, as in every escalation."""
    older = consolidated("merge", 3, ConsolidationPath.SLOW)
    plan = plan_resolution(
        conflict(kind, older),
        writer=TRUSTED,
        decision_type=origin,
        older=older,
        standing=TrustLevel.TRUSTED,
        newer=NEWER,
    )
    assert plan.escalated is not None
    assert "3 records" in plan.escalated
    assert Step.SUPERSEDE_OLDER not in plan.steps
    assert Step.CHALLENGE_OLDER not in plan.steps
    external = origin is GateDecisionType.EXTERNAL
    assert plan.steps == ((Step.CHALLENGE_NEWER,) if external else ())


@pytest.mark.parametrize(
    ("action", "sources", "path", "merged"),
    [
        ("merge", 3, ConsolidationPath.SLOW, 3),
        ("merge", 1, ConsolidationPath.SLOW, 1),
        ("promote", 4, ConsolidationPath.SLOW, 1),  # one claim, however often observed
        ("skill", 5, ConsolidationPath.SLOW, 1),  # one procedure
        ("merge", 3, ConsolidationPath.FAST, 1),  # an agent's note claiming to be one
        ("merge", "3", ConsolidationPath.SLOW, 1),
        ("merge", None, ConsolidationPath.SLOW, 1),
    ],
)
def test_what_counts_as_a_merged_narrative(
    action: str, sources: Any, path: ConsolidationPath, merged: int
) -> None:
    """Only a ``merge`` that consolidation wrote (the slow path) tells several accounts; a
    promoted belief or a skill states one claim, and a note on the fast path is an agent's."""
    assert merged == merged_sources(consolidated(action, sources, path))


def test_a_promoted_belief_is_still_superseded() -> None:
    """A promotion states one claim: a trusted agent's newer value supersedes it as before."""
    older = consolidated("promote", 4, ConsolidationPath.SLOW)
    plan = plan_resolution(
        conflict(ConflictClassification.SUPERSESSION, older),
        writer=TRUSTED,
        decision_type=GateDecisionType.EXTERNAL,
        older=older,
        standing=TrustLevel.TRUSTED,
        newer=NEWER,
    )
    assert (plan.steps, plan.escalated) == ((Step.SUPERSEDE_OLDER,), None)
