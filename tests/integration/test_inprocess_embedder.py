"""The model on a thread of the kernel's own process (``ENGRAM_EMBEDDING_WORKERS=0``)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np
import pytest

from engram import open_kernel
from engram.config import EngramSettings
from engram.errors import EmbeddingError, EmbeddingTimeout, ModelFilesError
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.infra.inprocess_embedder import InProcessEmbedder
from engram.memory.gate.access import caller_for_tier
from engram.memory.types import GateDecision, TrustLevel
from engram.protocols.inprocess import AgentSession
from tests.conftest import ScratchDatabase

MODEL = "sentence-transformers/all-MiniLM-L6-v2-int8"
TEXTS = [
    "The ledger service runs on PostgreSQL 16.",
    "Deploys to production need two approvals.",
    "x",
    "The nightly backup of the billing database finishes by 03:00 UTC and is kept 35 days.",
]


async def test_vectors_equal_the_worker_processes(
    model_dir: Path, embedder: FastembedEmbedder
) -> None:
    """The same model file gives the same vectors in this process as in a worker."""
    local = InProcessEmbedder(model_dir, model_name=MODEL, timeout_seconds=30)
    try:
        await local.start()
        here = np.array(await local.embed_batch(TEXTS))
        there = np.array(await embedder.embed_batch(TEXTS))
        assert here.shape == (len(TEXTS), 384)
        assert np.abs(here - there).max() < 1e-5
        assert [] == await local.embed_batch([])
        assert [] == local.worker_pids()
    finally:
        await local.close()


async def test_concurrent_calls_keep_their_order_and_their_texts(model_dir: Path) -> None:
    """Calls made at once are run one after another on the model's thread, each answered
    with its own text's vector."""
    local = InProcessEmbedder(model_dir, model_name=MODEL, timeout_seconds=30)
    try:
        alone = [await local.embed_one(text) for text in TEXTS]
        together = await asyncio.gather(*(local.embed_one(text) for text in TEXTS))
        assert np.abs(np.array(alone) - np.array(together)).max() < 1e-5
    finally:
        await local.close()


async def test_an_overrun_fails_typed_and_later_calls_recover(model_dir: Path) -> None:
    """A call beyond its time limit raises EmbeddingTimeout; the computation it started
    finishes on its thread, and the next call with a sane limit answers."""
    local = InProcessEmbedder(model_dir, model_name=MODEL, timeout_seconds=0.001)
    try:
        with pytest.raises(EmbeddingTimeout):
            await local.embed_one("the first call also loads the model, far beyond 1 ms")
        local._timeout = 30.0
        assert 384 == len(await local.embed_one("recovered"))
    finally:
        await local.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("engram-model")]


async def test_closing_fails_the_calls_still_waiting_typed(model_dir: Path) -> None:
    """close() lets the running computation finish and fails the calls queued behind it with
    EmbeddingError (not a CancelledError their callers never asked for)."""
    local = InProcessEmbedder(model_dir, model_name=MODEL, timeout_seconds=30)
    await local.start()
    calls = [asyncio.ensure_future(local.embed_batch(TEXTS * 8)) for _ in range(4)]
    await asyncio.sleep(0.02)  # the first batch is on the model's thread now
    await local.close()
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert isinstance(outcomes[0], list)
    assert len(outcomes[0]) == len(TEXTS) * 8
    assert all(isinstance(outcome, EmbeddingError) for outcome in outcomes[1:]), outcomes


async def test_odd_text_embeds_or_fails_typed_and_the_model_goes_on(model_dir: Path) -> None:
    """Empty, blank, 200,000-character, other-script, NUL and emoji text get unit vectors; a
    lone surrogate (which the adapters refuse before it gets here) fails with EmbeddingError,
    not another exception, and the next call still answers."""
    local = InProcessEmbedder(model_dir, model_name=MODEL, timeout_seconds=30)
    try:
        for text in ["", "   ", "x" * 200_000, "日本語のテキスト", "a\x00b", "🙂" * 1000]:
            vector = np.array(await local.embed_one(text))
            assert vector.shape == (384,)
            assert abs(1.0 - float(np.linalg.norm(vector))) < 1e-3, text[:10]
        with pytest.raises(EmbeddingError):
            await local.embed_one("\ud800")
        assert 384 == len(await local.embed_one("still answering"))
    finally:
        await local.close()


async def test_missing_model_files_are_reported(tmp_path: Path) -> None:
    """A directory without the model's files fails with a message saying what to run."""
    local = InProcessEmbedder(tmp_path, model_name="local/none", timeout_seconds=5)
    with pytest.raises(ModelFilesError, match="prepare-model"):
        await local.embed_one("x")


async def test_a_kernel_with_no_workers_writes_and_finds(
    database: ScratchDatabase, model_dir: Path
) -> None:
    """``embedding_workers=0``: the kernel starts no model process, and a governed write and
    a search work as with one."""
    settings = EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        embedding_model_path=model_dir,
        embedding_workers=0,
    )
    async with open_kernel(settings=settings) as kernel:
        agent = caller_for_tier("planner", TrustLevel.STANDARD)
        result = await AgentSession(kernel, agent).remember(
            {"type": "belief", "content": "The ledger service runs on PostgreSQL 16."}
        )
        assert GateDecision.APPROVED is result.decision
        found = await kernel.retrieval.search(agent, "which database does the ledger use")
        assert [result.record_id] == [hit.record.record_id for hit in found.hits]
        inner = kernel.embeddings
        assert isinstance(getattr(inner, "_inner", inner), InProcessEmbedder)


@pytest.mark.parametrize("spin", [False, True])
def test_the_model_session_is_opened_with_the_spinning_setting(model_dir: Path, spin: bool) -> None:
    """``load_model`` opens the ONNX session itself: its idle threads sleep unless ``spin``,
    and the vectors do not depend on the setting (fastembed's own load, without the setting,
    is the reference)."""
    from fastembed import TextEmbedding  # noqa: PLC0415 - the reference of this test only

    from engram.infra.fastembed_embedder import embed_texts, load_model  # noqa: PLC0415

    model = load_model(str(model_dir), MODEL, "mean", 384, 2, spin=spin)
    options = model.model.model.get_session_options()
    entry = "session.intra_op.allow_spinning"
    if spin:  # ONNX Runtime's default, which spins
        with pytest.raises(RuntimeError, match="does not have configuration"):
            options.get_session_config_entry(entry)
    else:
        assert "0" == options.get_session_config_entry(entry)
    reference = TextEmbedding(
        model_name=MODEL, specific_model_path=str(model_dir), local_files_only=True, threads=2
    )
    expected = np.array(list(reference.embed(TEXTS)))
    assert np.allclose(np.array(embed_texts(model, TEXTS)), expected, atol=1e-6)


def test_the_model_session_is_opened_once(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fastembed does not open a session of its own that ``load_model`` then replaces (the
    replaced one's memory stayed with the process: about 60 MB, ADR-016)."""
    import onnxruntime as ort  # noqa: PLC0415 - observed by this test only

    from engram.infra.fastembed_embedder import load_model  # noqa: PLC0415

    opened: list[str] = []
    real = ort.InferenceSession

    def counting(path: str, *args: object, **kwargs: object) -> object:
        opened.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", counting)
    load_model(str(model_dir), MODEL, "mean", 384, 2)
    assert 1 == len(opened)
