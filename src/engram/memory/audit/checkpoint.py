"""Sealed checkpoints of the audit log, anchors taken outside the database, and the checks
verification makes with them.

A checkpoint is a statement about the whole log at the moment it was sealed: *the rows with
``seq`` up to* ``through_seq`` *are exactly these sixteen lane heads* (the seq and hash of
each lane's last row), *and, in seq order, their* ``(seq, row_hash)`` *pairs since the
previous checkpoint hash to* ``order_digest``. The sealer waits until no append holds a lane
before reading the heads, so no row with a smaller seq can commit later; a row that appears
below ``through_seq`` afterwards was put there by someone else. Each checkpoint's hash covers
its fields and the previous checkpoint's hash, so the checkpoints form a chain of their own.

An *anchor* is a checkpoint (or an export's lane heads) kept where the database's owner cannot
write; given back to verification it proves that nothing before it changed, even if the log
*and* its checkpoints were rewritten consistently since.

Pure: the SQL that seals and reads checkpoints is in :mod:`engram.memory.audit.log`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from engram.infra.db import Row

LANES = 16
CHECKPOINT_FORMAT = "engram-audit-checkpoint/1"


def genesis_hash(lane: int) -> bytes:
    """The hash each lane's first row links to (the migration seeds the same value)."""
    return hashlib.sha256(f"engram-audit-genesis:{lane}".encode()).digest()


def checkpoint_genesis() -> bytes:
    """The hash the first checkpoint links to."""
    return hashlib.sha256(b"engram-audit-checkpoint-genesis").digest()


def length_prefixed(fields: Sequence[str]) -> bytes:
    """Each field's UTF-8 bytes after their length (8 bytes, big-endian): an encoding in
    which no two different field lists give the same bytes."""
    parts = []
    for text in fields:
        data = text.encode()
        parts += [len(data).to_bytes(8, "big"), data]
    return b"".join(parts)


def seq_bytes(seq: int) -> bytes:
    """``seq`` as PostgreSQL's ``int8send`` writes it (8 bytes, big-endian, signed)."""
    return seq.to_bytes(8, "big", signed=True)


class OrderDigest:
    """SHA-256 over the ``(seq, row_hash)`` pairs of consecutive rows, in seq order."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.rows = 0

    def add(self, seq: int, row_hash: bytes) -> None:
        """Take in the next row."""
        self._hash.update(seq_bytes(seq) + row_hash)
        self.rows += 1

    def digest(self) -> bytes:
        """The digest of the rows taken in so far."""
        return self._hash.digest()


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One sealed checkpoint; ``lane_seqs[l]`` is 0 for a lane that had no row yet."""

    id: int
    sealed_at: datetime
    through_seq: int
    rows_sealed: int
    lane_seqs: tuple[int, ...]
    lane_hashes: tuple[bytes, ...]
    order_digest: bytes
    prev_hash: bytes
    checkpoint_hash: bytes

    def payload(self) -> bytes:
        """Every field but the two hashes, length-prefixed: what the checkpoint hash covers
        after the previous checkpoint's hash."""
        fields = [
            CHECKPOINT_FORMAT,
            str(self.id),
            self.sealed_at.astimezone(UTC).isoformat(),
            str(self.through_seq),
            str(self.rows_sealed),
            self.order_digest.hex(),
        ]
        for seq, lane_hash in zip(self.lane_seqs, self.lane_hashes, strict=True):
            fields += [str(seq), lane_hash.hex()]
        return length_prefixed(fields)

    def digest(self) -> bytes:
        """SHA-256 over ``prev_hash`` followed by :meth:`payload`."""
        return hashlib.sha256(self.prev_hash + self.payload()).digest()

    def to_json(self) -> dict[str, Any]:
        """The checkpoint as a JSON-ready object (hashes in hex): what to anchor."""
        return {
            "id": self.id,
            "sealed_at": self.sealed_at.astimezone(UTC).isoformat(),
            "through_seq": self.through_seq,
            "rows_sealed": self.rows_sealed,
            "lane_seqs": list(self.lane_seqs),
            "lane_hashes": [h.hex() for h in self.lane_hashes],
            "order_digest": self.order_digest.hex(),
            "prev_hash": self.prev_hash.hex(),
            "checkpoint_hash": self.checkpoint_hash.hex(),
        }


def seal_checkpoint(
    *,
    previous: Checkpoint | None,
    sealed_at: datetime,
    lane_seqs: Sequence[int],
    lane_hashes: Sequence[bytes],
    order: OrderDigest,
) -> Checkpoint:
    """The checkpoint that follows ``previous`` (or starts the chain), with its hash."""
    unsealed = Checkpoint(
        id=1 if previous is None else previous.id + 1,
        sealed_at=sealed_at,
        through_seq=max(lane_seqs),
        rows_sealed=order.rows,
        lane_seqs=tuple(lane_seqs),
        lane_hashes=tuple(lane_hashes),
        order_digest=order.digest(),
        prev_hash=checkpoint_genesis() if previous is None else previous.checkpoint_hash,
        checkpoint_hash=b"",
    )
    return replace(unsealed, checkpoint_hash=unsealed.digest())


def checkpoint_from_row(row: Row) -> Checkpoint:
    """Rebuild a checkpoint from a row selected with ``checkpoint_columns``."""
    return Checkpoint(
        id=int(row["id"]),
        sealed_at=row["sealed_at"],
        through_seq=int(row["through_seq"]),
        rows_sealed=int(row["rows_sealed"]),
        lane_seqs=tuple(int(s) for s in row["lane_seqs"]),
        lane_hashes=tuple(bytes(h) for h in row["lane_hashes"]),
        order_digest=bytes(row["order_digest"]),
        prev_hash=bytes(row["prev_hash"]),
        checkpoint_hash=bytes(row["checkpoint_hash"]),
    )


def checkpoint_from_json(value: dict[str, Any]) -> Checkpoint:
    """Rebuild a checkpoint from :meth:`Checkpoint.to_json`; ``ValueError`` if malformed."""
    try:
        return Checkpoint(
            id=int(value["id"]),
            sealed_at=datetime.fromisoformat(value["sealed_at"]),
            through_seq=int(value["through_seq"]),
            rows_sealed=int(value["rows_sealed"]),
            lane_seqs=tuple(int(s) for s in value["lane_seqs"]),
            lane_hashes=tuple(bytes.fromhex(h) for h in value["lane_hashes"]),
            order_digest=bytes.fromhex(value["order_digest"]),
            prev_hash=bytes.fromhex(value["prev_hash"]),
            checkpoint_hash=bytes.fromhex(value["checkpoint_hash"]),
        )
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"not a checkpoint: {exc}") from exc


@dataclass(frozen=True, slots=True)
class LaneHead:
    """A lane's last row as an export recorded it (``seq`` None: the lane was empty)."""

    lane: int
    seq: int | None
    row_hash: bytes


@dataclass(frozen=True, slots=True)
class Anchor:
    """What an operator kept outside the database: a checkpoint, lane heads, or both."""

    source: str
    checkpoint: Checkpoint | None = None
    lane_heads: tuple[LaneHead, ...] = ()


def parse_anchor(text: str, source: str) -> Anchor:
    """An anchor from the output of ``engram audit checkpoint --json`` or ``engram audit
    export`` (its last line); ``ValueError`` if the text holds neither."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"{source}: empty")
    try:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            try:
                value = json.loads(lines[-1])  # JSONL: an export ends with its heads line
            except json.JSONDecodeError as exc:
                raise ValueError(f"{source}: not JSON ({exc})") from exc
    except RecursionError:
        raise ValueError(f"{source}: JSON nested too deeply to read") from None
    if not isinstance(value, dict) or not ({"checkpoint", "lane_heads"} & set(value)):
        raise ValueError(f"{source}: holds neither a checkpoint nor lane heads")
    checkpoint = None
    if value.get("checkpoint") is not None:
        checkpoint = checkpoint_from_json(value["checkpoint"])
        if checkpoint.digest() != checkpoint.checkpoint_hash:
            raise ValueError(f"{source}: checkpoint {checkpoint.id} does not match its own hash")
    try:
        heads = tuple(_lane_head(h) for h in value.get("lane_heads") or ())
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{source}: malformed lane heads ({exc})") from exc
    return Anchor(source, checkpoint, heads)


def _lane_head(value: Any) -> LaneHead:
    """One exported lane head; ``ValueError`` unless its lane is one of the :data:`LANES`
    and its row number a positive integer (or null: an empty lane). A malformed anchor is
    refused, not reported as a log that does not verify."""
    lane, seq, digest = value["lane"], value["last_seq"], value["last_hash"]
    if not _whole(lane) or not 0 <= lane < LANES:
        raise ValueError(f"lane: an integer from 0 to {LANES - 1}")
    if seq is not None and (not _whole(seq) or seq < 1):
        raise ValueError("last_seq: a positive integer, or null for an empty lane")
    if not isinstance(digest, str):
        raise ValueError("last_hash: hexadecimal text")
    return LaneHead(lane, seq, bytes.fromhex(digest))


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Result of verifying the audit log.

    ``sealed_through_seq`` is the largest seq the checkpoints seal: rows up to it are fixed in
    content and order; rows after it only by their lane chains. ``checkpoint`` names the
    checkpoint a problem was found with, when there is one.
    """

    ok: bool
    rows_checked: int
    first_bad_seq: int | None = None
    first_bad_decision_id: UUID | None = None
    problem: str | None = None
    checkpoint: int | None = None
    checkpoints_checked: int = 0
    sealed_through_seq: int = 0
    legacy_rows: int = 0
    anchors_checked: int = 0


@dataclass(frozen=True, slots=True)
class Finding:
    """Something that does not hold: where (a row, a checkpoint, or both) and what."""

    problem: str
    seq: int | None = None
    checkpoint: int | None = None


def check_chain(checkpoints: Sequence[Checkpoint]) -> Finding | None:
    """The checkpoints' own chain: numbered 1, 2, …, each hash recomputed and linked to the
    previous one, and heads that only move forward."""
    previous: Checkpoint | None = None
    for checkpoint in checkpoints:
        expected_id = 1 if previous is None else previous.id + 1
        link = checkpoint_genesis() if previous is None else previous.checkpoint_hash
        problem = None
        if checkpoint.id != expected_id:
            problem = f"checkpoint {expected_id} is missing (checkpoints were removed)"
        elif checkpoint.prev_hash != link:
            problem = "does not link to the previous checkpoint (checkpoints were replaced)"
        elif checkpoint.digest() != checkpoint.checkpoint_hash:
            problem = "its content does not match its hash (the checkpoint was edited)"
        else:
            problem = _heads_problem(checkpoint, previous)
        if problem is not None:
            return Finding(f"checkpoint {checkpoint.id}: {problem}", checkpoint=checkpoint.id)
        previous = checkpoint
    return None


def _heads_problem(checkpoint: Checkpoint, previous: Checkpoint | None) -> str | None:
    if len(checkpoint.lane_seqs) != LANES or checkpoint.through_seq != max(checkpoint.lane_seqs):
        return "its lane heads do not add up to its through_seq (the checkpoint was edited)"
    for lane, (seq, lane_hash) in enumerate(
        zip(checkpoint.lane_seqs, checkpoint.lane_hashes, strict=True)
    ):
        if seq == 0 and lane_hash != genesis_hash(lane):
            return f"lane {lane} has no row but a hash other than its genesis"
        if previous is None:
            continue
        before = (previous.lane_seqs[lane], previous.lane_hashes[lane])
        if (seq, lane_hash) != before and seq <= previous.through_seq:
            return f"lane {lane}'s head moved inside history the previous checkpoint sealed"
    return None


@dataclass
class Coverage:
    """Checks each row, met in seq order, against the checkpoint that covers it.

    Checkpoint ``k`` covers the rows with ``through_seq(k-1) < seq <= through_seq(k)``. Each
    of them must lie at or before the head ``k`` sealed for its lane (or it was slipped into
    sealed history), the row at each sealed head must be the one sealed, and the range's
    ``(seq, row_hash)`` pairs must hash to the sealed order digest.
    """

    checkpoints: Sequence[Checkpoint]
    _index: int = field(default=0, init=False)
    _lower: int = field(default=0, init=False)
    _order: OrderDigest = field(default_factory=OrderDigest, init=False)
    _heads_seen: set[int] = field(default_factory=set, init=False)

    @property
    def sealed_through(self) -> int:
        """The largest seq the checkpoints seal (0 without checkpoints)."""
        return self.checkpoints[-1].through_seq if self.checkpoints else 0

    def add(self, seq: int, lane: int, row_hash: bytes) -> Finding | None:
        """Check the next row."""
        while self._index < len(self.checkpoints) and seq > self._current.through_seq:
            finding = self._close()
            if finding is not None:
                return finding
        if self._index == len(self.checkpoints):
            return None
        current = self._current
        head = current.lane_seqs[lane]
        if seq > head:
            return Finding(
                f"lies in history checkpoint {current.id} sealed (through seq "
                f"{current.through_seq}) but after the head it sealed for lane {lane} (seq "
                f"{head}): the row was inserted after sealing",
                seq=seq,
                checkpoint=current.id,
            )
        if seq == head:
            if row_hash != current.lane_hashes[lane]:
                return Finding(
                    f"is not the row checkpoint {current.id} sealed as the head of lane {lane} "
                    "(the lane was rewritten)",
                    seq=seq,
                    checkpoint=current.id,
                )
            self._heads_seen.add(lane)
        self._order.add(seq, row_hash)
        return None

    def finish(self) -> Finding | None:
        """After the last row: close every checkpoint not yet closed."""
        while self._index < len(self.checkpoints):
            finding = self._close()
            if finding is not None:
                return finding
        return None

    @property
    def _current(self) -> Checkpoint:
        return self.checkpoints[self._index]

    def _close(self) -> Finding | None:
        current = self._current
        for lane, seq in enumerate(current.lane_seqs):
            if seq > self._lower and lane not in self._heads_seen:
                return Finding(
                    f"the row checkpoint {current.id} sealed as the head of lane {lane} (seq "
                    f"{seq}) is gone (rows were cut off or the lane rewritten)",
                    seq=seq,
                    checkpoint=current.id,
                )
        if (self._order.rows, self._order.digest()) != (
            current.rows_sealed,
            current.order_digest,
        ):
            return Finding(
                f"the rows checkpoint {current.id} sealed (seq {self._lower + 1} to "
                f"{current.through_seq}) were removed, added, replaced or reordered: "
                f"{self._order.rows} rows now, {current.rows_sealed} sealed",
                checkpoint=current.id,
            )
        self._lower = current.through_seq
        self._index += 1
        self._order = OrderDigest()
        self._heads_seen = set()
        return None
