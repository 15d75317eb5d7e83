"""What the infrastructure reports to the metrics: the asyncpg pool's connections in use and
idle and the callers waiting for one, a kernel's breaker and embedding queue, its searches."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from engram import Kernel
from engram.infra.postgres import PostgresDatabase
from engram.infra.resilience import CircuitBreaker, Resilience
from engram.memory.gate.access import caller_for_tier
from engram.memory.types import TrustLevel
from engram.observability.metrics import EngramMetrics
from tests.conftest import ScratchDatabase
from tests.unit.runtime_fakes import FakeQueue

READER = caller_for_tier("reader", TrustLevel.STANDARD)


@pytest.fixture
async def one_connection(database: ScratchDatabase) -> AsyncIterator[PostgresDatabase]:
    """A pool of exactly one connection, so a second caller has to wait."""
    adapter = await PostgresDatabase.connect(
        database.runtime_url,
        resilience=Resilience(CircuitBreaker("postgres"), retries=0),
        min_size=1,
        max_size=1,
    )
    yield adapter
    await adapter.close()


async def test_a_caller_waiting_for_the_only_connection_is_counted(
    one_connection: PostgresDatabase,
) -> None:
    """While a session holds the only connection, a second query waits: one waiter, one
    connection in use, and its wait adds to the waited seconds once it gets through."""
    db = one_connection
    metrics = EngramMetrics()
    metrics.watch(pool=db, breaker=db.breaker, embeddings=FakeQueue())

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    before = sample("engram_db_pool_wait_seconds_total") or 0.0
    async with db.session() as held:
        await held.execute("SELECT 1")
        waiting = asyncio.create_task(db.fetchval("SELECT 2"))
        await asyncio.sleep(0.05)  # it asked for the connection at its first step
        assert 1 == sample("engram_db_pool_waiting")
        assert 1 == sample("engram_db_pool_connections", state="in_use")
        assert 0 == sample("engram_db_pool_connections", state="idle")
        assert 1 == sample("engram_db_pool_max_connections")
    assert 2 == await waiting
    assert 0 == sample("engram_db_pool_waiting")
    assert (sample("engram_db_pool_wait_seconds_total") or 0.0) - before >= 0.05
    assert 0 == sample("engram_circuit_breaker_state", dependency="postgres")


async def test_a_kernel_exports_its_pool_breaker_and_searches(kernel: Kernel) -> None:
    """A kernel hands its own pool, breaker and embedding queue to its metrics, and each
    search it answers is timed."""
    await kernel.retrieval.search(READER, "which database does the ledger use", limit=3)
    registry = kernel.metrics.registry
    assert 40 == registry.get_sample_value("engram_db_pool_max_connections")
    assert 0 == registry.get_sample_value(
        "engram_circuit_breaker_state", {"dependency": "postgres"}
    )
    assert 1 == registry.get_sample_value("engram_search_seconds_count", {"degraded": "false"})
    batches = registry.get_sample_value("engram_embedding_batch_size_count")
    assert batches is not None
    assert batches >= 1
