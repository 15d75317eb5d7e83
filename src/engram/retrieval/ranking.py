"""The order of search hits: rank fusion of the legs, then semantic and lexical evidence.

The legs' rankings are first merged by reciprocal rank fusion, which gathers the
candidates and orders them when nothing better is known (no query embedding). With an
embedding each candidate is then ordered by its similarity to the query plus ``λ`` times its
*lexical share*: the part of the query's words (stemmed) the candidate holds, each word
weighed by how rare it is among the candidates (``log(1 + n / df)``, n candidates, df of them
holding it; a word none holds weighs the most). A shared rare word lifts a record; words
every candidate holds count for little. The search passes only candidates the caller may
read (heads of current records), so nothing else shapes the weights. The default search also
adds a weighted log probability that a record of the candidate's type answers the question
(:mod:`engram.retrieval.type_prior`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from uuid import UUID

#: The constant of reciprocal rank fusion (Cormack et al. use 60).
RRF_K = 60

Candidate = tuple[UUID, float, dict[str, int]]


def fuse(
    rankings: Mapping[str, Sequence[UUID]],
    *,
    k: int = RRF_K,
    values: Mapping[str, Sequence[float]] | None = None,
) -> list[Candidate]:
    """Reciprocal rank fusion of several rankings of ids; best first, ties by the best rank
    either leg gave. ``values``: for a leg, the value it ordered by, position for position;
    ids of equal value share the rank of the first of them (the leg cannot tell them apart,
    and which comes first would otherwise follow their random ids)."""
    scores: dict[UUID, float] = {}
    ranks: dict[UUID, dict[str, int]] = {}
    for leg, ids in rankings.items():
        ordered_by = (values or {}).get(leg)
        rank = 0
        for position, item in enumerate(ids, start=1):
            if (
                ordered_by is None
                or position == 1
                or ordered_by[position - 1] != ordered_by[position - 2]
            ):
                rank = position
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
            ranks.setdefault(item, {})[leg] = rank
    ordered = sorted(scores, key=lambda item: (-scores[item], min(ranks[item].values())))
    return [(item, scores[item], ranks[item]) for item in ordered]


def lexical_shares(
    words: Sequence[str], matched: Mapping[UUID, Sequence[str]]
) -> dict[UUID, float]:
    """Each candidate's rarity-weighted share (0-1) of the query's ``words``."""
    if not words or not matched:
        return dict.fromkeys(matched, 0.0)
    held: dict[str, int] = {}
    for found in matched.values():
        for word in set(found):
            held[word] = held.get(word, 0) + 1
    count = len(matched)
    weight = {word: math.log(1 + count / held.get(word, 0.5)) for word in set(words)}
    total = sum(weight.values())
    return {
        item: sum(weight[word] for word in set(found) if word in weight) / total
        for item, found in matched.items()
    }


def rerank(
    candidates: Sequence[Candidate],
    similarity: Mapping[UUID, float],
    lexical: Mapping[UUID, float],
    *,
    weight: float,
    prior: Mapping[UUID, float] | None = None,
    prior_weight: float = 0.0,
) -> list[Candidate]:
    """The candidates by similarity + ``weight`` * lexical share + ``prior_weight`` * the log
    probability of their type (``prior``; an unknown similarity or prior counts 0), best first;
    each keeps its ranks and carries that sum; ties keep the fused order."""
    prior = prior or {}
    scored = [
        (
            item,
            similarity.get(item, 0.0)
            + weight * lexical.get(item, 0.0)
            + prior_weight * prior.get(item, 0.0),
            ranks,
        )
        for item, _, ranks in candidates
    ]
    order = sorted(range(len(scored)), key=lambda i: (-scored[i][1], i))
    return [scored[i] for i in order]
