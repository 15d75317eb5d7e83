"""Micro-batching in front of an embedding adapter.

Concurrent writers each ask for one embedding; the model is far cheaper per text in a batch.
Requests that arrive while a batch is being computed wait for the next one, so under load
batches grow by themselves and an idle kernel adds no delay.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from engram.infra.embeddings import EmbeddingAdapter


class BatchingEmbedder:
    """An :class:`EmbeddingAdapter` that coalesces concurrent ``embed_one`` calls."""

    def __init__(self, inner: EmbeddingAdapter, *, max_batch: int = 32) -> None:
        self._inner = inner
        self._max_batch = max_batch
        self._pending: list[tuple[str, asyncio.Future[list[float]]]] = []
        self._runner: asyncio.Task[None] | None = None

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    async def embed_one(self, text: str) -> list[float]:
        future: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
        self._pending.append((text, future))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.get_running_loop().create_task(self._run())
        return await future

    async def _run(self) -> None:
        while self._pending:
            batch = self._pending[: self._max_batch]
            del self._pending[: self._max_batch]
            batch = [(text, future) for text, future in batch if not future.cancelled()]
            if not batch:
                continue
            try:
                vectors = await self._inner.embed_batch([text for text, _ in batch])
            except Exception as exc:  # noqa: BLE001 - handed to every waiter of the batch
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), vector in zip(batch, vectors, strict=True):
                if not future.done():
                    future.set_result(vector)

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._inner.embed_batch(texts)

    async def ping(self) -> None:
        await self._inner.ping()

    async def close(self) -> None:
        if self._runner is not None:
            await asyncio.gather(self._runner, return_exceptions=True)
