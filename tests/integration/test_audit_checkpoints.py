"""Sealed checkpoints of the audit log: sealing (periodic, on demand, racing), their own
walls and chain, and rows written in the hash format before migration 0008."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import astuple

import asyncpg
import pytest

from engram import Kernel, open_kernel
from engram.config import EngramSettings
from engram.infra import migrate
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.audit.log import AuditLog
from tests.conftest import ScratchDatabase
from tests.integration.audit_helpers import append, entry, swap_all_but_seq

# The append statement of revision 0007 (before seq was hashed), as the kernel ran it then.
APPEND_0007 = """
WITH head AS (
    SELECT lane, last_hash FROM engram.audit_chain_heads WHERE lane = $18 FOR UPDATE
), entry AS (
    INSERT INTO engram.librarian_audit (
        decision_id, request_id, occurred_at, action, decision, outcome, decision_type,
        reason, agent_id, caller, record_id, version_id, input_snapshot, layer1_checks,
        layer2_decision, decision_source, duration_ms, lane, prev_hash, row_hash
    )
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10::json, $11, $12, $13::json, $14::json,
           $15::json, $16, $17, head.lane, head.last_hash, sha256(head.last_hash || $19::bytea)
    FROM head
    RETURNING seq, lane, row_hash
)
UPDATE engram.audit_chain_heads AS h
SET last_seq = entry.seq, last_hash = entry.row_hash
FROM entry
WHERE h.lane = entry.lane
RETURNING entry.seq
"""


def _settings(database: ScratchDatabase, **extra: object) -> EngramSettings:
    return EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        retry_initial_wait_seconds=0.01,
        **extra,  # type: ignore[arg-type]
    )


@pytest.fixture
async def owner(database: ScratchDatabase) -> AsyncIterator[asyncpg.Connection]:
    """A connection as the owner role with the checkpoints' triggers disabled."""
    conn = await asyncpg.connect(database.admin_url)
    await conn.execute("SET ROLE engram_owner")
    await conn.execute("ALTER TABLE engram.audit_checkpoints DISABLE TRIGGER USER")
    await conn.execute("ALTER TABLE engram.librarian_audit DISABLE TRIGGER USER")
    yield conn
    await conn.close()


async def test_the_kernel_seals_every_n_appends_without_an_operator(
    database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """With ENGRAM_AUDIT_CHECKPOINT_EVERY=5, 23 appends leave checkpoints through seq 5, 10,
    15 and 20, chained, and the log verifies against them."""
    settings = _settings(database, audit_checkpoint_every=5)
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        for n in range(23):
            await append(kernel, entry(n, lane=n % 16))
            await kernel.audit.drain()
        checkpoints = await kernel.audit.checkpoints()
        report = await kernel.audit.verify()
    assert [5, 10, 15, 20] == [c.through_seq for c in checkpoints]
    assert [5, 5, 5, 5] == [c.rows_sealed for c in checkpoints]
    assert [c.checkpoint_hash for c in checkpoints[:-1]] == [c.prev_hash for c in checkpoints[1:]]
    assert (True, 23, 4, 20) == (
        report.ok,
        report.rows_checked,
        report.checkpoints_checked,
        report.sealed_through_seq,
    )


async def test_sealing_with_nothing_new_returns_the_newest_checkpoint(kernel: Kernel) -> None:
    """An empty log seals nothing; a second seal with no append between returns the first."""
    assert await kernel.audit.seal() is None
    for n in range(3):
        await append(kernel, entry(n, lane=n))
    first = await kernel.audit.seal()
    again = await kernel.audit.seal()
    assert first is not None
    assert first == again
    assert (1, 3, 3) == (first.id, first.through_seq, first.rows_sealed)
    assert [1, 2, 3] + [0] * 13 == list(first.lane_seqs)


async def test_two_sealers_at_once_leave_one_chain(kernel: Kernel) -> None:
    """Two processes sealing the same moment (two AuditLogs on the database) make one
    checkpoint between them; the second gets the first's back."""
    for n in range(6):
        await append(kernel, entry(n, lane=n))
    other = AuditLog(kernel.db)
    results = await asyncio.gather(*(log.seal() for log in (kernel.audit, other, kernel.audit)))
    assert 1 == await kernel.db.fetchval("SELECT count(*) FROM audit_checkpoints")
    assert 1 == len({r.checkpoint_hash for r in results if r is not None})
    assert (await kernel.audit.verify()).ok


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE engram.audit_checkpoints SET rows_sealed = 0",
        "DELETE FROM engram.audit_checkpoints",
        "TRUNCATE engram.audit_checkpoints",
    ],
)
async def test_checkpoints_are_append_only(
    kernel: Kernel, database: ScratchDatabase, statement: str
) -> None:
    """The runtime role may not change a checkpoint, and the triggers stop even the owner."""
    await append(kernel, entry(0, lane=0))
    await kernel.audit.seal()
    errors = []
    for url, role in ((database.runtime_url, None), (database.admin_url, "engram_owner")):
        conn = await asyncpg.connect(url)
        try:
            if role is not None:
                await conn.execute(f"SET ROLE {role}")
            with pytest.raises(asyncpg.PostgresError) as caught:
                await conn.execute(statement)
            errors.append((caught.value.sqlstate, "append-only" in str(caught.value)))
        finally:
            await conn.close()
    assert [("42501", False), ("42501", True)] == errors
    assert 1 == await kernel.db.fetchval("SELECT count(*) FROM audit_checkpoints")


async def test_an_edited_checkpoint_is_named(kernel: Kernel, owner: asyncpg.Connection) -> None:
    """Changing a sealed checkpoint (here the count of rows it sealed) breaks its hash."""
    for n in range(4):
        await append(kernel, entry(n, lane=n))
        await kernel.audit.seal()
    await owner.execute("UPDATE engram.audit_checkpoints SET rows_sealed = 2 WHERE id = 3")
    report = await kernel.audit.verify()
    assert (False, 3, None) == (report.ok, report.checkpoint, report.first_bad_seq)
    assert "edited" in (report.problem or "")


async def test_a_removed_checkpoint_is_named(kernel: Kernel, owner: asyncpg.Connection) -> None:
    """Deleting a checkpoint from the middle of their chain is found at the gap."""
    for n in range(4):
        await append(kernel, entry(n, lane=n))
        await kernel.audit.seal()
    await owner.execute("DELETE FROM engram.audit_checkpoints WHERE id = 2")
    report = await kernel.audit.verify()
    assert (False, 3) == (report.ok, report.checkpoint)
    assert "checkpoint 2 is missing" in (report.problem or "")


async def test_rows_of_the_old_hash_format_still_verify_and_their_order_is_sealed(
    empty_database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """Rows appended at revision 0007 keep their format-1 hashes through the migration and
    verify beside format-2 rows; once sealed, a swap of two of them across lanes (which their
    hashes cannot see) is caught by the checkpoint's order digest."""
    url = empty_database.admin_url
    await asyncio.to_thread(migrate.upgrade, url, "0007")
    conn = await asyncpg.connect(empty_database.runtime_url)
    try:
        for n in range(8):
            old = entry(n, lane=n % 2)
            await conn.fetchval(APPEND_0007, *astuple(old), old.lane, old.payload(1))
    finally:
        await conn.close()
    await asyncio.to_thread(migrate.upgrade, url)
    async with open_kernel(settings=_settings(empty_database), embeddings=embedder) as kernel:
        for n in range(8, 12):
            await append(kernel, entry(n, lane=n % 2))
        formats = await kernel.db.fetch("SELECT hash_version FROM librarian_audit ORDER BY seq")
        before = await kernel.audit.verify()
        await kernel.audit.seal()
        sealed = await kernel.audit.verify()
        owner = await asyncpg.connect(url)
        try:
            await owner.execute("SET ROLE engram_owner")
            await owner.execute("ALTER TABLE engram.librarian_audit DISABLE TRIGGER USER")
            await swap_all_but_seq(owner, 3, 4)
        finally:
            await owner.close()
        swapped = await kernel.audit.verify()
    assert [1] * 8 + [2] * 4 == [row["hash_version"] for row in formats]
    assert (True, 12, 8) == (before.ok, before.rows_checked, before.legacy_rows)
    assert (True, 1, 12) == (sealed.ok, sealed.checkpoints_checked, sealed.sealed_through_seq)
    assert (False, 1, None) == (swapped.ok, swapped.checkpoint, swapped.first_bad_seq)
    assert "reordered" in (swapped.problem or "")
