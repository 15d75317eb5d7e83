"""The embedding port: text in, unit-length vectors of :attr:`dimension` floats out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class EmbeddingAdapter(Protocol):
    """Turns text into vectors; implementations bound their own time and resources."""

    @property
    def dimension(self) -> int:
        """Number of floats in each vector."""
        ...

    @property
    def model_name(self) -> str:
        """Name stored beside each vector, so vectors of different models are never mixed."""
        ...

    async def embed_one(self, text: str) -> list[float]:
        """Embed one text; raises :class:`engram.errors.EmbeddingError` on failure or timeout."""
        ...

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed several texts in one call, in order."""
        ...

    async def ping(self) -> None:
        """Raise :class:`engram.errors.EmbeddingError` unless the model is loaded and answers."""
        ...

    async def close(self) -> None:
        """Release the model and its workers."""
        ...
