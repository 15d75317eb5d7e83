"""Hostile pass AI: start-up against a damaged model directory, with the real model files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engram.config import EMBEDDING_DIMENSION, EngramSettings
from engram.errors import ModelFilesError
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.infra.inprocess_embedder import InProcessEmbedder
from engram.infra.local_model import LocalModel
from engram.infra.model_files import DIGESTS, ONNX_FILE, SIZES, digest, ensure_default_model

#: What a copy cut short leaves: the first 5 MB of the 23 MB ONNX file.
CUT = 5_000_000


def _truncated_copy(model_dir: Path, into: Path) -> Path:
    shutil.copytree(model_dir, into)
    with (into / ONNX_FILE).open("r+b") as onnx:
        onnx.truncate(CUT)
    return into


def test_a_truncated_default_model_is_assembled_again(model_dir: Path, tmp_path: Path) -> None:
    """The default model directory is trusted on its stamp alone, so a model.onnx cut short
    after it was assembled (a restore or a copy of the data dir stopped half way) stayed:
    `engram prepare-model` said "ready" and every start failed to load it. A file whose size
    is not the pinned one now has the directory assembled again, and checked."""
    assert {name: (model_dir / name).stat().st_size for name in SIZES} == SIZES
    damaged = _truncated_copy(model_dir, tmp_path / "models" / "default")
    assert ensure_default_model(damaged)
    assert DIGESTS[ONNX_FILE] == digest(damaged / ONNX_FILE)
    assert not ensure_default_model(damaged)  # complete again: cheap from now on


@pytest.mark.parametrize("kind", [InProcessEmbedder, FastembedEmbedder])
async def test_a_model_that_cannot_be_loaded_is_named_with_its_directory(
    model_dir: Path, tmp_path: Path, kind: type[LocalModel]
) -> None:
    """A model directory of the operator's (ENGRAM_EMBEDDING_MODEL_PATH) holding a damaged
    file failed the start with "embedding failed: InvalidProtobuf": an infrastructure error
    (exit 5, "try again later") naming neither the directory nor the cause. It is now a
    model-files error naming the directory and the way to restore the default model."""
    damaged = _truncated_copy(model_dir, tmp_path / "mine")
    embedder = kind(
        damaged,
        model_name=EngramSettings().embedding_model_name,
        dimension=EMBEDDING_DIMENSION,
        timeout_seconds=60.0,
    )
    try:
        with pytest.raises(ModelFilesError) as failed:
            await embedder.start()
    finally:
        await embedder.close()
    assert f"the embedding model in {damaged} cannot be loaded" in failed.value.message
    assert "engram prepare-model" in failed.value.message
