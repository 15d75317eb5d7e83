"""fastembed implementation of the embedding port, bulkheaded in a process pool.

With ``ENGRAM_EMBEDDING_WORKERS`` of 1 or more the ONNX model runs in worker processes, so a
slow or stuck embedding can never block the event loop; each call has a timeout, and a worker
that overruns it is replaced (:mod:`engram.infra.inprocess_embedder` is the default, which runs
the model on a thread instead). The model is loaded from a local directory only (no hub
access), see :mod:`engram.infra.model_files`.
"""

from __future__ import annotations

import asyncio
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import structlog

from engram.errors import EmbeddingError, EmbeddingTimeout, ModelFilesError
from engram.infra.local_model import MODEL_LOAD_SECONDS, LocalModel
from engram.infra.model_files import ONNX_FILE

log = structlog.get_logger("engram.infra.embeddings")

_model: Any = None
#: Why this worker has no model (set by its initializer when the files cannot be loaded).
_load_error: ModelFilesError | None = None


def load_model(
    model_dir: str,
    model_name: str,
    pooling: str,
    dimension: int,
    threads: int,
    *,
    spin: bool = False,
) -> Any:
    """Register the local model with fastembed and load it (in a worker, or on the in-process
    model's thread).

    fastembed is asked not to open the ONNX session itself (``lazy_load``): it exposes no
    setting for the threads' spinning, and a session opened and then replaced left about
    60 MB of the process's memory behind (ADR-016). The session is opened here once, with
    fastembed's optimisation level, and the memory freed while loading is handed back to the
    system.
    """
    from fastembed import TextEmbedding  # noqa: PLC0415 - loaded where the model runs
    from fastembed.common.model_description import ModelSource, PoolingType  # noqa: PLC0415

    known = {entry["model"] for entry in TextEmbedding.list_supported_models()}
    if model_name not in known:
        TextEmbedding.add_custom_model(
            model=model_name,
            pooling=PoolingType.MEAN if pooling == "mean" else PoolingType.CLS,
            normalization=True,
            sources=ModelSource(hf=model_name),
            dim=dimension,
            model_file=ONNX_FILE,
        )
    try:
        embedding = TextEmbedding(
            model_name=model_name,
            specific_model_path=model_dir,
            local_files_only=True,
            threads=threads,
            lazy_load=True,
        )
        _open_session(embedding, threads, spin=spin)
    except Exception as exc:
        # Files present (checked before) but unreadable: cut short, damaged, or not a model.
        raise ModelFilesError(
            f"the embedding model in {model_dir} cannot be loaded ({type(exc).__name__}): a "
            "file there is damaged or not the model's; `engram prepare-model` assembles the "
            "default model again (in the data dir), or restore the directory"
        ) from exc
    release_freed_memory()
    return embedding


def _open_session(embedding: Any, threads: int, *, spin: bool) -> None:
    """Open the model's ONNX session for fastembed's text model, with idle threads that sleep
    unless ``spin``.

    By default ONNX Runtime's worker threads spin for a while after each inference, waiting
    for the next one. Between the single texts of governed writes that burnt about a quarter
    of the model's CPU time (27.5 against 20.3 ms per text, measured) - CPU the event loop and
    PostgreSQL need on a small machine - at the price of a slower wake-up (a single text's p95
    rose from about 15 to 19 ms). ``ENGRAM_EMBEDDING_SPIN=true`` keeps the spinning. The
    session is opened from the file fastembed would open, on the CPU, sequentially (the
    inter-op thread count, which fastembed sets to ``threads``, is unused then). A fastembed
    whose text model is laid out otherwise opens its own session (spinning kept).
    """
    import onnxruntime as ort  # noqa: PLC0415 - loaded where the model runs

    inner: Any = getattr(embedding, "model", None)
    description: Any = getattr(inner, "model_description", None)
    model_dir = getattr(inner, "_model_dir", None)
    if description is None or model_dir is None or not hasattr(inner, "_ensure_tokenizer"):
        if not spin:
            log.warning("embeddings.spinning_kept", reason="unknown fastembed model layout")
        return
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if not spin:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    inner.model = ort.InferenceSession(
        str(Path(model_dir) / description.model_file),
        sess_options=options,
        providers=["CPUExecutionProvider"],
    )
    inner._ensure_tokenizer()  # what fastembed's own load does after opening its session


def release_freed_memory() -> None:
    """Hand memory the allocator holds but no longer uses back to the system (glibc's
    ``malloc_trim``, on Linux; nothing elsewhere). Loading the model frees much of what it
    allocated (graph optimisation), and glibc keeps freed memory in the process; after the
    old double load the trim took the resident size from 312 to 197 MB (ADR-016). It runs
    once, at load: trimming walks every allocator arena under its lock, so other threads'
    allocations wait for it meanwhile."""
    if not sys.platform.startswith("linux"):
        return
    try:
        trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return
    trim(0)


def _init_worker(  # noqa: PLR0917 - the pool passes initargs positionally
    model_dir: str, model_name: str, pooling: str, dimension: int, threads: int, spin: bool
) -> None:
    global _model  # noqa: PLW0603 - one model per worker process, loaded once
    # Ctrl-C reaches the whole process group; the parent shuts workers down in order.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _watch_parent(os.getppid())
    try:
        _model = load_model(model_dir, model_name, pooling, dimension, threads, spin=spin)
    except ModelFilesError as exc:
        # Kept for the calls to raise: a failing initializer would only break the pool,
        # and the parent would learn no more than that a worker died.
        global _load_error  # noqa: PLW0603 - set once, in the initializer
        _load_error = exc


_MAIN_SWAP = threading.Lock()


def _ready() -> None:
    """A task that does nothing: submitting it makes the pool start a worker."""


@contextmanager
def _caller_main_hidden() -> Iterator[None]:
    """Start processes without them re-importing the caller's ``__main__``.

    A spawned process normally re-runs the parent's main script (or module) before it does
    any work. The model workers need nothing from it, and it breaks them: a script without an
    ``if __name__ == "__main__":`` guard would open a second kernel inside the worker (which
    multiprocessing refuses, and the worker dies), and code read from standard input or typed
    into a notebook has no file to re-run. While workers are being started, ``__main__`` is a
    bare module, so multiprocessing records nothing to re-import.
    """
    with _MAIN_SWAP:  # two pools starting at once must not restore each other's stand-in
        main = sys.modules.get("__main__")
        stand_in = types.ModuleType("__main__")
        sys.modules["__main__"] = stand_in
        try:
            yield
        finally:
            if sys.modules.get("__main__") is stand_in:
                if main is None:
                    del sys.modules["__main__"]
                else:
                    sys.modules["__main__"] = main


#: How often a worker checks that the process that started it is still there (seconds).
PARENT_CHECK_SECONDS = 0.5


def _watch_parent(parent: int) -> None:
    """End this worker when its parent is gone (SIGKILLed, say: no orderly shutdown reaches
    the pool then, and the worker would wait for work forever, holding the model's memory)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        os._exit(0)  # no cleanup is owed to a parent that no longer exists

    threading.Thread(target=watch, name="engram-parent-watch", daemon=True).start()


#: A batch the model runs together is padded to its longest text, and padding costs as much
#: compute as text. Texts are grouped so that no group's longest is more than this many times
#: its shortest (by characters): on 20-60 word texts a batch of 16 then costs about 18 instead
#: of 23 ms of CPU per text (measured, ADR-016).
LENGTH_SPREAD = 1.15


def length_groups(texts: Sequence[str], spread: float = LENGTH_SPREAD) -> list[list[int]]:
    """Indexes of ``texts`` in groups of similar length, shortest first; each group's longest
    text is at most ``spread`` times as long as its shortest."""
    groups: list[list[int]] = []
    for index in sorted(range(len(texts)), key=lambda i: len(texts[i])):
        if groups and len(texts[index]) <= spread * max(len(texts[groups[-1][0]]), 1):
            groups[-1].append(index)
        else:
            groups.append([index])
    return groups


def embed_texts(model: Any, texts: list[str]) -> list[list[float]]:
    """Vectors of ``texts`` in their order, computed in groups of similar length."""
    vectors: list[list[float]] = [[] for _ in texts]
    for group in length_groups(texts):
        batch = [texts[i] for i in group]
        for index, vector in zip(group, model.embed(batch, batch_size=len(batch)), strict=True):
            vectors[index] = vector.tolist()
    return vectors


def _embed_in_worker(texts: list[str]) -> list[list[float]]:
    if _load_error is not None:
        raise _load_error
    if _model is None:  # pragma: no cover - the initializer always ran
        raise RuntimeError("embedding worker has no model")
    return embed_texts(_model, texts)


class FastembedEmbedder(LocalModel):
    """Embeds text with a local ONNX model in ``workers`` processes."""

    def __init__(
        self,
        model_dir: Path,
        *,
        model_name: str,
        pooling: str = "mean",
        dimension: int = 384,
        workers: int = 1,
        threads: int = 2,
        spin: bool = False,
        timeout_seconds: float = 10.0,
    ) -> None:
        super().__init__(
            model_dir,
            model_name=model_name,
            pooling=pooling,
            dimension=dimension,
            threads=threads,
            spin=spin,
            timeout_seconds=timeout_seconds,
        )
        self._workers = workers
        self._pool: ProcessPoolExecutor | None = None
        # One no-op task per worker of the pool, done once a worker has loaded the model,
        # and when the pool was started.
        self._loading: list[Future[None]] = []
        self._started_at = 0.0

    def _ensure_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._check_files()
            pool = ProcessPoolExecutor(
                max_workers=self._workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(
                    str(self._model_dir),
                    self._model_name,
                    self._pooling,
                    self._dimension,
                    self._threads,
                    self._spin,
                ),
            )
            # A spawning pool starts one worker per submission until it has them all; start
            # them all now, while the caller's __main__ is hidden, so no later call spawns.
            with _caller_main_hidden():
                self._loading = [pool.submit(_ready) for _ in range(self._workers)]
            self._pool, self._started_at = pool, time.monotonic()
        return self._pool

    def _still_loading(self) -> bool:
        """Whether the pool's workers are still starting (loading the model), within
        :data:`MODEL_LOAD_SECONDS` of the pool's start."""
        waiting = any(not ready.done() for ready in self._loading)
        return waiting and time.monotonic() - self._started_at < MODEL_LOAD_SECONDS

    async def load(self) -> None:
        """Start the workers and wait for them to load the model (at most
        :data:`MODEL_LOAD_SECONDS`, not one call's time limit)."""
        self._ensure_pool()
        try:
            loading = [asyncio.wrap_future(ready) for ready in self._loading]
            await asyncio.wait_for(asyncio.gather(*loading), MODEL_LOAD_SECONDS)
        except TimeoutError as exc:
            self._recycle("load_timeout")
            raise EmbeddingTimeout(timeout_seconds=MODEL_LOAD_SECONDS) from exc
        except BrokenProcessPool as exc:
            self._recycle("broken")
            raise EmbeddingError("embedding worker died while loading the model") from exc

    async def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        pool = self._ensure_pool()
        try:
            future = asyncio.wrap_future(pool.submit(_embed_in_worker, list(texts)))
            return await asyncio.wait_for(future, self._timeout)
        except TimeoutError as exc:
            if self._still_loading():
                # A new worker is loading the model, not overrunning: killing it would only
                # start another that must load again. This call gives up; a later one is
                # answered once the model is loaded.
                log.warning("embeddings.still_loading", timeout_seconds=self._timeout)
            else:
                self._recycle("timeout")
            raise EmbeddingTimeout(timeout_seconds=self._timeout) from exc
        except BrokenProcessPool as exc:
            self._recycle("broken")
            raise EmbeddingError("embedding worker died") from exc
        except ModelFilesError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"embedding failed: {type(exc).__name__}") from exc

    def _recycle(self, reason: str) -> None:
        """Drop the pool (killing its workers) so the next call starts fresh ones."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        log.warning("embeddings.pool_recycled", reason=reason)
        processes = list(getattr(pool, "_processes", {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.kill()

    def worker_pids(self) -> list[int]:
        """Process ids of the model workers running now (none before the first call)."""
        pool = self._pool
        processes = [] if pool is None else list(getattr(pool, "_processes", {}).values())
        return [process.pid for process in processes if process.pid is not None]

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, wait=True, cancel_futures=True)
