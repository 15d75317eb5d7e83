"""The query adapter: a learned linear map applied to a question's embedding before search.

all-MiniLM-L6-v2 embeds a question and the record that answers it with the same encoder, so a
question worded differently from its answer ("who looks after the boiler" / "Henrik services
the heating every October") lands farther from it than a record that merely shares its words.
The adapter moves the question's vector, never a stored one: ``normalize((I + A) q)``, with
``A`` (384 x 384) learned from questions and the records that answer them, so that each
question's answers come out ahead of the other records of its store (a softmax over the store's
records, with a penalty on ``A``'s size that keeps the map close to the identity). Records are
embedded as before, so nothing stored changes and the adapter can be replaced or turned off
(``SearchTuning.query_adapter``) at any time.

``A`` is learned by ``tools/train_query_adapter.py`` from ``tests/data/retrieval/train_*``:
stores and questions by writers who never saw the evaluation set, in domains of their own.
Its settings were chosen on the evaluation set's dev half (ADR-015's amendment of 2026-11-28
has the figures). The file ships with the package (``query_adapter.npz``: ``A`` as float32 and
the name of the model it was learned for) and is read once, on the first search; a kernel
embedding with another model searches with its questions' vectors as they are.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from engram.retrieval.shipped import read_arrays

if TYPE_CHECKING:  # NumPy is loaded by the first search, not by every import of search
    import numpy as np
    import numpy.typing as npt

#: The learned map's file inside this package.
ADAPTER_FILE = "query_adapter.npz"


@cache
def _learned() -> tuple[str, npt.NDArray[np.float32]]:
    """The model's name and ``I + A``, read once from the package."""
    import numpy as np  # noqa: PLC0415 - see the imports

    stored = read_arrays(ADAPTER_FILE)
    delta = stored["delta"].astype(np.float32)
    model = str(stored["model"])
    if delta.ndim != 2 or delta.shape[0] != delta.shape[1]:
        raise ValueError(f"{ADAPTER_FILE} holds no square matrix: {delta.shape}")
    return model, np.eye(delta.shape[0], dtype=np.float32) + delta


def dimension() -> int:
    """The embedding dimension the adapter was learned for."""
    return int(_learned()[1].shape[0])


def learned_for(model_name: str) -> bool:
    """Whether the adapter was learned on the embeddings of ``model_name``."""
    return _learned()[0] == model_name


def adapt(vector: list[float]) -> list[float]:
    """The question's ``vector`` moved by the adapter and of unit length (see the module);
    unchanged when it has another dimension or the map would not move it to a direction."""
    import numpy as np  # noqa: PLC0415 - see the imports

    matrix = _learned()[1]
    if len(vector) != matrix.shape[0]:
        return vector
    moved = matrix @ np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(moved))
    if not np.isfinite(norm) or norm == 0.0:
        return vector
    result: list[float] = (moved / norm).tolist()
    return result
