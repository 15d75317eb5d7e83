"""How a read of an older version is counted for decay (pure logic, a fake database).

A read of an older version counts at the higher of its level and its head's (ADR-009). The
head's level was looked up in a second statement after the read, so a quarantine release
lowering the head in place between the two counted the read at the lowered level, for
readers who could not read the record when it was made (a review of hostile pass AJ). The
as-of statements now return each row's head level, read in the row's own snapshot."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime
from typing import Any, cast

from engram.memory.store.versions import record_from_row
from engram.memory.temporal.engine import SQL, TemporalEngine
from engram.memory.types import AccessLevel, GateDecisionType, MemoryRecord, MemoryType


class _Database:
    """Answers the as-of read with ``rows``; says which statements it was sent; the head's
    level it holds *now* (after the release) is ``agent``."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.sent: list[str] = []

    async def fetch(self, query: str, *args: Any) -> list[dict[str, Any]]:
        self.sent.append(query)
        if query == SQL["head_levels"]:
            return [{"record_id": self.rows[0]["record_id"], "access_level": "agent"}]
        return self.rows


class _Reads:
    def __init__(self) -> None:
        self.noted: Counter[tuple[uuid.UUID, AccessLevel]] = Counter()

    def note(self, reads: Any) -> None:
        self.noted.update(reads)


def _older_version_row(head_level: str) -> dict[str, Any]:
    record = MemoryRecord.draft(
        MemoryType.BELIEF,
        "The release train leaves on Thursdays.",
        source_agent="writer",
        event_time=datetime(2026, 1, 1, tzinfo=UTC),
    ).model_copy(
        update={
            "gate_decision_id": uuid.uuid4(),
            "gate_decision_type": GateDecisionType.EXTERNAL,
            "access_level": AccessLevel.AGENT,
            "superseded_by": uuid.uuid4(),
        }
    )
    return {
        **record.model_dump(),
        "type": record.type.value,
        "access_level": record.access_level.value,
        "gate_decision_type": "external",
        "status": record.status.value,
        "consolidation_path": record.consolidation_path.value,
        "evidence_links": [],
        "head_level": head_level,
    }


async def test_an_older_versions_read_counts_at_its_heads_level_when_it_was_read() -> None:
    """The head was ``sensitive`` when the older ``agent`` version was read and is ``agent``
    by the time the read is noted (released): the read counts at ``sensitive``."""
    row = _older_version_row(head_level="sensitive")
    db = _Database([row])
    reads = _Reads()
    engine = TemporalEngine(cast(Any, db), reads=cast(Any, reads))

    [record] = await engine.query(
        record_id=row["record_id"], as_of_ingestion=datetime(2026, 6, 1, tzinfo=UTC)
    )

    assert record.superseded_by is not None
    assert SQL["head_levels"] not in db.sent  # no second statement on the read path
    assert {(row["record_id"], AccessLevel.SENSITIVE): 1} == dict(reads.noted)


async def test_a_version_read_without_its_heads_level_looks_it_up() -> None:
    """A version noted without the as-of statement's column (a feedback's head, or one whose
    level fell out of the memo) still looks its head up."""
    row = _older_version_row(head_level="sensitive")
    db = _Database([row])
    reads = _Reads()
    engine = TemporalEngine(cast(Any, db), reads=cast(Any, reads))

    await engine.note_reads([record_from_row(row)])

    assert SQL["head_levels"] in db.sent
    assert {(row["record_id"], AccessLevel.AGENT): 1} == dict(reads.noted)
