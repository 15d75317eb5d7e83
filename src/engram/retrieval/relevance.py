"""A hit's relevance: how likely it is to answer the query, calibrated on labelled queries.

A search orders its candidates by a value (:mod:`engram.retrieval.ranking`): the cosine
similarity of the query and the version, plus ``λ`` times the version's lexical share and a
weighted log probability of its type (:mod:`engram.retrieval.type_prior`) when the search
weighs the query's words (current heads with an embedding), or the similarity alone (as-of
and history searches, or ``lexical_weight`` 0). Neither number says how good a hit is: the
similarity of an answer may be 0.35 for one query and that of a wrong record 0.7 for another,
because how close the nearest wrong record comes depends on the store. The
*relevance* is a logistic function of two numbers: the value, and how far it falls below the
best candidate's value in the same search (a hit well ahead of the rest is more often the
answer than one among equals). It is fitted on labelled hits, the top ten of each dev query of
``tests/data/retrieval`` (1,064 memories with many confusable neighbours) and of
``tests/data/mcp_recall`` (60 memories, and questions nothing stored answers), to the share
of hits that answered their query. A relevance of 0.6 means: of the labelled hits scored
about 0.6, about six in ten answered the question.

``benchmarks/relevance_calibration.py --half dev --fit`` fits the two curves (one per kind of
value) and the same script checks them on the test halves. Within one search the relevance
falls as the value does, so it never rises down the list of hits, and a client that keeps
only hits above some relevance keeps a prefix of them. (``min_score`` is a floor on the
similarity, not on this: ADR-015.) The curves hold for the product's weights (0.3, 0.04); other
tunings are ordered by their own value and get a relevance that is only approximate. This is
not the *relevance* of decay (``TemporalEngine.compute_decay``), which weighs a record's age
and use.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar
from uuid import UUID

from engram.retrieval.ranking import Candidate

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class Calibration:
    """``relevance = 1 / (1 + exp(-(slope * value + gap_slope * (value - best) + intercept)))``
    where ``best`` is the value of the best candidate of the same search. Both slopes are
    positive, so within one search the relevance falls with the value, as the order does."""

    slope: float
    gap_slope: float
    intercept: float

    def __call__(self, value: float, best: float) -> float:
        """The relevance of a candidate ordered by ``value`` in a search whose best candidate
        has ``best``, in [0, 1]."""
        z = self.slope * value + self.gap_slope * (value - best) + self.intercept
        if z < -60.0:  # exp overflows beyond ~709; the answer is 0 or 1 to 26 digits anyway
            return 0.0
        if z > 60.0:
            return 1.0
        return 1.0 / (1.0 + math.exp(-z))


#: For similarity + 0.3 * lexical share + 0.04 * log type prior (the default search of current
#: heads).
WITH_WORDS = Calibration(slope=6.926, gap_slope=10.726, intercept=-3.668)
#: For the similarity alone (versioned searches, or no lexical weight).
SIMILARITY_ONLY = Calibration(slope=8.171, gap_slope=14.479, intercept=-4.46)


def beside_best(values: Mapping[K, float], curve: Calibration) -> dict[K, float]:
    """The relevance of each of one search's values, beside the best of them."""
    best = max(values.values(), default=0.0)
    return {item: curve(value, best) for item, value in values.items()}


def candidate_relevance(
    candidates: Sequence[Candidate], similarity: Mapping[UUID, float], *, weighed: bool
) -> dict[UUID, float]:
    """Each candidate's calibrated relevance (none for a candidate of unknown similarity):
    from the value it is ordered by when the words were weighed, else from its similarity,
    each beside the best such value among the candidates (which the caller may all read)."""
    if weighed:
        values = {item: value for item, value, _ in candidates if item in similarity}
        return beside_best(values, WITH_WORDS)
    return beside_best(similarity, SIMILARITY_ONLY)
