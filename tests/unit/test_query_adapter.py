"""The query adapter shipped with the package (engram.retrieval.adapter)."""

from __future__ import annotations

import math
import random
from pathlib import Path

from benchmarks.recall_floor_eval import read_jsonl
from engram.config import EngramSettings
from engram.retrieval.adapter import adapt, dimension, learned_for
from tests.unit.vectors import unit_vector

SET = Path(__file__).resolve().parents[1] / "data" / "retrieval"


def test_the_adapter_is_learned_for_the_default_model_only() -> None:
    """The shipped map names the default model; another model's questions are not moved."""
    assert learned_for(EngramSettings().embedding_model_name)
    assert not learned_for("BAAI/bge-small-en-v1.5")
    assert dimension() == 384


def test_an_adapted_question_is_a_unit_vector_moved_but_near_where_it_was() -> None:
    """The map stays close to the identity: a question keeps most of its direction."""
    rng = random.Random(3)  # noqa: S311 - test vectors, not secrets
    for _ in range(20):
        question = unit_vector(rng, 384)
        moved = adapt(question)
        assert math.isclose(math.sqrt(sum(x * x for x in moved)), 1.0, rel_tol=1e-5)
        cosine = sum(a * b for a, b in zip(question, moved, strict=True))
        assert 0.8 < cosine < 0.99999, cosine


def test_vectors_the_adapter_cannot_move_are_returned_as_they_are() -> None:
    """Another dimension, or no direction at all: the vector comes back unchanged."""
    assert adapt([0.6, 0.8]) == [0.6, 0.8]  # another model's dimension
    assert adapt([0.0] * 384) == [0.0] * 384  # no direction to keep


def test_the_training_sets_are_whole_and_apart_from_the_evaluation_set() -> None:
    """Every question's graded records exist in its writer's store, every question has an
    answer, and no key or text is shared with the evaluation set."""
    evaluation = read_jsonl(SET / "memories.jsonl")
    texts = {m["content"] for m in evaluation}
    keys = {m["key"] for m in evaluation}
    writers = sorted(SET.glob("train_*_memories.jsonl"))
    assert len(writers) >= 6
    for memories_file in writers:
        memories = read_jsonl(memories_file)
        queries_file = memories_file.with_name(memories_file.name.replace("memories", "queries"))
        queries = read_jsonl(queries_file)
        own = {m["key"] for m in memories}
        assert len(own) == len(memories) >= 300
        assert not own & keys
        assert not {m["content"] for m in memories} & texts
        for query in queries:
            assert set(query["relevant"]) <= own, query["id"]
            assert 2 in query["relevant"].values(), query["id"]
