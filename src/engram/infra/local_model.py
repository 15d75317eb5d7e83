"""What the two ways of running the local embedding model share: its settings, the check
that its files are there, and the warm-up that loads it before the first write needs it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import structlog

from engram.errors import EmbeddingError, ModelFilesError
from engram.infra.model_files import missing_files

log = structlog.get_logger("engram.infra.embeddings")

#: Time a worker process, or the model's thread, has to load the model. It is not an
#: embedding: ``ENGRAM_EMBEDDING_TIMEOUT_SECONDS`` (milliseconds of work, usually set far
#: lower) does not bound it, or a limit below the loading time would never let a model load.
MODEL_LOAD_SECONDS = 120.0


class LocalModel:
    """Base of :class:`~engram.infra.fastembed_embedder.FastembedEmbedder` (worker processes)
    and :class:`~engram.infra.inprocess_embedder.InProcessEmbedder` (a thread of this one)."""

    def __init__(
        self,
        model_dir: Path,
        *,
        model_name: str,
        pooling: str = "mean",
        dimension: int = 384,
        threads: int = 2,
        spin: bool = False,
        timeout_seconds: float = 10.0,
    ) -> None:
        self._model_dir = model_dir
        self._model_name = model_name
        self._pooling = pooling
        self._dimension = dimension
        self._threads = threads
        self._spin = spin
        self._timeout = timeout_seconds
        self.first_embedding_ms: float | None = None

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def model_name(self) -> str:
        return self._model_name

    def _check_files(self) -> None:
        absent = missing_files(self._model_dir)
        if absent:
            raise ModelFilesError(
                f"model directory {self._model_dir} lacks {', '.join(absent)}; "
                "run `engram prepare-model` or set ENGRAM_EMBEDDING_MODEL_PATH"
            )

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def embed_one(self, text: str) -> list[float]:
        return (await self.embed_batch([text]))[0]

    async def ping(self) -> None:
        await self.embed_one("ping")

    async def load(self) -> None:
        """Load the model where it runs, bounded by :data:`MODEL_LOAD_SECONDS`."""
        raise NotImplementedError

    async def start(self) -> None:
        """Load the model and embed one text, so the model is ready before it is needed."""
        started = time.perf_counter()
        await self.load()
        vector = await self.embed_one("engram warm-up")
        self.first_embedding_ms = (time.perf_counter() - started) * 1000
        if len(vector) != self._dimension:
            raise EmbeddingError(
                f"model produces {len(vector)} values, the schema stores {self._dimension}"
            )
        log.info(
            "embeddings.ready",
            model=self._model_name,
            warmup_ms=round(self.first_embedding_ms),
            runs_in=type(self).__name__,
        )
