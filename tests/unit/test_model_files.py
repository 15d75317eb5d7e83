"""Assembling the offline embedding model from installed packages."""

from __future__ import annotations

from pathlib import Path

from engram.infra.model_files import REQUIRED_FILES, ensure_default_model, missing_files


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
