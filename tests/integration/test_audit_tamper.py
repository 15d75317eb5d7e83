"""Tamper evidence: changes made to the audit log as its owner are found by verify()."""

from __future__ import annotations

import contextlib
import hashlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace

import asyncpg
import pytest

from engram import Kernel
from engram.memory.audit.checkpoint import Anchor, parse_anchor
from engram.memory.audit.log import entry_from_row, genesis_hash
from tests.conftest import ScratchDatabase
from tests.integration.audit_helpers import COLUMNS, append, entry, swap_all_but_seq
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
    await conn.execute("ALTER TABLE engram.audit_checkpoints DISABLE TRIGGER USER")
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
        "SELECT seq, decision_id, lane FROM engram.librarian_audit WHERE lane = $1 ORDER BY seq",
        lane,
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
                'intruder', '{}', '{}', '[]', 'heuristic@2', 1, 3, $2, $2)
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


async def test_swapped_rows_of_two_lanes_are_named(
    audited: Kernel, owner: asyncpg.Connection
) -> None:
    """Exchanging two whole rows adjacent in the log but in different lanes, neither the last
    of its lane (every column, hashes included; seq kept), is named at the first of them:
    the hash covers seq."""
    seqs = [await append(audited, entry(n, lane=1 + n % 2)) for n in range(4)]
    await swap_all_but_seq(owner, seqs[0], seqs[1])
    report = await audited.audit.verify()
    assert (False, seqs[0]) == (report.ok, report.first_bad_seq)
    assert "position" in (report.problem or "")


async def test_a_row_slipped_into_sealed_history_is_named(
    audited: Kernel, owner: asyncpg.Connection
) -> None:
    """A forged row chained to the end of its lane, with the lane's head moved, at a seq the
    newest checkpoint already sealed (a gap left by a rolled-back append) is named."""
    gap = await _rolled_back_append(audited)
    for n in range(3):
        await append(audited, entry(n, lane=15))
    await audited.audit.seal()
    lane = await owner.fetchval(
        "SELECT lane FROM engram.audit_chain_heads WHERE last_seq < $1 AND lane <> 15 "
        "ORDER BY lane LIMIT 1",
        gap,
    )
    await _forge_append(owner, lane, gap)
    report = await audited.audit.verify()
    assert (False, gap, 1) == (report.ok, report.first_bad_seq, report.checkpoint)
    assert "inserted after sealing" in (report.problem or "")


async def test_a_lane_rewritten_with_its_head_is_caught_by_the_checkpoint(
    audited: Kernel, owner: asyncpg.Connection
) -> None:
    """Editing a sealed row and recomputing every later hash of its lane and its head (no
    link breaks) is caught at the head the checkpoint sealed for that lane."""
    await audited.audit.seal()
    rows = await _lane_rows(owner)
    await owner.execute(
        "UPDATE engram.librarian_audit SET reason = 'approved by the board' WHERE seq = $1",
        rows[1]["seq"],
    )
    await _rechain(owner, rows[1]["lane"])
    report = await audited.audit.verify()
    assert (False, rows[-1]["seq"], 1) == (report.ok, report.first_bad_seq, report.checkpoint)
    assert "rewritten" in (report.problem or "")


async def test_a_tail_cut_with_its_head_rewound_is_caught_by_the_checkpoint(
    audited: Kernel, owner: asyncpg.Connection
) -> None:
    """Deleting the newest rows of a lane and moving its head back to the row before them
    leaves every chain whole, but the row the checkpoint sealed as the lane's head is gone."""
    await audited.audit.seal()
    rows = await _lane_rows(owner)
    await _cut_tail(owner, rows, keep=len(rows) - 2)
    report = await audited.audit.verify()
    assert (False, rows[-1]["seq"], 1) == (report.ok, report.first_bad_seq, report.checkpoint)
    assert "gone" in (report.problem or "")


async def test_a_tail_cut_with_head_and_checkpoints_rewound_is_caught_by_an_anchor(
    audited: Kernel, owner: asyncpg.Connection
) -> None:
    """A tail cut whose attacker also removes the checkpoints and seals new ones verifies
    alone, but not against the checkpoint an export anchored outside the database."""
    anchor = await _checkpoint_anchor(audited)
    rows = await _lane_rows(owner)
    await _cut_tail(owner, rows, keep=len(rows) - 1)
    await owner.execute("DELETE FROM engram.audit_checkpoints")
    await audited.audit.seal()
    assert (await audited.audit.verify()).ok
    report = await audited.audit.verify(anchors=[anchor])
    assert (False, 1, 1) == (report.ok, report.checkpoint, report.anchors_checked)
    assert "does not match its anchor" in (report.problem or "")


async def test_a_tail_cut_is_caught_by_the_lane_heads_of_an_export(
    audited: Kernel, owner: asyncpg.Connection
) -> None:
    """A tail cut with its head rewound and every checkpoint removed is named at the row an
    export recorded as the lane's head."""
    anchor = await _export_anchor(audited)
    rows = await _lane_rows(owner)
    await _cut_tail(owner, rows, keep=len(rows) - 1)
    await owner.execute("DELETE FROM engram.audit_checkpoints")
    report = await audited.audit.verify(anchors=[anchor])
    assert (False, rows[-1]["seq"], None) == (report.ok, report.first_bad_seq, report.checkpoint)
    assert "anchored in export.jsonl as the head of lane" in (report.problem or "")


async def test_a_forged_append_resealed_is_caught_by_an_anchor(
    audited: Kernel, owner: asyncpg.Connection
) -> None:
    """A forged row slipped into sealed history, its head moved and the checkpoints removed
    (so verify alone sees nothing) is caught against an anchored checkpoint."""
    gap = await _rolled_back_append(audited)
    await append(audited, entry(0, lane=15))
    anchor = await _export_anchor(audited)
    lane = await owner.fetchval(
        "SELECT lane FROM engram.audit_chain_heads WHERE last_seq < $1 AND lane <> 15 "
        "ORDER BY lane LIMIT 1",
        gap,
    )
    await _forge_append(owner, lane, gap)
    await owner.execute("DELETE FROM engram.audit_checkpoints")
    assert (await audited.audit.verify()).ok
    report = await audited.audit.verify(anchors=[anchor])
    assert (False, 1) == (report.ok, report.checkpoint)
    assert "is gone" in (report.problem or "")


class _Abandoned(Exception):
    """Raised to roll an append back."""


async def _rolled_back_append(kernel: Kernel) -> int:
    """The seq an append drew before its transaction rolled back (a gap in the log)."""
    drawn = 0
    with contextlib.suppress(_Abandoned):
        async with kernel.db.transaction() as conn:
            drawn = await kernel.audit.append(conn, entry(99, lane=15))
            raise _Abandoned
    assert 0 == await kernel.db.fetchval(
        "SELECT count(*) FROM librarian_audit WHERE seq = $1", drawn
    )
    return drawn


async def _checkpoint_anchor(kernel: Kernel) -> Anchor:
    """A checkpoint sealed now, read back as ``engram audit verify --anchor`` reads the output
    of ``engram audit checkpoint --json``."""
    sealed = await kernel.audit.seal()
    assert sealed is not None
    return parse_anchor(json.dumps({"checkpoint": sealed.to_json()}), "checkpoint.json")


async def _export_anchor(kernel: Kernel) -> Anchor:
    """The last line of an export (a checkpoint sealed now and the lane heads), read back as
    an anchor the way ``engram audit verify --anchor`` reads the file."""
    sealed = await kernel.audit.seal()
    assert sealed is not None
    heads = await kernel.audit.lane_heads()
    line = json.dumps({"checkpoint": sealed.to_json(), "lane_heads": heads})
    return parse_anchor(f'{{"seq": 1}}\n{line}\n', "export.jsonl")


async def _rechain(owner: asyncpg.Connection, lane: int) -> None:
    """Recompute every hash of a lane from its genesis and move its head to the result."""
    link = genesis_hash(lane)
    rows = await owner.fetch(
        f"SELECT seq, {COLUMNS} FROM engram.librarian_audit WHERE lane = $1 ORDER BY seq", lane
    )
    for row in rows:
        digest = entry_from_row(row).digest(link, seq=row["seq"], version=row["hash_version"])
        await owner.execute(
            "UPDATE engram.librarian_audit SET prev_hash = $2, row_hash = $3 WHERE seq = $1",
            row["seq"],
            link,
            digest,
        )
        link = digest
    await owner.execute(
        "UPDATE engram.audit_chain_heads SET last_seq = $2, last_hash = $3 WHERE lane = $1",
        lane,
        rows[-1]["seq"],
        link,
    )


async def _cut_tail(owner: asyncpg.Connection, rows: list[asyncpg.Record], *, keep: int) -> None:
    """Delete a lane's rows after the first ``keep`` and rewind its head to the last kept."""
    for row in rows[keep:]:
        await owner.execute("DELETE FROM engram.librarian_audit WHERE seq = $1", row["seq"])
    tip = await owner.fetchrow(
        "SELECT lane, seq, row_hash FROM engram.librarian_audit WHERE seq = $1",
        rows[keep - 1]["seq"],
    )
    assert tip is not None
    await owner.execute(
        "UPDATE engram.audit_chain_heads SET last_seq = $2, last_hash = $3 WHERE lane = $1",
        tip["lane"],
        tip["seq"],
        tip["row_hash"],
    )


async def _forge_append(owner: asyncpg.Connection, lane: int, seq: int) -> None:
    """Append a forged, correctly hashed row to ``lane`` at ``seq`` and move the lane's head."""
    tip = await owner.fetchval(
        "SELECT last_hash FROM engram.audit_chain_heads WHERE lane = $1", lane
    )
    forged = replace(entry(7, lane=lane), decision="approved", reason="approved by the board")
    row_hash = forged.digest(tip, seq=seq)
    await owner.execute(
        """
        INSERT INTO engram.librarian_audit
            (seq, decision_id, request_id, occurred_at, action, decision, outcome,
             decision_type, reason, agent_id, caller, input_snapshot, layer1_checks,
             decision_source, duration_ms, lane, prev_hash, row_hash, hash_version)
        OVERRIDING SYSTEM VALUE
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::json, $12::json, $13::json, $14,
                $15, $16, $17, $18, 2)
        """,
        seq,
        forged.decision_id,
        forged.request_id,
        forged.occurred_at,
        forged.action,
        forged.decision,
        forged.outcome,
        forged.decision_type,
        forged.reason,
        forged.agent_id,
        forged.caller,
        forged.input_snapshot,
        forged.layer1_checks,
        forged.decision_source,
        forged.duration_ms,
        lane,
        tip,
        row_hash,
    )
    await owner.execute(
        "UPDATE engram.audit_chain_heads SET last_seq = $2, last_hash = $3 WHERE lane = $1",
        lane,
        seq,
        row_hash,
    )
