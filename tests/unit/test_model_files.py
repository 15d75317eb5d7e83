"""Assembling the offline embedding model from installed packages."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram.errors import ModelFilesError
from engram.infra import model_files
from engram.infra.model_files import (
    DIGESTS,
    REQUIRED_FILES,
    TOKENIZER_FILES,
    digest,
    ensure_default_model,
    missing_files,
)


def test_assembles_every_file_once(tmp_path: Path) -> None:
    """The first call copies every required file; the second finds them and copies nothing."""
    target = tmp_path / "model"
    assert list(REQUIRED_FILES) == missing_files(target)
    assert ensure_default_model(target)
    assert [] == missing_files(target)
    assert not ensure_default_model(target)


def test_repairs_an_incomplete_directory(tmp_path: Path) -> None:
    """A directory missing a file (an interrupted copy) is completed on the next call."""
    target = tmp_path / "model"
    ensure_default_model(target)
    (target / "tokenizer.json").unlink()
    assert ["tokenizer.json"] == missing_files(target)
    assert ensure_default_model(target)
    assert [] == missing_files(target)


def test_every_assembled_file_has_its_pinned_digest(tmp_path: Path) -> None:
    """What lands in the model directory is byte for byte the pinned model."""
    target = tmp_path / "model"
    ensure_default_model(target)
    assert DIGESTS == {name: digest(target / name) for name in REQUIRED_FILES}


def test_a_source_that_is_not_the_pinned_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tokenizer file that differs from the pinned one stops the assembly, naming it, and
    leaves no stamp that would let a later start trust the directory."""
    fake = tmp_path / "sources"
    fake.mkdir()
    for name in TOKENIZER_FILES:
        (fake / name).write_bytes((model_files._TOKENIZER_DIR / name).read_bytes())
    (fake / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    monkeypatch.setattr(model_files, "_TOKENIZER_DIR", fake)
    target = tmp_path / "model"
    with pytest.raises(ModelFilesError, match=r"vocab\.txt"):
        ensure_default_model(target)
    assert not (target / model_files._STAMP).exists()


def test_a_stamp_of_other_digests_means_a_fresh_check(tmp_path: Path) -> None:
    """A directory assembled under other pins (an older engram) is checked and recopied."""
    target = tmp_path / "model"
    ensure_default_model(target)
    (target / model_files._STAMP).write_text("0" * 64 + "\n")
    assert ensure_default_model(target)
