"""The runtime role can do its work and nothing more; the audit table is append-only."""

from __future__ import annotations

import uuid

import asyncpg
import pytest

from tests.conftest import ScratchDatabase

AUDIT_INSERT = """
    INSERT INTO engram.librarian_audit
        (decision_id, occurred_at, action, decision, outcome, decision_type, reason, agent_id,
         caller, input_snapshot, layer1_checks, decision_source, duration_ms, lane, prev_hash,
         row_hash)
    VALUES ($1, now(), 'CREATE', 'rejected', 'none', 'external', 'test', 'tester', '{}', '{}',
            '[]', 'test', 0, 0, sha256('a'), sha256('b'))
"""


async def _connect(url: str) -> asyncpg.Connection:
    return await asyncpg.connect(url)


async def test_runtime_role_is_neither_superuser_nor_owner(database: ScratchDatabase) -> None:
    """The kernel's login is a plain role: no superuser, no BYPASSRLS, owns no table."""
    conn = await _connect(database.runtime_url)
    try:
        role = await conn.fetchrow(
            "SELECT rolname, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb "
            "FROM pg_roles WHERE rolname = current_user"
        )
        owners = await conn.fetch(
            "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'engram'"
        )
    finally:
        await conn.close()
    assert role is not None
    assert ("engram_runtime", False, False, False, False) == tuple(role)
    assert [("engram_owner",)] == [tuple(r) for r in owners]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE engram.librarian_audit SET reason = 'rewritten'",
        "DELETE FROM engram.librarian_audit",
        "TRUNCATE engram.librarian_audit",
        "ALTER TABLE engram.librarian_audit DISABLE TRIGGER ALL",
        "ALTER TABLE engram.librarian_audit DISABLE TRIGGER librarian_audit_no_update_delete",
        "DROP TABLE engram.librarian_audit",
    ],
)
async def test_runtime_role_cannot_change_the_audit_log(
    database: ScratchDatabase, statement: str
) -> None:
    """UPDATE, DELETE, TRUNCATE, disabling its triggers or dropping it: SQLSTATE 42501."""
    conn = await _connect(database.runtime_url)
    try:
        await conn.execute(AUDIT_INSERT, uuid.uuid4())
        with pytest.raises(asyncpg.PostgresError) as caught:
            await conn.execute(statement)
        assert 1 == await conn.fetchval("SELECT count(*) FROM engram.librarian_audit")
    finally:
        await conn.close()
    assert "42501" == caught.value.sqlstate


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE engram.librarian_audit SET reason = 'rewritten'",
        "DELETE FROM engram.librarian_audit",
        # CASCADE: without it the foreign keys from memories refuse first (0A000).
        "TRUNCATE engram.librarian_audit CASCADE",
    ],
)
async def test_triggers_refuse_changes_even_by_the_owner(
    database: ScratchDatabase, statement: str
) -> None:
    """The second wall: the owner role, which has the privileges, is stopped by the triggers."""
    conn = await _connect(database.admin_url)
    try:
        await conn.execute(AUDIT_INSERT, uuid.uuid4())
        await conn.execute("SET ROLE engram_owner")
        with pytest.raises(asyncpg.PostgresError) as caught:
            await conn.execute(statement)
        assert 1 == await conn.fetchval("SELECT count(*) FROM engram.librarian_audit")
    finally:
        await conn.close()
    assert "42501" == caught.value.sqlstate
    assert "append-only" in str(caught.value)


async def test_runtime_role_can_append_and_read_the_audit_log(database: ScratchDatabase) -> None:
    """INSERT and SELECT are exactly what the runtime role may do on librarian_audit."""
    conn = await _connect(database.runtime_url)
    try:
        decision = uuid.uuid4()
        await conn.execute(AUDIT_INSERT, decision)
        row = await conn.fetchrow(
            "SELECT seq, decision_id FROM engram.librarian_audit WHERE decision_id = $1", decision
        )
    finally:
        await conn.close()
    assert row is not None
    assert decision == row["decision_id"]


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE engram.memories SET content = 'rewritten'",
        "UPDATE engram.memories SET source_agent = 'someone else'",
        "DELETE FROM engram.memories",
        "DELETE FROM engram.memory_edges",
        "TRUNCATE engram.memories",
        "CREATE TABLE engram.sneaky (id int)",
        "CREATE TABLE public.sneaky (id int)",
    ],
)
async def test_versions_are_immutable_for_the_runtime_role(
    database: ScratchDatabase, statement: str
) -> None:
    """Content and provenance of a version cannot be rewritten, and no DDL is possible."""
    conn = await _connect(database.runtime_url)
    try:
        with pytest.raises(asyncpg.PostgresError) as caught:
            await conn.execute(statement)
    finally:
        await conn.close()
    assert "42501" == caught.value.sqlstate
