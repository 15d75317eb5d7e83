"""The embedding port: text in, unit-length vectors of :attr:`dimension` floats out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from engram.errors import EmbeddingError


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


class NoModel:
    """The embedding port of a kernel opened without its model (``open_kernel(model=False)``).

    Admin commands that only read or administer what is stored use it, so they start in well
    under a second; anything that would need a vector fails with a typed error saying why.
    """

    def __init__(self, dimension: int = 384, model_name: str = "none") -> None:
        self._dimension = dimension
        self._model_name = model_name

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def model_name(self) -> str:
        return self._model_name

    async def embed_one(self, text: str) -> list[float]:
        del text
        raise _not_loaded()

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        del texts
        raise _not_loaded()

    async def ping(self) -> None:
        raise _not_loaded()

    async def close(self) -> None:
        return None


def _not_loaded() -> EmbeddingError:
    return EmbeddingError("this command runs without the embedding model; it cannot embed text")
