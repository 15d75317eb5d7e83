"""Tamper evidence: changes made to the audit log as its owner are found by verify()."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace

import asyncpg
import pytest

from engram import Kernel
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import STANDARD, belief, create

CALLER = replace(STANDARD, writes_per_minute=1_000_000)


@pytest.fixture
async def audited(kernel: Kernel) -> Kernel:
    """A kernel whose audit log holds 40 decisions (approved and rejected)."""
    for n in range(32):
        await kernel.gate.evaluate(create(belief(f"Host {n} serves region {n % 5}."), CALLER))
    for n in range(8):
        await kernel.gate.evaluate(create(belief(f"Always reboot host {n}."), CALLER))
    return kernel


@pytest.fixture
async def owner(database: ScratchDatabase) -> AsyncIterator[asyncpg.Connection]:
    """A connection as the owner role that has taken down the walls: the append-only
    triggers are disabled and the foreign keys into the log dropped (a determined attacker)."""
    conn = await asyncpg.connect(database.admin_url)
    await conn.execute("SET ROLE engram_owner")
    await conn.execute("ALTER TABLE engram.librarian_audit DISABLE TRIGGER USER")
    await conn.execute("ALTER TABLE engram.memories DROP CONSTRAINT memories_gate_decision_fkey")
    await conn.execute(
        "ALTER TABLE engram.memory_edges DROP CONSTRAINT memory_edges_decision_id_fkey"
    )
    yield conn
    await conn.close()


async def _lane_rows(owner: asyncpg.Connection) -> list[asyncpg.Record]:
    """Rows of the busiest lane, in chain order."""
    lane = await owner.fetchval(
        "SELECT lane FROM engram.librarian_audit GROUP BY lane ORDER BY count(*) DESC LIMIT 1"
    )
    return await owner.fetch(
        "SELECT seq, decision_id FROM engram.librarian_audit WHERE lane = $1 ORDER BY seq", lane
    )


async def test_an_untouched_log_verifies(audited: Kernel) -> None:
    """Forty honest decisions verify end to end."""
    report = await audited.audit.verify()
    assert (True, 40, None) == (report.ok, report.rows_checked, report.first_bad_seq)


async def test_an_edited_row_is_named(audited: Kernel, owner: asyncpg.Connection) -> None:
    """Rewriting one row's reason makes verify name exactly that row."""
    target = await owner.fetchval("SELECT seq FROM engram.librarian_audit ORDER BY seq OFFSET 17")
    await owner.execute(
        "UPDATE engram.librarian_audit SET reason = 'approved by the board' WHERE seq = $1", target
    )
    report = await audited.audit.verify()
    assert (False, target) == (report.ok, report.first_bad_seq)
    assert "edited" in (report.problem or "")


async def test_an_edited_json_field_is_named(audited: Kernel, owner: asyncpg.Connection) -> None:
    """Changing the input snapshot (even by whitespace) breaks the row's hash."""
    target = await owner.fetchval("SELECT seq FROM engram.librarian_audit ORDER BY seq OFFSET 3")
    await owner.execute(
        "UPDATE engram.librarian_audit SET input_snapshot = (input_snapshot::text || ' ')::json "
        "WHERE seq = $1",
        target,
    )
    report = await audited.audit.verify()
    assert (False, target) == (report.ok, report.first_bad_seq)


async def test_a_deleted_row_is_found_at_the_next_row_of_its_lane(
    audited: Kernel, owner: asyncpg.Connection
) -> None:
    """Deleting a row breaks the link of the row that followed it in its lane."""
    rows = await _lane_rows(owner)
    assert len(rows) >= 3
    await owner.execute("DELETE FROM engram.librarian_audit WHERE seq = $1", rows[1]["seq"])
    report = await audited.audit.verify()
    assert (False, rows[2]["seq"]) == (report.ok, report.first_bad_seq)
    assert "link" in (report.problem or "")


async def test_a_row_cut_off_the_end_of_a_lane_is_found(
    audited: Kernel, owner: asyncpg.Connection
) -> None:
    """Deleting the newest row of a lane leaves the lane short of its recorded head."""
    rows = await _lane_rows(owner)
    await owner.execute("DELETE FROM engram.librarian_audit WHERE seq = $1", rows[-1]["seq"])
    report = await audited.audit.verify()
    assert not report.ok
    assert rows[-2]["seq"] == report.first_bad_seq
    assert "cut off" in (report.problem or "")


async def test_an_inserted_row_is_named(audited: Kernel, owner: asyncpg.Connection) -> None:
    """A forged row that was never chained is named as the first bad row."""
    forged = await owner.fetchval(
        """
        INSERT INTO engram.librarian_audit
            (decision_id, request_id, occurred_at, action, decision, outcome, decision_type,
             reason, agent_id, caller, input_snapshot, layer1_checks, decision_source,
             duration_ms, lane, prev_hash, row_hash)
        VALUES ($1, 'forged', now(), 'CREATE', 'approved', 'created', 'external', 'ok',
                'intruder', '{}', '{}', '[]', 'heuristic@1', 1, 3, $2, $2)
        RETURNING seq
        """,
        uuid.uuid4(),
        hashlib.sha256(b"forged").digest(),
    )
    report = await audited.audit.verify()
    assert (False, forged) == (report.ok, report.first_bad_seq)


async def test_swapped_rows_are_found(audited: Kernel, owner: asyncpg.Connection) -> None:
    """Exchanging the contents of two rows (hashes included) is found at the first of them."""
    rows = await _lane_rows(owner)
    first, second = rows[0]["seq"], rows[1]["seq"]
    columns = "reason, agent_id, input_snapshot, row_hash, prev_hash, decision_id"
    a = await owner.fetchrow(f"SELECT {columns} FROM engram.librarian_audit WHERE seq = $1", first)
    b = await owner.fetchrow(f"SELECT {columns} FROM engram.librarian_audit WHERE seq = $1", second)
    assert a is not None
    assert b is not None
    await owner.execute(
        "UPDATE engram.librarian_audit SET decision_id = gen_random_uuid() WHERE seq = $1", first
    )
    for seq, row in ((second, a), (first, b)):
        await owner.execute(
            "UPDATE engram.librarian_audit SET reason = $2, agent_id = $3, input_snapshot = $4, "
            "row_hash = $5, prev_hash = $6, decision_id = $7 WHERE seq = $1",
            seq,
            *row.values(),
        )
    report = await audited.audit.verify()
    assert (False, first) == (report.ok, report.first_bad_seq)
