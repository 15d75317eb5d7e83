"""Helpers of the audit tests: entries appended directly, and an attacker's row surgery."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import asyncpg

from engram import Kernel
from engram.memory.audit.log import AuditEntry

# Every column of a row but seq, as the hash reads them (JSON columns as their stored text).
COLUMNS = (
    "decision_id, request_id, occurred_at, action, decision, outcome, decision_type, reason, "
    "agent_id, caller::text AS caller, record_id, version_id, input_snapshot::text AS "
    "input_snapshot, layer1_checks::text AS layer1_checks, layer2_decision::text AS "
    "layer2_decision, decision_source, duration_ms, lane, prev_hash, row_hash, hash_version"
)
_ASSIGN = (
    "decision_id = $2, request_id = $3, occurred_at = $4, action = $5, decision = $6, "
    "outcome = $7, decision_type = $8, reason = $9, agent_id = $10, caller = $11::json, "
    "record_id = $12, version_id = $13, input_snapshot = $14::json, layer1_checks = $15::json, "
    "layer2_decision = $16::json, decision_source = $17, duration_ms = $18, lane = $19, "
    "prev_hash = $20, row_hash = $21, hash_version = $22"
)


def entry(n: int, *, lane: int) -> AuditEntry:
    """A rejected CREATE whose decision id falls in ``lane``."""
    return AuditEntry(
        decision_id=uuid.UUID(int=uuid.uuid4().int // 16 * 16 + lane),
        request_id=f"direct-{uuid.uuid4().hex}",
        occurred_at=datetime.now(UTC),
        action="CREATE",
        decision="rejected",
        outcome="none",
        decision_type="external",
        reason=f"appended directly {n}",
        agent_id="tester",
        caller='{"agent_id":"tester"}',
        record_id=None,
        version_id=None,
        input_snapshot=f'{{"n":{n}}}',
        layer1_checks="[]",
        layer2_decision=None,
        decision_source="layer1",
        duration_ms=float(n),
    )


async def append(kernel: Kernel, audit_entry: AuditEntry) -> int:
    """Append one entry in its own transaction; its seq."""
    async with kernel.db.transaction() as conn:
        return await kernel.audit.append(conn, audit_entry)


async def swap_all_but_seq(owner: asyncpg.Connection, first: int, second: int) -> None:
    """Exchange every column but seq (hashes included) between two rows, as the owner with
    the append-only triggers disabled."""
    select = f"SELECT {COLUMNS} FROM engram.librarian_audit WHERE seq = $1"
    a, b = await owner.fetchrow(select, first), await owner.fetchrow(select, second)
    assert a is not None
    assert b is not None
    await owner.execute(
        "UPDATE engram.librarian_audit SET decision_id = gen_random_uuid(), request_id = NULL "
        "WHERE seq = $1",
        first,
    )
    update = f"UPDATE engram.librarian_audit SET {_ASSIGN} WHERE seq = $1"
    await owner.execute(update, second, *a.values())
    await owner.execute(update, first, *b.values())
