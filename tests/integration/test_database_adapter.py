"""The asyncpg adapter against the real embedded PostgreSQL: queries, transactions, errors."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import numpy as np
import pytest

from engram.errors import DatabaseUnavailable, UniqueViolation
from engram.infra.postgres import PostgresDatabase
from engram.infra.resilience import CircuitBreaker, Resilience
from tests.conftest import ScratchDatabase

INSERT_AGENT = (
    "INSERT INTO engram.agents (id, name, token_hash, token_prefix, trust_level) "
    "VALUES ($1, $2, $3, 'eng_test', 'standard')"
)


@pytest.fixture
async def db(database: ScratchDatabase) -> AsyncIterator[PostgresDatabase]:
    """A pool on the test database as the runtime role, with fast retries."""
    adapter = await PostgresDatabase.connect(
        database.runtime_url,
        resilience=Resilience(CircuitBreaker("postgres"), retries=3, initial_wait_seconds=0.01),
        min_size=1,
        max_size=4,
    )
    yield adapter
    await adapter.close()


async def test_ping_and_search_path(db: PostgresDatabase) -> None:
    """The pool answers SELECT 1 and resolves engram's tables without a schema prefix."""
    await db.ping()
    assert 0 == await db.fetchval("SELECT count(*) FROM agents")
    assert "UTC" == await db.fetchval("SHOW timezone")


async def test_unique_violation_names_its_constraint(db: PostgresDatabase) -> None:
    """A duplicate becomes UniqueViolation carrying the constraint's name."""
    await db.execute(INSERT_AGENT, uuid.uuid4(), "dup", b"\x01" * 32)
    with pytest.raises(UniqueViolation) as caught:
        await db.execute(INSERT_AGENT, uuid.uuid4(), "dup", b"\x02" * 32)
    assert "agents_name_key" == caught.value.constraint
    assert "23505" == caught.value.sqlstate


async def test_transaction_rolls_back_on_error(db: PostgresDatabase) -> None:
    """A failure inside a transaction leaves nothing of it behind."""
    with pytest.raises(UniqueViolation):  # noqa: PT012 - the transaction block is under test
        async with db.transaction() as conn:
            await conn.execute(INSERT_AGENT, uuid.uuid4(), "first", b"\x03" * 32)
            await conn.execute(INSERT_AGENT, uuid.uuid4(), "first", b"\x04" * 32)
    assert 0 == await db.fetchval("SELECT count(*) FROM agents")


async def test_transaction_commits_on_success(db: PostgresDatabase) -> None:
    """Statements inside a transaction are visible to others after it ends."""
    async with db.transaction() as conn:
        await conn.execute(INSERT_AGENT, uuid.uuid4(), "a1", b"\x05" * 32)
        await conn.execute(INSERT_AGENT, uuid.uuid4(), "a2", b"\x06" * 32)
    assert 2 == await db.fetchval("SELECT count(*) FROM agents")


async def test_vectors_round_trip(db: PostgresDatabase) -> None:
    """A 384-dimension vector goes in as a list and comes back with the same values."""
    vector = np.linspace(-1, 1, 384, dtype=np.float32)
    back = await db.fetchval("SELECT $1::vector(384)", vector.tolist())
    assert np.allclose(vector, back.to_numpy())


async def test_killed_backend_inside_a_transaction_is_unavailable(
    db: PostgresDatabase, database: ScratchDatabase
) -> None:
    """A backend terminated mid-transaction surfaces as DatabaseUnavailable, not a driver error."""
    admin = await asyncpg.connect(database.admin_url)
    try:
        with pytest.raises(DatabaseUnavailable):  # noqa: PT012 - the transaction block is under test
            async with db.transaction() as conn:
                pid = await conn.fetchval("SELECT pg_backend_pid()")
                await admin.execute("SELECT pg_terminate_backend($1)", pid)
                await asyncio.sleep(0.05)
                await conn.execute(INSERT_AGENT, uuid.uuid4(), "lost", b"\x07" * 32)
    finally:
        await admin.close()
    assert 0 == await db.fetchval("SELECT count(*) FROM agents")


async def test_autocommit_query_is_retried_after_a_killed_backend(
    db: PostgresDatabase, database: ScratchDatabase
) -> None:
    """When every pooled backend is killed, a read is retried on a fresh connection."""
    await db.ping()
    admin = await asyncpg.connect(database.admin_url)
    try:
        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = $1 AND usename = 'engram_runtime'",
            database.name,
        )
    finally:
        await admin.close()
    assert killed >= 1
    await asyncio.sleep(0.05)
    assert 1 == await db.fetchval("SELECT 1")


async def test_unreachable_server_is_unavailable() -> None:
    """Connecting to a socket where no server listens raises DatabaseUnavailable."""
    with pytest.raises(DatabaseUnavailable):
        await PostgresDatabase.connect(
            "postgresql://engram_runtime@/engram?host=/nonexistent-engram-socket-dir",
            resilience=Resilience(CircuitBreaker("postgres")),
            min_size=1,
        )
