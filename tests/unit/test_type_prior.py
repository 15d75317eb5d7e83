"""The type prior shipped with the package (engram.retrieval.type_prior)."""

from __future__ import annotations

import math
import random
from uuid import uuid4

from engram.config import EngramSettings
from engram.memory.types import MemoryType
from engram.retrieval.ranking import rerank
from engram.retrieval.type_prior import TYPE_FLOOR, TYPE_PRIOR_WEIGHT, learned_for, log_prior
from tests.unit.vectors import unit_vector


def test_the_prior_is_learned_for_the_default_model_over_every_type() -> None:
    """The shipped weights name the default model and give every memory type a value."""
    assert learned_for(EngramSettings().embedding_model_name)
    assert not learned_for("BAAI/bge-small-en-v1.5")
    rng = random.Random(5)  # noqa: S311 - test vectors, not secrets
    prior = log_prior(unit_vector(rng, 384))
    assert set(prior) == {t.value for t in MemoryType}


def test_each_type_gets_a_log_probability_no_lower_than_the_floor() -> None:
    """Probabilities sum to one before the floor; after it none is below TYPE_FLOOR, and one
    wrong guess costs a candidate at most TYPE_PRIOR_WEIGHT * -log(TYPE_FLOOR)."""
    rng = random.Random(7)  # noqa: S311 - test vectors, not secrets
    for _ in range(20):
        prior = log_prior(unit_vector(rng, 384))
        assert all(math.log(TYPE_FLOOR) <= value <= 0.0 for value in prior.values())
        unfloored = [math.exp(v) for v in prior.values() if v > math.log(TYPE_FLOOR)]
        assert sum(unfloored) <= 1.0 + 1e-5
    assert TYPE_PRIOR_WEIGHT * -math.log(TYPE_FLOOR) < 0.2


def test_vectors_the_prior_cannot_read_give_no_prior() -> None:
    """Another model's dimension, or values that are not finite: no prior, so the order is
    that of similarity and words alone."""
    assert log_prior([0.6, 0.8]) == {}
    assert log_prior([math.nan] * 384) == {}
    assert log_prior([math.inf] + [0.0] * 383) == {}


def test_the_prior_adds_its_weighted_log_probability_to_the_order() -> None:
    """rerank adds prior_weight * prior to similarity + weight * lexical share; a candidate
    with no prior gets nothing added."""
    a, b, c = uuid4(), uuid4(), uuid4()
    candidates = [(a, 0.0, {"vector": 1}), (b, 0.0, {"vector": 2}), (c, 0.0, {"vector": 3})]
    similarity = {a: 0.70, b: 0.68, c: 0.60}
    lexical = {a: 0.0, b: 0.0, c: 0.5}
    prior = {a: math.log(0.05), b: math.log(0.9)}
    order = rerank(candidates, similarity, lexical, weight=0.3, prior=prior, prior_weight=0.04)
    values = {item: value for item, value, _ in order}
    assert [item for item, _, _ in order] == [c, b, a]
    assert math.isclose(values[a], 0.70 + 0.04 * math.log(0.05))
    assert math.isclose(values[b], 0.68 + 0.04 * math.log(0.9))
    assert math.isclose(values[c], 0.60 + 0.3 * 0.5)
