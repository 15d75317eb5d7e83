"""The conflict detector on the labelled pair set, with the real embedding model."""

from __future__ import annotations

from collections import Counter

from benchmarks.conflict_eval import DEFAULT_PAIRS, LABELS, evaluate, load_pairs
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.types import MemoryType


def test_the_pair_set_covers_every_type_and_class() -> None:
    """At least 200 valid pairs, every memory type, every label at least 25 times."""
    pairs = load_pairs(DEFAULT_PAIRS)
    labels = Counter(pair.label for pair in pairs)
    assert True is (len(pairs) >= 200)
    assert set(MemoryType) == {pair.old.type for pair in pairs}
    assert [] == [label for label in LABELS if labels[label] < 25]


async def test_conflict_detection_meets_its_goals_on_the_labelled_pairs(
    embedder: FastembedEmbedder,
) -> None:
    """At least 90 % of the pairs are classified as labelled, and no true fact is retired."""
    result = await evaluate(embedder, DEFAULT_PAIRS)
    assert 0 == result["true_facts_retired_on_unrelated_or_refining"], result["misclassified"]
    assert [] == [goal for goal, met in result["goals"].items() if not met], result["accuracy"]
