"""The batching embedder (engram.infra.embedding_batcher) over a counting fake."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from engram.infra.embedding_batcher import BatchingEmbedder


class CountingEmbedder:
    """A fake embedding port that records the batch sizes it was asked for."""

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[int] = []
        self.fail = fail

    @property
    def dimension(self) -> int:
        return 2

    @property
    def model_name(self) -> str:
        return "fake"

    async def embed_one(self, text: str) -> list[float]:
        return (await self.embed_batch([text]))[0]

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        self.batches.append(len(texts))
        await asyncio.sleep(0.01)
        if self.fail:
            raise RuntimeError("model down")
        return [[float(len(text)), 1.0] for text in texts]

    async def ping(self) -> None:
        return None

    async def close(self) -> None:
        return None


async def test_concurrent_requests_are_batched_and_answered_in_order() -> None:
    """Twenty concurrent calls become a few batches, each caller gets its own vector."""
    inner = CountingEmbedder()
    batcher = BatchingEmbedder(inner, max_batch=8, max_in_flight=1)
    texts = ["x" * n for n in range(1, 21)]
    vectors = await asyncio.gather(*(batcher.embed_one(t) for t in texts))
    assert [[float(n), 1.0] for n in range(1, 21)] == vectors
    assert 20 == sum(inner.batches)
    assert max(inner.batches) <= 8
    assert len(inner.batches) < 20


async def test_batches_run_in_parallel_up_to_the_limit() -> None:
    """With two batches allowed in flight, two start before the first finishes."""
    inner = CountingEmbedder()
    batcher = BatchingEmbedder(inner, max_batch=1, max_in_flight=2)
    started = asyncio.get_running_loop().time()
    await asyncio.gather(*(batcher.embed_one("t") for _ in range(4)))
    assert asyncio.get_running_loop().time() - started < 0.035


async def test_a_failed_batch_fails_each_of_its_callers() -> None:
    """An error of the model reaches every waiter of that batch."""
    batcher = BatchingEmbedder(CountingEmbedder(fail=True), max_batch=4)
    results = await asyncio.gather(
        *(batcher.embed_one("t") for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, RuntimeError) for r in results)
