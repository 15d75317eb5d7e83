"""Sealed audit checkpoints: their hash, their chain, anchors, and the row coverage check."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from engram.memory.audit.checkpoint import (
    Checkpoint,
    Coverage,
    OrderDigest,
    check_chain,
    checkpoint_from_json,
    genesis_hash,
    parse_anchor,
    seal_checkpoint,
)

T = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def _hash(seq: int) -> bytes:
    return hashlib.sha256(str(seq).encode()).digest()


def _rows(lanes: dict[int, int]) -> list[tuple[int, int, bytes]]:
    """(seq, lane, row_hash) for seqs 1.. in order, lanes given per seq."""
    return [(seq, lanes[seq], _hash(seq)) for seq in sorted(lanes)]


def _seal(previous: Checkpoint | None, rows: list[tuple[int, int, bytes]]) -> Checkpoint:
    """The checkpoint an honest sealer writes after ``rows`` (all rows so far)."""
    seqs = [0] * 16
    hashes = [genesis_hash(lane) for lane in range(16)]
    for seq, lane, row_hash in rows:
        seqs[lane], hashes[lane] = seq, row_hash
    lower = 0 if previous is None else previous.through_seq
    order = OrderDigest()
    for seq, _, row_hash in rows:
        if seq > lower:
            order.add(seq, row_hash)
    return seal_checkpoint(
        previous=previous, sealed_at=T, lane_seqs=seqs, lane_hashes=hashes, order=order
    )


ROWS = _rows({1: 0, 2: 1, 3: 0, 4: 2, 5: 1, 6: 3})
FIRST = _seal(None, ROWS[:4])
SECOND = _seal(FIRST, ROWS)


def _walk(checkpoints: list[Checkpoint], rows: list[tuple[int, int, bytes]]) -> str | None:
    coverage = Coverage(checkpoints)
    for row in rows:
        finding = coverage.add(*row)
        if finding is not None:
            return finding.problem
    finding = coverage.finish()
    return None if finding is None else finding.problem


def test_a_checkpoint_hash_covers_every_field_and_the_previous_checkpoint() -> None:
    """Changing any field of a checkpoint, or what it links to, changes its hash."""
    assert SECOND.checkpoint_hash == SECOND.digest()
    assert FIRST.checkpoint_hash == SECOND.prev_hash
    changes = {
        "id": 3,
        "sealed_at": T.replace(second=1),
        "through_seq": 7,
        "rows_sealed": 1,
        "lane_seqs": (9, *SECOND.lane_seqs[1:]),
        "lane_hashes": (_hash(9), *SECOND.lane_hashes[1:]),
        "order_digest": _hash(0),
        "prev_hash": _hash(1),
    }
    for field, value in changes.items():
        assert SECOND.checkpoint_hash != replace(SECOND, **{field: value}).digest(), field


def test_honest_checkpoints_cover_every_row() -> None:
    """Rows in seq order match the checkpoints that sealed them, rows after the last too."""
    assert (2, 4, 6) == (SECOND.rows_sealed, FIRST.through_seq, SECOND.through_seq)
    assert check_chain([FIRST, SECOND]) is None
    assert _walk([FIRST, SECOND], [*ROWS, (7, 5, _hash(7))]) is None


def test_the_chain_of_checkpoints_names_a_gap_an_edit_and_a_head_moved_back() -> None:
    """A removed checkpoint, an edited one and a lane head moved into sealed history are
    each named."""
    missing = check_chain([SECOND])
    edited = check_chain([FIRST, replace(SECOND, rows_sealed=5)])
    moved = _seal(FIRST, [*ROWS[:4], (3, 3, _hash(3))])
    assert missing is not None
    assert "checkpoint 1 is missing" in missing.problem
    assert edited is not None
    assert (2, True) == (edited.checkpoint, "edited" in edited.problem)
    behind = check_chain([FIRST, moved])
    assert behind is not None
    assert "moved inside history" in behind.problem


def test_coverage_names_a_slipped_row_a_lost_head_and_a_reordering() -> None:
    """A row added below a checkpoint past its lane's head, a sealed head that is gone, and
    two sealed rows whose order changed are each found."""
    with_gap = _rows({1: 0, 2: 1, 4: 2})  # seq 3 was drawn by an append that rolled back
    slipped = [*with_gap[:2], (3, 0, _hash(3)), with_gap[2]]
    assert "inserted after sealing" in (_walk([_seal(None, with_gap)], slipped) or "")
    assert "is gone" in (_walk([FIRST], ROWS[:3]) or "")
    rows = _rows({1: 0, 2: 1, 3: 0, 4: 1, 5: 2})
    reordered = [(1, 1, rows[1][2]), (2, 0, rows[0][2]), *rows[2:]]  # no head among them
    assert "reordered" in (_walk([_seal(None, rows)], reordered) or "")


def test_an_anchor_is_read_from_a_checkpoint_or_an_export() -> None:
    """`audit checkpoint --json` output, pretty-printed or not, and an export's last line are
    anchors; text holding neither, or a checkpoint not matching its own hash, is refused."""
    document = {"checkpoint": SECOND.to_json()}
    heads = {"lane_heads": [{"lane": 0, "last_seq": 3, "last_hash": _hash(3).hex()}]}
    assert SECOND == parse_anchor(json.dumps(document, indent=2), "a.json").checkpoint
    export = "\n".join([json.dumps({"seq": 1}), json.dumps({**document, **heads})])
    anchor = parse_anchor(export, "nov.jsonl")
    assert (SECOND, 3) == (anchor.checkpoint, anchor.lane_heads[0].seq)
    assert SECOND == checkpoint_from_json(SECOND.to_json())
    forged = {"checkpoint": {**SECOND.to_json(), "rows_sealed": 9}}
    for text, message in [
        ("", "empty"),
        ("not json", "not JSON"),
        ('{"seq": 1}', "neither"),
        (json.dumps(forged), "does not match its own hash"),
        ('{"checkpoint": {"id": 1}}', "not a checkpoint"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_anchor(text, "x")
