"""The real embedding model (all-MiniLM-L6-v2, int8 ONNX) in its worker process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from engram.config import EngramSettings
from engram.errors import EmbeddingError, EmbeddingTimeout, ModelFilesError
from engram.infra.fastembed_embedder import FastembedEmbedder


def _cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


async def test_vectors_are_unit_length_and_of_the_schema_dimension(
    embedder: FastembedEmbedder,
) -> None:
    """Each vector has 384 values and unit norm (cosine = dot product)."""
    vector = await embedder.embed_one("The ledger service runs on PostgreSQL 16.")
    assert 384 == len(vector) == embedder.dimension
    assert abs(1.0 - float(np.linalg.norm(vector))) < 1e-3


async def test_a_paraphrase_scores_clearly_above_an_unrelated_sentence(
    embedder: FastembedEmbedder,
) -> None:
    """Two wordings of one fact are close; an unrelated sentence is far."""
    base, paraphrase, unrelated = await embedder.embed_batch(
        [
            "The billing API authenticates requests with JWT bearer tokens.",
            "Requests to the billing API are authorised using JSON web tokens.",
            "My grandmother grows tomatoes on her balcony every summer.",
        ]
    )
    close, far = _cos(base, paraphrase), _cos(base, unrelated)
    assert close > 0.5
    assert far < 0.2
    assert close - far > 0.4


async def test_batches_keep_their_order(embedder: FastembedEmbedder) -> None:
    """embed_batch returns one vector per text, in the order given."""
    texts = ["alpha release notes", "the cat sat on the mat", "alpha release notes"]
    vectors = await embedder.embed_batch(texts)
    assert 3 == len(vectors)
    assert _cos(vectors[0], vectors[2]) > 0.999
    assert _cos(vectors[0], vectors[1]) < 0.9
    assert [] == await embedder.embed_batch([])


async def test_missing_model_files_are_reported(tmp_path: Path) -> None:
    """A model directory without its files fails with a message saying what to run."""
    adapter = FastembedEmbedder(tmp_path, model_name="local/none", timeout_seconds=5)
    with pytest.raises(ModelFilesError, match="prepare-model"):
        await adapter.embed_one("x")


async def test_an_overrun_times_out_and_the_next_call_recovers(model_dir: Path) -> None:
    """A call that exceeds its time limit fails typed; the pool is replaced and works again."""
    adapter = FastembedEmbedder(
        model_dir, model_name="sentence-transformers/all-MiniLM-L6-v2-int8", timeout_seconds=0.001
    )
    try:
        with pytest.raises(EmbeddingTimeout):
            await adapter.embed_one("the first call also loads the model, far beyond 1 ms")
        adapter._timeout = 30.0
        assert 384 == len(await adapter.embed_one("recovered"))
    finally:
        await adapter.close()


async def test_a_killed_worker_fails_typed_and_is_replaced(model_dir: Path) -> None:
    """Killing the worker process turns into EmbeddingError; the next call starts a new one."""
    adapter = FastembedEmbedder(
        model_dir, model_name="sentence-transformers/all-MiniLM-L6-v2-int8", timeout_seconds=30
    )
    try:
        await adapter.start()
        pool = adapter._pool
        assert pool is not None
        for process in list(pool._processes.values()):
            os.kill(process.pid, 9)
            process.join(5)
        with pytest.raises(EmbeddingError):
            await adapter.embed_one("the worker is gone")
        assert 384 == len(await adapter.embed_one("a new worker answers"))
    finally:
        await adapter.close()


_OWNER = """
import asyncio, os, sys
from pathlib import Path
from engram.infra.fastembed_embedder import FastembedEmbedder

async def main() -> None:
    embedder = FastembedEmbedder(Path(sys.argv[1]), model_name=sys.argv[2], timeout_seconds=60)
    await embedder.embed_one("warm up")
    print(" ".join(str(p) for p in embedder.worker_pids()), flush=True)
    await asyncio.sleep(3600)

if __name__ == "__main__":
    asyncio.run(main())
"""


def test_model_workers_exit_when_their_owner_is_killed(model_dir: Path, tmp_path: Path) -> None:
    """SIGKILL of the process that owns the embedder leaves no model worker running."""
    script = tmp_path / "owner.py"
    script.write_text(_OWNER)
    with subprocess.Popen(  # noqa: S603 - this interpreter, a script the test wrote
        [sys.executable, str(script), str(model_dir), EngramSettings().embedding_model_name],
        stdout=subprocess.PIPE,
        text=True,
    ) as owner:
        assert owner.stdout is not None
        workers = [int(pid) for pid in owner.stdout.readline().split()]
        assert workers, "the owner reported no worker"
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [] == [pid for pid in workers if _alive(pid)]


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, already exited, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
