"""Conflict detection by cue (engram.memory.conflict.detection)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from engram.memory.conflict.detection import SubjectConflictDetector
from engram.memory.types import (
    ConflictClassification,
    MemoryRecord,
    MemoryType,
)


def belief(text: str, **fields: object) -> MemoryRecord:
    """Return a draft belief from agent a with the given content and fields."""
    return MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="a", **fields)  # type: ignore[arg-type]


async def test_conflict_detector_classifies_by_cue() -> None:
    """Negation is a contradiction; added detail a refinement; a weaker change unresolvable."""
    detector = SubjectConflictDetector()
    old = belief("Payments are settled nightly.")
    sims = {old.id: 0.85}
    negated = await detector.detect(
        belief("Payments are not settled nightly."), [old], similarities=sims
    )
    refined = await detector.detect(
        belief("Payments are settled nightly by the ledger job."), [old], similarities=sims
    )
    base = belief("The cache TTL is 60 seconds.", event_time=datetime.now(UTC))
    older_weaker = belief(
        "The cache TTL is 90 seconds.",
        event_time=datetime.now(UTC) - timedelta(days=3),
        source_confidence=0.5,
    )
    unresolved = await detector.detect(older_weaker, [base], similarities={base.id: 0.97})
    unrelated = await detector.detect(
        belief("Cats sleep a lot."), [old], similarities={old.id: 0.1}
    )
    assert [ConflictClassification.CONTRADICTION] == [c.classification for c in negated]
    assert [ConflictClassification.REFINEMENT] == [c.classification for c in refined]
    assert [ConflictClassification.UNRESOLVABLE] == [c.classification for c in unresolved]
    assert [] == unrelated
    assert uuid.UUID(str(old.record_id)) == negated[0].existing_record_id
