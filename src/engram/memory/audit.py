"""The audit log: one hash-chained row per Gate decision, and its verification.

Rows are chained in 16 lanes (``lane = decision_id mod 16``). Appending locks only the lane's
head row, so concurrent evaluations seldom wait for each other, and within a lane the chain
order is the commit order. Each row's hash covers the previous row's hash of its lane and every
stored field, length-prefixed, with the JSON columns taken as the exact text stored (``json``
keeps text as written). :meth:`AuditLog.verify` walks all rows in ``seq`` order and names the
first one whose hash or link does not hold, then checks each lane's tip against
``audit_chain_heads`` (rows cut off the end of a lane).

What this does not catch: an attacker with the owner role who rewrites a lane from the
tampered row onwards *and* its head. Exporting the lane heads elsewhere from time to time
(``engram audit export``) closes that gap.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from engram.infra.db import Connection, DatabaseAdapter, Row
from engram.infra.sql import load_queries

SQL = load_queries("engram.memory.sql", "audit.sql")
LANES = 16


def canonical_json(value: Any) -> str:
    """The one JSON text engram writes for a value: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def genesis_hash(lane: int) -> bytes:
    """The hash each lane's first row links to (the migration seeds the same value)."""
    return hashlib.sha256(f"engram-audit-genesis:{lane}".encode()).digest()


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

    def payload(self) -> bytes:
        """Every field, each length-prefixed: what the row hash covers after the previous
        row's hash."""
        fields = (
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
        parts = []
        for text in fields:
            data = text.encode()
            parts += [len(data).to_bytes(8, "big"), data]
        return b"".join(parts)

    def digest(self, prev_hash: bytes) -> bytes:
        """SHA-256 over the previous hash followed by :meth:`payload` (appending computes the
        same in SQL, ``sha256(prev_hash || payload)``, where the lane's head is locked)."""
        return hashlib.sha256(prev_hash + self.payload()).digest()


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


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Result of verifying the audit log."""

    ok: bool
    rows_checked: int
    first_bad_seq: int | None = None
    first_bad_decision_id: UUID | None = None
    problem: str | None = None


class AuditLog:
    """Appends chained entries and verifies the chain."""

    def __init__(self, db: DatabaseAdapter) -> None:
        self._db = db

    async def append(self, conn: Connection, entry: AuditEntry) -> int:
        """Chain and insert ``entry`` inside the caller's transaction; returns its ``seq``.

        Call it last in the transaction: the lane stays locked until commit.
        """
        seq = await conn.fetchval(
            SQL["append_entry"],
            entry.decision_id,
            entry.request_id,
            entry.occurred_at,
            entry.action,
            entry.decision,
            entry.outcome,
            entry.decision_type,
            entry.reason,
            entry.agent_id,
            entry.caller,
            entry.record_id,
            entry.version_id,
            entry.input_snapshot,
            entry.layer1_checks,
            entry.layer2_decision,
            entry.decision_source,
            entry.duration_ms,
            entry.lane,
            entry.payload(),
        )
        return int(seq)

    async def by_request(self, request_id: str) -> AuditEntry | None:
        """The entry written for a request id, if any (idempotent retries look here)."""
        row = await self._db.fetchrow(SQL["by_request"], request_id)
        return None if row is None else entry_from_row(row)

    async def by_decision(self, decision_id: UUID) -> AuditEntry | None:
        """The entry of one decision."""
        row = await self._db.fetchrow(SQL["by_decision"], decision_id)
        return None if row is None else entry_from_row(row)

    async def count(self) -> int:
        """Number of entries."""
        return int(await self._db.fetchval(SQL["count_entries"]))

    async def rows(self, *, batch: int = 2000) -> AsyncIterator[Row]:
        """Every stored row in ``seq`` order, fetched in pages."""
        last = 0
        while True:
            page = await self._db.fetch(SQL["page_after"], last, batch)
            if not page:
                return
            for row in page:
                yield row
            last = int(page[-1]["seq"])

    async def search(
        self,
        *,
        after_seq: int = 0,
        since: datetime | None = None,
        until: datetime | None = None,
        agent_id: str | None = None,
        decision: str | None = None,
        action: str | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """Entries matching the filters (as :func:`row_json`), in ``seq`` order after
        ``after_seq`` (a cursor). ``since`` is inclusive and ``until`` exclusive, on
        ``occurred_at``."""
        rows = await self._db.fetch(
            SQL["search"], after_seq, since, until, agent_id, decision, action, limit
        )
        return [row_json(row) for row in rows]

    async def verify(
        self, *, batch: int = 2000, progress: Callable[[int], None] | None = None
    ) -> VerifyReport:
        """Recompute every hash and link; name the first row that fails. ``progress`` is told
        how many rows have been checked so far, once per ``batch``."""
        expected = {lane: genesis_hash(lane) for lane in range(LANES)}
        tips: dict[int, tuple[int, bytes]] = {}
        checked = 0
        async for row in self.rows(batch=batch):
            checked += 1
            if progress is not None and checked % batch == 0:
                progress(checked)
            seq, lane = int(row["seq"]), int(row["lane"])
            prev_hash, row_hash = bytes(row["prev_hash"]), bytes(row["row_hash"])
            problem = None
            if lane not in expected:
                problem = f"lane {lane} does not exist"
            elif prev_hash != expected[lane]:
                problem = "does not link to the previous row of its lane (a row was removed, "
                problem += "inserted or reordered before it)"
            elif entry_from_row(row).digest(prev_hash) != row_hash:
                problem = "its content does not match its hash (the row was edited)"
            if problem is not None:
                return VerifyReport(
                    ok=False,
                    rows_checked=checked,
                    first_bad_seq=seq,
                    first_bad_decision_id=row["decision_id"],
                    problem=problem,
                )
            expected[lane] = row_hash
            tips[lane] = (seq, row_hash)
        heads = await self._db.fetch(SQL["lane_heads"])
        for head in heads:
            lane = int(head["lane"])
            tip = tips.get(lane)
            stored = (head["last_seq"], bytes(head["last_hash"]))
            if tip is None and stored[0] is None and stored[1] == genesis_hash(lane):
                continue
            if tip is None or (tip[0], tip[1]) != stored:
                return VerifyReport(
                    ok=False,
                    rows_checked=checked,
                    first_bad_seq=None if tip is None else tip[0],
                    problem=f"lane {lane} ends before its recorded head (rows cut off its end)",
                )
        return VerifyReport(ok=True, rows_checked=checked)
