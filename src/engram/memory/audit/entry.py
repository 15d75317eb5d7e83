"""The audit row's format: the stored fields of one Gate decision and the hash that chains it.

A row's hash covers the previous row's hash of its lane, its ``seq`` (from format 2) and every
stored field, length-prefixed, with the JSON columns taken as the exact text stored (``json``
keeps text as written). ``librarian_audit.hash_version`` records each row's format: rows
written before migration 0008 are format 1, whose hash does not cover ``seq``.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from engram.infra.db import Row
from engram.memory.audit.checkpoint import LANES, length_prefixed, seq_bytes
from engram.memory.types import AccessLevel, CallerIdentity, MemoryType, TrustLevel

#: The hash format appends write (format 1, before migration 0008, did not cover ``seq``).
HASH_VERSION = 2


def caller_json(caller: CallerIdentity) -> dict[str, Any]:
    """The caller as recorded in the audit log (no secrets: identities carry none)."""
    return {
        "agent_id": caller.agent_id,
        "trust_level": caller.trust_level.value,
        "allowed_types": sorted(t.value for t in caller.allowed_types),
        "max_write_level": caller.max_write_level.value,
        "max_read_level": caller.max_read_level.value,
        "writes_per_minute": caller.writes_per_minute,
    }


def caller_from_json(data: Mapping[str, Any]) -> CallerIdentity:
    """The caller identity an audit row recorded (the inverse of :func:`caller_json`);
    ``ValueError``, ``KeyError`` or ``TypeError`` when ``data`` is not of that shape."""
    if not isinstance(data, Mapping):
        raise ValueError("the recorded caller is not an object")
    rate = data.get("writes_per_minute")
    return CallerIdentity(
        agent_id=data["agent_id"],
        trust_level=TrustLevel(data["trust_level"]),
        allowed_types=frozenset(MemoryType(t) for t in data["allowed_types"]),
        max_write_level=AccessLevel(data["max_write_level"]),
        max_read_level=AccessLevel(data["max_read_level"]),
        writes_per_minute=None if rate is None else float(rate),
    )


def canonical_json(value: Any) -> str:
    """The one JSON text engram writes for a value: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One Gate decision as it is stored (JSON fields already canonical text)."""

    decision_id: UUID
    request_id: str | None
    occurred_at: datetime
    action: str
    decision: str
    outcome: str
    decision_type: str
    reason: str
    agent_id: str
    caller: str
    record_id: UUID | None
    version_id: UUID | None
    input_snapshot: str
    layer1_checks: str
    layer2_decision: str | None
    decision_source: str
    duration_ms: float

    @property
    def lane(self) -> int:
        """The chain lane this entry belongs to."""
        return self.decision_id.int % LANES

    def _fields(self) -> tuple[str, ...]:
        return (
            str(self.decision_id),
            self.request_id or "",
            self.occurred_at.astimezone(UTC).isoformat(),
            self.action,
            self.decision,
            self.outcome,
            self.decision_type,
            self.reason,
            self.agent_id,
            self.caller,
            "" if self.record_id is None else str(self.record_id),
            "" if self.version_id is None else str(self.version_id),
            self.input_snapshot,
            self.layer1_checks,
            "" if self.layer2_decision is None else self.layer2_decision,
            self.decision_source,
            repr(float(self.duration_ms)),
            str(self.lane),
        )

    def payload(self, version: int = HASH_VERSION) -> bytes:
        """Every field, each length-prefixed: what the row hash covers after the previous
        row's hash (and, from format 2, its ``seq``). Format 2 starts with the format's
        number."""
        fields = self._fields()
        if version == 1:
            return length_prefixed(fields)
        return length_prefixed((str(version), *fields))

    def payload_around_occurred_at(self) -> tuple[bytes, bytes]:
        """The current format's :meth:`payload` before and after the ``occurred_at`` field,
        for a statement that stamps the time itself (the Gate's one-statement write, which
        writes the middle field as :meth:`datetime.isoformat` does, in UTC)."""
        fields = (str(HASH_VERSION), *self._fields())
        return length_prefixed(fields[:3]), length_prefixed(fields[4:])

    def digest(self, prev_hash: bytes, *, seq: int, version: int = HASH_VERSION) -> bytes:
        """The row hash: format 2 is SHA-256 over the previous hash, ``seq`` (8 bytes,
        big-endian) and :meth:`payload` (appending computes the same in SQL, ``sha256(prev_hash
        || int8send(seq) || payload)``, where the lane's head is locked); format 1 had no
        ``seq``."""
        if version == 1:
            return hashlib.sha256(prev_hash + self.payload(1)).digest()
        if version != HASH_VERSION:
            raise ValueError(f"unknown audit hash format {version}")
        return hashlib.sha256(prev_hash + seq_bytes(seq) + self.payload(version)).digest()


def entry_from_row(row: Row) -> AuditEntry:
    """Rebuild the stored entry from a row selected with ``audit_columns``."""
    return AuditEntry(
        decision_id=row["decision_id"],
        request_id=row["request_id"],
        occurred_at=row["occurred_at"],
        action=row["action"],
        decision=row["decision"],
        outcome=row["outcome"],
        decision_type=row["decision_type"],
        reason=row["reason"],
        agent_id=row["agent_id"],
        caller=row["caller"],
        record_id=row["record_id"],
        version_id=row["version_id"],
        input_snapshot=row["input_snapshot"],
        layer1_checks=row["layer1_checks"],
        layer2_decision=row["layer2_decision"],
        decision_source=row["decision_source"],
        duration_ms=row["duration_ms"],
    )


_JSON_COLUMNS = ("caller", "input_snapshot", "layer1_checks", "layer2_decision")


def row_json(row: Row) -> dict[str, Any]:
    """A stored row as a JSON-ready object: JSON columns parsed, hashes in hex, times in ISO.

    The stored text of the JSON columns is what the hash covers; parsing it here is for
    reading only (verification always uses the stored text).
    """
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key in _JSON_COLUMNS:
            out[key] = None if value is None else json.loads(value)
        elif isinstance(value, bytes | bytearray | memoryview):
            out[key] = bytes(value).hex()
        elif isinstance(value, datetime):
            out[key] = value.isoformat()
        elif isinstance(value, UUID):
            out[key] = str(value)
        else:
            out[key] = value
    return out


#: The lane kept for decisions committed together in one long transaction (consolidation's
#: batches): every other decision takes one of the other lanes, so an agent's write never
#: waits for a batch to commit to append its audit row.
BATCH_LANE = LANES - 1


def decision_id_in_lane(lane: int) -> UUID:
    """A fresh random decision id whose row falls in ``lane`` (a version-4 UUID with its
    lowest bits set)."""
    value = uuid.uuid4().int
    return UUID(int=value - value % LANES + lane % LANES)


def new_decision_id() -> UUID:
    """A fresh random decision id in any lane but :data:`BATCH_LANE`."""
    value = uuid.uuid4().int
    return UUID(int=value - value % LANES + value % (LANES - 1))
