"""Audit log rows (engram.memory.audit.entry): their hash formats and canonical JSON."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from engram.memory.audit.checkpoint import LANES
from engram.memory.audit.entry import BATCH_LANE, decision_id_in_lane, new_decision_id
from engram.memory.audit.log import AuditEntry, canonical_json, genesis_hash


def _entry(**changes: object) -> AuditEntry:
    base: dict[str, object] = {
        "decision_id": uuid.UUID(int=5),
        "request_id": "r1",
        "occurred_at": datetime(2026, 1, 1, tzinfo=UTC),
        "action": "CREATE",
        "decision": "approved",
        "outcome": "created",
        "decision_type": "external",
        "reason": "ok",
        "agent_id": "a",
        "caller": "{}",
        "record_id": None,
        "version_id": None,
        "input_snapshot": canonical_json({"b": 1, "a": [1, 2]}),
        "layer1_checks": "[]",
        "layer2_decision": None,
        "decision_source": "heuristic@2",
        "duration_ms": 1.5,
    }
    base.update(changes)
    return AuditEntry(**base)  # type: ignore[arg-type]


def test_audit_hash_depends_on_every_field_and_on_the_previous_hash() -> None:
    """Changing any field, or the link, changes the digest; the lane follows the decision id."""
    entry = _entry()
    digest = entry.digest(genesis_hash(entry.lane), seq=7)
    assert 5 == entry.lane
    assert digest == _entry().digest(genesis_hash(5), seq=7)
    assert digest != entry.digest(genesis_hash(6), seq=7)
    for field, value in [("reason", "ok!"), ("agent_id", "b"), ("duration_ms", 1.6),
                         ("layer2_decision", "{}"), ("request_id", None)]:  # fmt: skip
        assert digest != _entry(**{field: value}).digest(genesis_hash(5), seq=7), field


def test_audit_hash_covers_seq_from_format_2_only() -> None:
    """A format-2 hash changes with the row's seq and differs from the format-1 hash of the
    same row; a format-1 hash, written before seq was hashed, does not depend on it."""
    entry, link = _entry(), genesis_hash(5)
    assert entry.digest(link, seq=7) != entry.digest(link, seq=8)
    assert entry.digest(link, seq=7) != entry.digest(link, seq=7, version=1)
    assert entry.digest(link, seq=7, version=1) == entry.digest(link, seq=8, version=1)
    with pytest.raises(ValueError, match="format 3"):
        entry.digest(link, seq=7, version=3)


def test_canonical_json_is_stable() -> None:
    """Keys are sorted, separators compact, non-ASCII kept."""
    assert '{"a":[1,2],"b":"é"}' == canonical_json({"b": "é", "a": [1, 2]})


def test_decision_ids_keep_the_batch_lane_for_batches() -> None:
    """Ordinary decision ids never fall in the batch lane; batch ids always do; both are
    version-4 UUIDs."""
    ordinary = [new_decision_id() for _ in range(2000)]
    assert BATCH_LANE not in {d.int % LANES for d in ordinary}
    assert len({d.int % LANES for d in ordinary}) == LANES - 1
    batch = [decision_id_in_lane(BATCH_LANE) for _ in range(50)]
    assert {d.int % LANES for d in batch} == {BATCH_LANE}
    assert {d.version for d in ordinary + batch} == {4}
    assert len(set(ordinary + batch)) == len(ordinary) + len(batch)
