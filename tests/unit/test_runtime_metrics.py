"""The gauges read from the pool, the breakers and the embedding queue at scrape time."""

from __future__ import annotations

import asyncio

import pytest

from engram.infra.db import PoolUsage
from engram.infra.embedding_batcher import BatchingEmbedder
from engram.infra.resilience import CircuitBreaker
from engram.observability.metrics import EngramMetrics
from tests.unit.runtime_fakes import FakeBreaker, FakePool, FakeQueue
from tests.unit.test_embedding_batcher import CountingEmbedder


def _value(metrics: EngramMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_pool_and_queue_are_exported_at_zero_before_a_kernel_hands_them_over() -> None:
    """A fresh registry already has the pool and queue series, at zero."""
    metrics = EngramMetrics()
    assert 0 == _value(metrics, "engram_db_pool_connections", state="in_use")
    assert 0 == _value(metrics, "engram_db_pool_wait_seconds_total")
    assert 0 == _value(metrics, "engram_embedding_queue_depth")


def test_each_scrape_reads_the_sources_afresh() -> None:
    """Pool usage, waiting callers, breaker state and queue depth are read when collected."""
    metrics = EngramMetrics()
    pool, breaker, queue = FakePool(), FakeBreaker(), FakeQueue()
    metrics.watch(pool=pool, breaker=breaker, embeddings=queue)
    assert 0 == _value(metrics, "engram_circuit_breaker_state", dependency="postgres")

    pool.usage = PoolUsage(size=7, idle=2, max_size=10, waiting=3, wait_seconds=1.5)
    breaker.state, queue.queue_depth = "half_open", 12
    assert 5 == _value(metrics, "engram_db_pool_connections", state="in_use")
    assert 2 == _value(metrics, "engram_db_pool_connections", state="idle")
    assert 10 == _value(metrics, "engram_db_pool_max_connections")
    assert 3 == _value(metrics, "engram_db_pool_waiting")
    assert 1.5 == _value(metrics, "engram_db_pool_wait_seconds_total")
    assert 1 == _value(metrics, "engram_circuit_breaker_state", dependency="postgres")
    assert 12 == _value(metrics, "engram_embedding_queue_depth")
    breaker.state = "open"
    assert 2 == _value(metrics, "engram_circuit_breaker_state", dependency="postgres")


def test_batches_sent_by_the_queue_are_observed() -> None:
    """Every batch the queue sends lands in engram_embedding_batch_size."""
    metrics = EngramMetrics()
    queue = FakeQueue()
    metrics.watch(pool=FakePool(), breaker=FakeBreaker(), embeddings=queue)
    queue.send(3)
    queue.send(8)
    assert 2 == _value(metrics, "engram_embedding_batch_size_count")
    assert 11 == _value(metrics, "engram_embedding_batch_size_sum")
    assert 1 == _value(metrics, "engram_embedding_batch_size_bucket", le="4.0")


async def test_the_batching_embedder_reports_its_queue_and_batches() -> None:
    """The real batcher's waiting texts are its queue depth; each batch it sends is reported."""
    batcher = BatchingEmbedder(CountingEmbedder(), max_batch=4, max_in_flight=1)
    sizes: list[int] = []
    batcher.on_batch(sizes.append)
    calls = [asyncio.ensure_future(batcher.embed_one(f"t{n}")) for n in range(10)]
    await asyncio.sleep(0)  # the first call went out alone at once; nine wait behind it
    assert (9, [1]) == (batcher.queue_depth, sizes)
    await asyncio.gather(*calls)
    assert (0, [1, 4, 4, 1]) == (batcher.queue_depth, sizes)


@pytest.mark.parametrize(("failures", "expected"), [(0, "closed"), (2, "open")])
async def test_a_real_breaker_satisfies_the_source(failures: int, expected: str) -> None:
    """The infrastructure's circuit breaker reports the states the gauge maps."""
    breaker = CircuitBreaker("postgres", fail_max=2, reset_seconds=60)

    async def down() -> None:
        raise OSError("connection refused")

    for _ in range(failures):
        with pytest.raises(Exception):  # noqa: B017, PT011 - the first opens it, the last is refused
            await breaker.call(down)
    metrics = EngramMetrics()
    metrics.watch(pool=FakePool(), breaker=breaker, embeddings=FakeQueue())
    assert expected == breaker.state
    value = {"closed": 0, "open": 2}[expected]
    assert value == _value(metrics, "engram_circuit_breaker_state", dependency="postgres")
