"""Topic clustering: groups, namespaces, entity bonus, time penalty and relates_to edges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from engram.memory.consolidation.topics import TopicItem, TopicParams, cluster

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def vec(degrees: float, plane: int = 0) -> np.ndarray:
    """A unit vector at ``degrees`` in the ``plane``-th pair of axes of an 8-d space."""
    v = np.zeros(8, dtype=np.float32)
    v[2 * plane] = np.cos(np.radians(degrees))
    v[2 * plane + 1] = np.sin(np.radians(degrees))
    return v


def item(
    key: int,
    embedding: np.ndarray,
    *,
    namespace: str = "default",
    entities: frozenset[str] = frozenset(),
    when: datetime = T0,
    words: frozenset[str] = frozenset(),
) -> TopicItem:
    """A topic item with the given fields."""
    return TopicItem(key, namespace, embedding, entities, when, words)


def test_two_tight_groups_and_an_outlier() -> None:
    """Two tight groups far apart are two topics and the outlier is a singleton."""
    items = [
        item(1, vec(0)),
        item(2, vec(5)),
        item(4, vec(0, plane=1)),
        item(3, vec(10)),
        item(5, vec(5, plane=1)),
        item(6, vec(0, plane=2)),
    ]
    assert [[1, 2, 3], [4, 5], [6]] == cluster(items)


def test_topics_follow_the_order_of_items() -> None:
    """Topics and their keys are in the order of the items given."""
    items = [item(9, vec(0, plane=1)), item(7, vec(0)), item(8, vec(3, plane=1))]
    assert [[9, 8], [7]] == cluster(items)


def test_empty_and_single_inputs() -> None:
    """No items give no topics; one item is a singleton topic."""
    assert [] == cluster([])
    assert [[1]] == cluster([item(1, vec(0))])


def test_namespaces_never_share_a_topic() -> None:
    """Identical records in different namespaces are in different topics."""
    items = [
        item(1, vec(0)),
        item(2, vec(0), namespace="other"),
        item(3, vec(1)),
        item(4, vec(1), namespace="other"),
    ]
    topics = cluster(items)
    assert [[1, 3], [2, 4]] == topics
    namespace = {i.key: i.partition for i in items}
    assert all(len({namespace[k] for k in topic}) == 1 for topic in topics)


def test_moderately_similar_records_stay_apart_without_evidence() -> None:
    """Two records at cosine 0.34 (below the threshold) are separate topics."""
    assert [[1], [2]] == cluster([item(1, vec(0)), item(2, vec(70))])


def test_shared_identifier_joins_moderately_similar_records() -> None:
    """Sharing an identifier adds the entity bonus and joins two moderate records."""
    shared = frozenset({"db-prod-2"})
    items = [item(1, vec(0), entities=shared), item(2, vec(70), entities=shared)]
    assert [[1, 2]] == cluster(items)


def test_different_identifiers_do_not_join() -> None:
    """Records naming different identifiers get no entity bonus."""
    items = [
        item(1, vec(0), entities=frozenset({"db-prod-2"})),
        item(2, vec(70), entities=frozenset({"db-prod-3"})),
    ]
    assert [[1], [2]] == cluster(items)


def test_entity_bonus_is_weighted() -> None:
    """With entity_weight 0 a shared identifier no longer joins the records."""
    shared = frozenset({"db-prod-2"})
    items = [item(1, vec(0), entities=shared), item(2, vec(70), entities=shared)]
    assert [[1], [2]] == cluster(items, params=TopicParams(entity_weight=0.0))


def test_time_penalty_splits_similar_records_a_year_apart() -> None:
    """Similar records a year apart are split; the same records ten days apart are joined."""
    near = [item(1, vec(0)), item(2, vec(30), when=T0 + timedelta(days=10))]
    far = [item(1, vec(0)), item(2, vec(30), when=T0 + timedelta(days=365))]
    assert [[1, 2]] == cluster(near)
    assert [[1], [2]] == cluster(far)
    assert [[1, 2]] == cluster(far, params=TopicParams(time_weight=0.0))


def test_relates_to_edge_joins_moderately_similar_records() -> None:
    """A relates_to edge between two moderate records joins them."""
    items = [item(1, vec(0)), item(2, vec(70))]
    assert [[1, 2]] == cluster(items, edges=[(1, 2)])
    assert [[1, 2]] == cluster(items, edges=[(2, 1)])


def test_edges_to_self_or_others_do_not_join() -> None:
    """Self edges and edges between other records add nothing to a pair."""
    items = [item(1, vec(0)), item(2, vec(70)), item(3, vec(0, plane=3))]
    assert [[1], [2], [3]] == cluster(items, edges=[(1, 1), (2, 2), (1, 3)])


def test_edge_alone_does_not_join_dissimilar_records() -> None:
    """An edge is a small bonus: it does not join records with little similarity."""
    items = [item(1, vec(0)), item(2, vec(80))]
    assert [[1], [2]] == cluster(items, edges=[(1, 2)])


def test_rare_shared_word_joins_moderately_similar_records() -> None:
    """Sharing a rare content word adds the lexical bonus."""
    items = [
        item(1, vec(0), words=frozenset({"etl", "nightly"})),
        item(2, vec(70), words=frozenset({"etl", "nightly"})),
        item(3, vec(0, plane=2), words=frozenset({"lunch"})),
    ]
    assert [[1, 2], [3]] == cluster(items)
    assert [[1], [2], [3]] == cluster(items, params=TopicParams(lexical_weight=0.0))


def test_words_shared_by_long_records_add_nothing() -> None:
    """Only short notes are joined by the words they share: two long texts share words by
    chance, so a record of ``long_words`` content words or more gets no lexical bonus."""
    common = {f"word{n}" for n in range(TopicParams().long_words - 1)}
    short = frozenset({"etl", "nightly"})
    long_ = frozenset(common | {"etl"})
    assert len(long_) == TopicParams().long_words
    items = [item(1, vec(0), words=short), item(2, vec(70), words=short)]
    assert [[1, 2]] == cluster(items)
    items = [item(1, vec(0), words=long_), item(2, vec(70), words=long_)]
    assert [[1], [2]] == cluster(items)
    items = [item(1, vec(0), words=short), item(2, vec(70), words=long_)]
    assert [[1], [2]] == cluster(items)


def test_a_chain_of_loose_links_does_not_fuse_its_ends() -> None:
    """Average linkage cuts a chain whose ends are unrelated into more than one topic."""
    items = [item(n, vec(50 * n)) for n in range(4)]  # neighbours at cosine 0.64
    topics = cluster(items)
    assert len(topics) > 1
    assert sorted(k for topic in topics for k in topic) == [0, 1, 2, 3]
