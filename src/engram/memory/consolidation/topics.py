"""Topics: which fast-path records are about the same thing.

Two records' *affinity* is the cosine similarity of their embeddings, plus a bonus for the
entities they share (identifiers, names, URLs, paths: Jaccard overlap) and for a
``relates_to`` edge between them, minus a penalty when their event times lie far apart::

    affinity = cos + lexical_weight * lexical + entity_weight * jaccard
               + edge_weight * edge - time_weight * gap
    gap      = min(1, max(0, days_apart - time_horizon_days) / 90)

``lexical`` is the cosine of the two records' content words weighted by their inverse
document frequency among the records clustered together: a rare word both use (a product
name the model has never seen, "ETL") counts for much, a common one for little.

Records are compared only within one namespace. Candidate pairs come from each record's
nearest neighbours by cosine (a blocked matrix product, never the full matrix at once); the
pairs at or above ``link`` make a sparse graph whose connected components are then cut by
average-linkage agglomerative clustering (SciPy) at ``1 - threshold``. Average linkage, not
the components alone: one chain of loosely similar records must not fuse two topics.

The defaults were chosen on the dev half of ``tests/data/consolidation`` only (ADR-018); the
test half reports how they generalise.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from numpy.typing import NDArray
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import squareform

BLOCK = 1024
NEIGHBOURS = 24
#: A component larger than this is cut by time into pieces of this size before linkage.
MAX_COMPONENT = 600


@dataclass(frozen=True, slots=True)
class TopicParams:
    """The clustering's knobs (see the module docstring)."""

    threshold: float = 0.44
    link: float = 0.34
    lexical_weight: float = 0.30
    entity_weight: float = 0.50
    edge_weight: float = 0.15
    time_weight: float = 0.50
    time_horizon_days: float = 21.0


@dataclass(frozen=True, slots=True)
class TopicItem:
    """What the clustering knows of one record."""

    key: int
    namespace: str
    embedding: NDArray[np.float32]
    entities: frozenset[str]
    event_time: datetime
    words: frozenset[str] = frozenset()


def cluster(
    items: Sequence[TopicItem],
    *,
    edges: Iterable[tuple[int, int]] = (),
    params: TopicParams | None = None,
) -> list[list[int]]:
    """The topics of ``items`` as lists of their keys (singletons included), each in the
    order of ``items``; ``edges`` are ``relates_to`` pairs of keys."""
    params = params or TopicParams()
    linked = {frozenset(pair) for pair in edges if pair[0] != pair[1]}
    by_namespace: dict[str, list[int]] = defaultdict(list)
    for index, item in enumerate(items):
        by_namespace[item.namespace].append(index)
    topics: list[list[int]] = []
    for indices in by_namespace.values():
        group = [items[i] for i in indices]
        topics.extend(
            [group[m].key for m in sorted(members)]
            for members in _cluster_group(group, linked, params)
        )
    order = {item.key: n for n, item in enumerate(items)}
    topics.sort(key=lambda keys: order[keys[0]])
    return topics


def _cluster_group(
    items: Sequence[TopicItem], linked: set[frozenset[int]], params: TopicParams
) -> list[list[int]]:
    n = len(items)
    if n == 1:
        return [[0]]
    vectors = _unit(np.stack([item.embedding for item in items]))
    weights = _idf(items)
    rows, cols = [], []
    for i, j in _candidate_pairs(vectors):
        if (
            _affinity(items, vectors, i, j, linked=linked, params=params, idf=weights)
            >= params.link
        ):
            rows.append(i)
            cols.append(j)
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    members: dict[int, list[int]] = defaultdict(list)
    for index, label in enumerate(labels):
        members[int(label)].append(index)
    result: list[list[int]] = []
    for component in members.values():
        for piece in _by_time(items, component):
            result.extend(_cut(items, vectors, piece, linked=linked, params=params, idf=weights))
    return result


def _idf(items: Sequence[TopicItem]) -> dict[str, float]:
    """Inverse document frequency of each content word among ``items`` (smoothed)."""
    counts: Counter[str] = Counter(w for item in items for w in item.words)
    n = len(items)
    return {w: math.log((1 + n) / (1 + c)) + 1.0 for w, c in counts.items()}


def _unit(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: NDArray[np.float32] = (matrix / norms).astype(np.float32)
    return unit


def _candidate_pairs(vectors: NDArray[np.float32]) -> set[tuple[int, int]]:
    """Each record paired with its nearest neighbours by cosine (i < j)."""
    n = vectors.shape[0]
    k = min(NEIGHBOURS, n - 1)
    pairs: set[tuple[int, int]] = set()
    for start in range(0, n, BLOCK):
        block = vectors[start : start + BLOCK] @ vectors.T
        for offset in range(block.shape[0]):
            block[offset, start + offset] = -np.inf
        nearest = np.argpartition(-block, k - 1, axis=1)[:, :k]
        for offset, row in enumerate(nearest):
            i = start + offset
            for j in row:
                pairs.add((min(i, int(j)), max(i, int(j))))
    return pairs


def _affinity(
    items: Sequence[TopicItem],
    vectors: NDArray[np.float32],
    i: int,
    j: int,
    *,
    linked: set[frozenset[int]],
    params: TopicParams,
    idf: dict[str, float],
) -> float:
    a, b = items[i], items[j]
    score = float(vectors[i] @ vectors[j])
    if params.lexical_weight and a.words and b.words:
        shared = sum(idf[w] ** 2 for w in a.words & b.words)
        norm = math.sqrt(sum(idf[w] ** 2 for w in a.words) * sum(idf[w] ** 2 for w in b.words))
        score += params.lexical_weight * (shared / norm if norm else 0.0)
    union = a.entities | b.entities
    if union:
        score += params.entity_weight * len(a.entities & b.entities) / len(union)
    if frozenset((a.key, b.key)) in linked:
        score += params.edge_weight
    days = abs((a.event_time - b.event_time).total_seconds()) / 86_400
    gap = min(1.0, max(0.0, days - params.time_horizon_days) / 90)
    return score - params.time_weight * gap


def _by_time(items: Sequence[TopicItem], component: list[int]) -> list[list[int]]:
    if len(component) <= MAX_COMPONENT:
        return [component]
    ordered = sorted(component, key=lambda i: items[i].event_time)
    return [ordered[s : s + MAX_COMPONENT] for s in range(0, len(ordered), MAX_COMPONENT)]


def _cut(
    items: Sequence[TopicItem],
    vectors: NDArray[np.float32],
    component: list[int],
    *,
    linked: set[frozenset[int]],
    params: TopicParams,
    idf: dict[str, float],
) -> list[list[int]]:
    """Average-linkage clusters of one component at affinity ``threshold``."""
    m = len(component)
    if m == 1:
        return [component]
    distance = np.zeros((m, m))
    for x in range(m):
        for y in range(x + 1, m):
            value = _affinity(
                items, vectors, component[x], component[y], linked=linked, params=params, idf=idf
            )
            distance[x, y] = distance[y, x] = max(0.0, 1.0 - value)
    tree = linkage(squareform(distance, checks=False), method="average")
    labels = fcluster(tree, t=1.0 - params.threshold, criterion="distance")
    groups: dict[int, list[int]] = defaultdict(list)
    for position, label in enumerate(labels):
        groups[int(label)].append(component[position])
    return list(groups.values())
