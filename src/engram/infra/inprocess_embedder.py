"""The embedding model run inside the kernel's own process (``ENGRAM_EMBEDDING_WORKERS=0``).

The model runs on one dedicated thread; ONNX Runtime releases the GIL while it computes, so
the event loop goes on meanwhile, as it does with a worker process. What this saves is the
hand-off to another process (pickling the text and the vector, waking the worker) and that
process's copy of the interpreter and libraries (ADR-016 has the measured effect). What it
gives up is the process bulkhead: a call that overruns its time limit fails with
:class:`~engram.errors.EmbeddingTimeout` as before, but the computation cannot be killed; the
calls behind it wait for it, and fail by their own time limits while it runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog

from engram.errors import EmbeddingError, EmbeddingTimeout, ModelFilesError
from engram.infra.fastembed_embedder import embed_texts, load_model
from engram.infra.local_model import MODEL_LOAD_SECONDS, LocalModel

log = structlog.get_logger("engram.infra.embeddings")


class InProcessEmbedder(LocalModel):
    """Embeds text with a local ONNX model on a thread of this process."""

    # Set on first use (the settings are the base class's).
    _model: Any = None
    _executor: ThreadPoolExecutor | None = None

    def _ensure_executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._check_files()
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-model")
        return self._executor

    def _load(self) -> Any:
        """On the model's thread: the model, loaded on first use."""
        if self._model is None:
            self._model = load_model(
                str(self._model_dir),
                self._model_name,
                self._pooling,
                self._dimension,
                self._threads,
                spin=self._spin,
            )
        return self._model

    def _run(self, texts: list[str]) -> list[list[float]]:
        """On the model's thread: load the model once, then embed."""
        return embed_texts(self._load(), texts)

    async def load(self) -> None:
        """Load the model on its thread (at most :data:`MODEL_LOAD_SECONDS`, not one call's
        time limit)."""
        executor = self._ensure_executor()
        loading = asyncio.get_running_loop().run_in_executor(executor, self._load)
        try:
            await asyncio.wait_for(loading, MODEL_LOAD_SECONDS)
        except TimeoutError as exc:
            raise EmbeddingTimeout(timeout_seconds=MODEL_LOAD_SECONDS) from exc
        except (EmbeddingError, ModelFilesError):
            raise
        except Exception as exc:
            raise EmbeddingError(f"loading the model failed: {type(exc).__name__}") from exc

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        executor = self._ensure_executor()
        loop = asyncio.get_running_loop()
        try:
            future = loop.run_in_executor(executor, self._run, list(texts))
            return await asyncio.wait_for(future, self._timeout)
        except TimeoutError as exc:
            log.warning("embeddings.overrun", timeout_seconds=self._timeout, in_process=True)
            raise EmbeddingTimeout(timeout_seconds=self._timeout) from exc
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the caller was cancelled
            # close() dropped this call before the model reached it
            raise EmbeddingError("the embedding model was closed") from None
        except (EmbeddingError, ModelFilesError):
            raise
        except Exception as exc:
            raise EmbeddingError(f"embedding failed: {type(exc).__name__}") from exc

    def worker_pids(self) -> list[int]:
        """No worker processes: the model runs in this one."""
        return []

    async def close(self) -> None:
        """Drop the calls still waiting (they fail with EmbeddingError) and wait for the one
        running, at most one time limit; a computation still running after that ends on its
        own, and the process waits for it only when it exits."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        executor.shutdown(wait=False, cancel_futures=True)
        try:
            await asyncio.wait_for(asyncio.to_thread(executor.shutdown, wait=True), self._timeout)
        except TimeoutError:
            log.warning("embeddings.close_overran", timeout_seconds=self._timeout)
        self._model = None
