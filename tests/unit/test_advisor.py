"""The Gate's Layer 2 advisor (engram.memory.gate.advisor): actions, confidence, importance."""

from __future__ import annotations

import pytest

from engram.memory.conflict.detection import ConflictDetector
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.advisor import (
    AdvisorAction,
    AdvisorContext,
    HeuristicAdvisor,
    calibrate_confidence,
    importance,
)
from engram.memory.types import (
    ConflictClassification,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    Neighbour,
    TrustLevel,
)

EXTERNAL = GateDecisionType.EXTERNAL


STANDARD = caller_for_tier("a", TrustLevel.STANDARD)


def belief(text: str, **fields: object) -> MemoryRecord:
    """Return a draft belief from agent a with the given content and fields."""
    return MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="a", **fields)  # type: ignore[arg-type]


def _neighbour(text: str, similarity: float, **fields: object) -> Neighbour:
    return Neighbour(belief(text, **fields), similarity)


async def test_advisor_noops_on_a_near_duplicate_with_the_same_words() -> None:
    """High similarity with the same significant words reinforces the existing record."""
    advisor = HeuristicAdvisor(ConflictDetector())
    existing = _neighbour("The staging database is restored from backups nightly.", 0.99)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(existing,))
    decision = await advisor.advise(
        belief("The staging database is restored from backup nightly."), context
    )
    assert AdvisorAction.NOOP == decision.action
    assert existing.record.record_id == decision.target_record_id


async def test_advisor_adds_a_changed_value_and_flags_an_update_candidate() -> None:
    """A changed number at 0.98 similarity is a new record, never a NOOP."""
    advisor = HeuristicAdvisor(ConflictDetector())
    existing = _neighbour("The deploy target is v2.0.", 0.98)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(existing,))
    decision = await advisor.advise(belief("The deploy target is v2.1."), context)
    assert AdvisorAction.ADD == decision.action
    assert existing.record.record_id == decision.update_candidate_of
    assert [ConflictClassification.SUPERSESSION] == [c.classification for c in decision.conflicts]


async def test_advisor_routes_repeated_and_clustered_records_to_consolidation() -> None:
    """A third repetition, or four related records, flags consolidation."""
    advisor = HeuristicAdvisor(ConflictDetector())
    repeated = Neighbour(belief("Standups start at nine."), 1.0, repetitions=2)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, exact_duplicate=repeated)
    assert (await advisor.advise(belief("Standups start at nine"), context)).route_to_consolidation
    cluster = tuple(_neighbour(f"Incident {n} hit the ledger.", 0.75) for n in range(4))
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=cluster)
    decision = await advisor.advise(belief("Incident 9 hit the ledger."), context)
    assert (AdvisorAction.ADD, True) == (decision.action, decision.route_to_consolidation)


def test_confidence_is_calibrated_by_trust_and_clamped() -> None:
    """Told by a restricted agent: 0.75 * 0.85; internal origins keep the source confidence."""
    record = belief("x is y.")
    restricted = caller_for_tier("r", TrustLevel.RESTRICTED)
    external = AdvisorContext(GateAction.CREATE, EXTERNAL, restricted)
    internal = AdvisorContext(GateAction.CREATE, GateDecisionType.CONSOLIDATION, restricted)
    assert 0.6375 == pytest.approx(calibrate_confidence(record, external))
    assert 0.75 == calibrate_confidence(record, internal)
    assert 0.99 == calibrate_confidence(belief("x is y.", source_confidence=1.0), internal)


def test_importance_follows_its_formula() -> None:
    """Importance = 0.35·type + 0.25·confidence + 0.20·novelty + 0.20·specificity."""
    record = MemoryRecord.draft(
        MemoryType.DECISION, "one two three four five", source_agent="a",
        metadata={"rationale": "r"},
    )  # fmt: skip
    expected = 0.35 * 0.9 + 0.25 * 0.8 + 0.20 * (1 - 0.5) + 0.20 * (5 / 25)
    assert expected == pytest.approx(importance(record, 0.8, 0.5))
