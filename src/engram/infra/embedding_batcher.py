"""Coalescing of concurrent embedding requests in front of an embedding adapter.

Concurrent writers each ask for one embedding. Requests wait in a queue and are sent to the
model in batches of at most ``max_batch`` texts, with at most ``max_in_flight`` batches running
at once (one per model worker, one when the model runs in the kernel's process): under load
batches grow by themselves and the model stays busy; an idle kernel adds no delay.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from engram.infra.embeddings import EmbeddingAdapter


class BatchingEmbedder:
    """An :class:`EmbeddingAdapter` that coalesces concurrent ``embed_one`` calls."""

    def __init__(
        self, inner: EmbeddingAdapter, *, max_batch: int = 8, max_in_flight: int = 1
    ) -> None:
        self._inner = inner
        self._max_batch = max(1, max_batch)
        self._max_in_flight = max(1, max_in_flight)
        self._pending: list[tuple[str, asyncio.Future[list[float]]]] = []
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._batch_listeners: list[Callable[[int], None]] = []

    @property
    def dimension(self) -> int:
        return self._inner.dimension

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    @property
    def queue_depth(self) -> int:
        """Texts waiting for a batch now (those in a batch already sent not included)."""
        return len(self._pending)

    def on_batch(self, listener: Callable[[int], None]) -> None:
        """Call ``listener`` with the size of each batch as it is sent (for the metrics)."""
        self._batch_listeners.append(listener)

    async def embed_one(self, text: str) -> list[float]:
        future: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
        self._pending.append((text, future))
        self._dispatch()
        return await future

    def _dispatch(self) -> None:
        while self._pending and self._in_flight < self._max_in_flight:
            batch = [item for item in self._pending[: self._max_batch] if not item[1].done()]
            del self._pending[: self._max_batch]
            if not batch:
                continue
            for listener in self._batch_listeners:
                listener(len(batch))
            self._in_flight += 1
            task = asyncio.get_running_loop().create_task(self._embed(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _embed(self, batch: list[tuple[str, asyncio.Future[list[float]]]]) -> None:
        try:
            vectors = await self._inner.embed_batch([text for text, _ in batch])
        except Exception as exc:  # noqa: BLE001 - handed to every waiter of the batch
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
        else:
            for (_, future), vector in zip(batch, vectors, strict=True):
                if not future.done():
                    future.set_result(vector)
        finally:
            self._in_flight -= 1
            self._dispatch()

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._inner.embed_batch(texts)

    async def ping(self) -> None:
        await self._inner.ping()

    async def close(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
