"""The type prior: which kinds of memory a question is likely to be answered by.

A question says a lot about the kind of record that answers it: "how do I rotate the
certificate" wants a skill, "what went wrong on Friday" an episode, "why did we pick Kafka" a
decision, "where is the runbook" a resource. The embedding of a question is closer to the
records that share its topic than to those of the right kind, so among near neighbours the
kind is a useful tie-breaker. The prior is a multinomial logistic regression from the
question's embedding (the model's own, not the adapted one) to the eight memory types; the
default search adds ``TYPE_PRIOR_WEIGHT`` times the log of the probability of each candidate's
type (at least ``TYPE_FLOOR``, so a confidently wrong prior costs a candidate at most
``TYPE_PRIOR_WEIGHT * -log(TYPE_FLOOR)``, about 0.16) to the value it is ordered by
(:mod:`engram.retrieval.ranking`). It reads the question and the candidate's own type only,
so nothing a caller may not read can shift it.

The weights are learned by ``tools/train_query_types.py`` from ``tests/data/retrieval/train_*``
(questions by writers who never saw the evaluation set, each labelled with the types of the
records that answer it); the weight in the order was chosen on the evaluation set's dev half
(ADR-015, amendment of 2026-11-28, second). The file ships with the package
(``query_types.npz``) and is read once, on the first search that uses it; a kernel embedding
with another model orders without it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

from engram.retrieval.shipped import read_arrays

if TYPE_CHECKING:  # NumPy is loaded by the first search, not by every import of search
    import numpy as np
    import numpy.typing as npt

#: The learned weights' file inside this package.
PRIOR_FILE = "query_types.npz"
#: How much the log probability of a candidate's type adds to the value it is ordered by
#: (chosen on the dev half of tests/data/retrieval with benchmarks/retrieval_eval.py).
TYPE_PRIOR_WEIGHT = 0.04
#: The least probability a type is given, so one wrong guess cannot bury a record.
TYPE_FLOOR = 0.02


@cache
def _learned() -> tuple[str, tuple[str, ...], npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """The model's name, the types in row order, the weights and the intercepts."""
    import numpy as np  # noqa: PLC0415 - see the imports

    stored = read_arrays(PRIOR_FILE)
    weights = stored["coef"].astype(np.float32)
    intercepts = stored["intercept"].astype(np.float32)
    types = tuple(str(t) for t in stored["types"])
    model = str(stored["model"])
    if weights.ndim != 2 or weights.shape[0] != len(types) or intercepts.shape != (len(types),):
        raise ValueError(f"{PRIOR_FILE} does not hold one row of weights per type")
    return model, types, weights, intercepts


def learned_for(model_name: str) -> bool:
    """Whether the prior was learned on the embeddings of ``model_name``."""
    return _learned()[0] == model_name


def log_prior(vector: Sequence[float]) -> dict[str, float]:
    """Each memory type's log probability of answering the question embedded as ``vector``
    (at least ``log(TYPE_FLOOR)``); empty when the vector has another dimension or is not
    finite."""
    import numpy as np  # noqa: PLC0415 - see the imports

    _, types, weights, intercepts = _learned()
    if len(vector) != weights.shape[1]:
        return {}
    logits = weights @ np.asarray(vector, dtype=np.float32) + intercepts
    if not np.all(np.isfinite(logits)):
        return {}
    logits -= logits.max()
    probabilities = np.exp(logits)
    probabilities /= probabilities.sum()
    floor = math.log(TYPE_FLOOR)
    return {
        kind: max(floor, math.log(float(p))) if p > 0 else floor
        for kind, p in zip(types, probabilities, strict=True)
    }
