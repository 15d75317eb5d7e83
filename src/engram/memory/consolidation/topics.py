"""Topics: which fast-path records are about the same thing.

Two records' *affinity* is the cosine similarity of their embeddings, plus a bonus for the
entities they share (identifiers, names, URLs, paths: Jaccard overlap) and for a
``relates_to`` edge between them, minus a penalty when their event times lie far apart::

    affinity = cos + lexical_weight * lexical + entity_weight * jaccard
               + edge_weight * edge - time_weight * gap
    gap      = min(1, max(0, days_apart - time_horizon_days) / 90)

``lexical`` is the cosine of the two records' content words weighted by their inverse
document frequency among the records clustered together: a rare word both use (a product
name the model has never seen, "ETL") counts for much, a common one for little. It is 0 when
either record has ``long_words`` content words or more: a long text shares words with any other
by chance (in the dev half, two long records of different topics had a median lexical cosine
of 0.09, two short ones 0.00), so only short notes are joined by the words they share.

Records are compared only within one *partition* (the planner makes one per namespace and
access level). Candidate pairs come from each record's
nearest neighbours by cosine (a blocked matrix product, never the full matrix at once); the
pairs at or above ``link`` make a sparse graph whose connected components are then cut by
average-linkage agglomerative clustering (SciPy) at ``1 - threshold``. Average linkage, not
the components alone: one chain of loosely similar records must not fuse two topics.

The defaults were chosen on the dev half of ``tests/data/consolidation`` only (ADR-018); the
test half reports how they generalise.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

BLOCK = 256
NEIGHBOURS = 24
#: A component larger than this is cut by time into pieces of this size before linkage.
MAX_COMPONENT = 1000
#: Candidate pairs scored at once.
PAIR_SLICE = 8192


@dataclass(frozen=True, slots=True)
class TopicParams:
    """The clustering's knobs (see the module docstring)."""

    threshold: float = 0.42
    link: float = 0.32
    lexical_weight: float = 1.3
    entity_weight: float = 0.50
    edge_weight: float = 0.15
    time_weight: float = 0.50
    time_horizon_days: float = 21.0
    long_words: int = 48


@dataclass(frozen=True, slots=True)
class TopicItem:
    """What the clustering knows of one record."""

    key: int
    partition: str
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
    by_partition: dict[str, list[int]] = defaultdict(list)
    for index, item in enumerate(items):
        by_partition[item.partition].append(index)
    topics: list[list[int]] = []
    for indices in by_partition.values():
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
    # SciPy takes about half a second to import: paid by consolidation, not by every command.
    from scipy.sparse import coo_matrix  # noqa: PLC0415
    from scipy.sparse.csgraph import connected_components  # noqa: PLC0415

    n = len(items)
    if n == 1:
        return [[0]]
    features = _Features(items, linked, params)
    left, right = _candidate_pairs(features.vectors)
    # in slices: gathering both sides' rows for every pair at once would take ~1 GB at 10,000
    keep = np.concatenate(
        [
            features.pairs(left[s : s + PAIR_SLICE], right[s : s + PAIR_SLICE]) >= params.link
            for s in range(0, len(left), PAIR_SLICE)
        ]
        or [np.zeros(0, dtype=bool)]
    )
    graph = coo_matrix((np.ones(int(keep.sum())), (left[keep], right[keep])), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    members: dict[int, list[int]] = defaultdict(list)
    for index, label in enumerate(labels):
        members[int(label)].append(index)
    result: list[list[int]] = []
    for component in members.values():
        for piece in _by_time(items, component):
            result.extend(_cut(features, piece, params))
    return result


class _Features:
    """The affinity's terms for one group of records, as arrays (see the module docstring):
    unit embeddings, IDF-weighted word vectors (unit length), entity indicator rows, event
    days and ``relates_to`` pairs (by position in the group)."""

    def __init__(
        self, items: Sequence[TopicItem], linked: set[frozenset[int]], params: TopicParams
    ) -> None:
        self.params = params
        self.vectors = _unit(np.stack([item.embedding for item in items]))
        self.words = _rows(
            [item.words if len(item.words) < params.long_words else frozenset() for item in items],
            idf=True,
        )
        self.entities = _rows([item.entities for item in items], idf=False)
        self.entity_counts = np.asarray(self.entities.sum(axis=1)).ravel()
        epoch = min(item.event_time for item in items)
        self.days = np.array([(item.event_time - epoch).total_seconds() / 86_400 for item in items])
        position = {item.key: n for n, item in enumerate(items)}
        self.linked = {
            (min(a, b), max(a, b))
            for a, b in (
                tuple(position[k] for k in pair) for pair in linked if pair <= position.keys()
            )
        }

    def pairs(self, left: NDArray[np.int64], right: NDArray[np.int64]) -> NDArray[np.float64]:
        """The affinity of each pair (left[k], right[k])."""
        p = self.params
        score = np.einsum("ij,ij->i", self.vectors[left], self.vectors[right]).astype(np.float64)
        score += p.lexical_weight * _row_dots(self.words, left, right)
        shared = _row_dots(self.entities, left, right)
        union = self.entity_counts[left] + self.entity_counts[right] - shared
        score += p.entity_weight * np.divide(
            shared, union, out=np.zeros_like(shared), where=union > 0
        )
        if self.linked:
            score += p.edge_weight * np.array(
                [(min(a, b), max(a, b)) in self.linked for a, b in zip(left, right, strict=True)]
            )
        result: NDArray[np.float64] = score - p.time_weight * self._gap(
            np.abs(self.days[left] - self.days[right])
        )
        return result

    def block(self, members: Sequence[int]) -> NDArray[np.float64]:
        """The affinity of every pair among ``members`` (a square matrix)."""
        p = self.params
        index = np.asarray(members)
        score = (self.vectors[index] @ self.vectors[index].T).astype(np.float64)
        words = self.words[index]
        score += p.lexical_weight * (words @ words.T).toarray()
        entities = self.entities[index]
        shared = (entities @ entities.T).toarray()
        counts = self.entity_counts[index]
        union = counts[:, None] + counts[None, :] - shared
        score += p.entity_weight * np.divide(
            shared, union, out=np.zeros_like(shared), where=union > 0
        )
        if self.linked:
            where = {int(m): n for n, m in enumerate(index)}
            for a, b in self.linked:
                if a in where and b in where:
                    score[where[a], where[b]] += p.edge_weight
                    score[where[b], where[a]] += p.edge_weight
        days = self.days[index]
        result: NDArray[np.float64] = score - p.time_weight * self._gap(
            np.abs(days[:, None] - days[None, :])
        )
        return result

    def _gap(self, days: NDArray[np.float64]) -> NDArray[np.float64]:
        horizon = self.params.time_horizon_days
        gap: NDArray[np.float64] = np.clip((days - horizon) / 90, 0.0, 1.0)
        return gap


def _rows(sets: Sequence[frozenset[str]], *, idf: bool) -> csr_matrix:
    """One row per set over the union of their members: IDF weights scaled to unit length
    (``idf``), or plain indicators."""
    from scipy.sparse import csr_matrix  # noqa: PLC0415

    vocabulary: dict[str, int] = {}
    rows, cols = [], []
    for n, members in enumerate(sets):
        for member in members:
            rows.append(n)
            cols.append(vocabulary.setdefault(member, len(vocabulary)))
    shape = (len(sets), max(1, len(vocabulary)))
    matrix = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)
    if not idf:
        return matrix
    frequency = np.asarray(matrix.sum(axis=0)).ravel()
    weights = np.log((1 + len(sets)) / (1 + frequency)) + 1.0
    weighted = csr_matrix(matrix.multiply(weights[None, :]))
    norms = np.sqrt(np.asarray(weighted.multiply(weighted).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return csr_matrix(weighted.multiply(1.0 / norms[:, None]))


def _row_dots(
    matrix: csr_matrix, left: NDArray[np.int64], right: NDArray[np.int64]
) -> NDArray[np.float64]:
    dots: NDArray[np.float64] = np.asarray(matrix[left].multiply(matrix[right]).sum(axis=1)).ravel()
    return dots


def _unit(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: NDArray[np.float32] = (matrix / norms).astype(np.float32)
    return unit


def _candidate_pairs(vectors: NDArray[np.float32]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Each record paired with its nearest neighbours by cosine, as (left, right) with
    left < right, each pair once."""
    n = vectors.shape[0]
    k = min(NEIGHBOURS, n - 1)
    found: list[NDArray[np.int64]] = []
    for start in range(0, n, BLOCK):
        block = vectors[start : start + BLOCK] @ vectors.T
        rows = np.arange(block.shape[0])
        block[rows, start + rows] = -np.inf
        nearest = np.argpartition(-block, k - 1, axis=1)[:, :k]
        i = np.repeat(start + rows, k)
        j = nearest.ravel()
        found.append(np.stack([np.minimum(i, j), np.maximum(i, j)], axis=1))
    pairs = np.unique(np.concatenate(found), axis=0)
    return pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)


def _by_time(items: Sequence[TopicItem], component: list[int]) -> list[list[int]]:
    if len(component) <= MAX_COMPONENT:
        return [component]
    ordered = sorted(component, key=lambda i: items[i].event_time)
    return [ordered[s : s + MAX_COMPONENT] for s in range(0, len(ordered), MAX_COMPONENT)]


def _cut(features: _Features, component: list[int], params: TopicParams) -> list[list[int]]:
    """Average-linkage clusters of one component at affinity ``threshold``."""
    from scipy.cluster.hierarchy import fcluster, linkage  # noqa: PLC0415
    from scipy.spatial.distance import squareform  # noqa: PLC0415

    if len(component) == 1:
        return [component]
    distance = np.maximum(0.0, 1.0 - features.block(component))
    np.fill_diagonal(distance, 0.0)
    tree = linkage(squareform(distance, checks=False), method="average")
    labels = fcluster(tree, t=1.0 - params.threshold, criterion="distance")
    groups: dict[int, list[int]] = defaultdict(list)
    for position, label in enumerate(labels):
        groups[int(label)].append(component[position])
    return list(groups.values())
