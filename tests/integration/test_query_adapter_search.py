"""The query adapter in a search (engram.retrieval.adapter): it moves the question the default
search orders by, while a hit's similarity, and so the floor, stay the model's own cosine.
Real embedded PostgreSQL and the real model."""

from __future__ import annotations

import math

from engram import Kernel
from engram.memory.types import MemoryType
from engram.retrieval.adapter import adapt
from engram.retrieval.search import Retrieval, SearchTuning
from engram.retrieval.type_prior import TYPE_PRIOR_WEIGHT, log_prior
from tests.integration.retrieval_helpers import FACTS, READER, seed

QUESTION = "which day do we ship to production"


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_similarities_are_the_models_own_and_the_order_uses_the_adapted_question(
    kernel: Kernel,
) -> None:
    """A hit's similarity is the cosine of the model's own question and record vectors
    (with and without the adapter alike); its order value is the adapted question's cosine
    plus at most 0.3 of lexical share plus the type prior's term (every fact is a belief)."""
    ids = await seed(kernel)
    by_id = {record_id: fact for fact, record_id in ids.items()}
    plain = Retrieval(
        kernel.db, kernel.embeddings, kernel.temporal, tuning=SearchTuning(query_adapter=False)
    )
    adapted = await kernel.retrieval.search(READER, QUESTION, limit=5)
    unadapted = await plain.search(READER, QUESTION, limit=5)
    assert ids[FACTS[1]] == adapted.hits[0].record.record_id
    own = {h.record.record_id: h.similarity for h in unadapted.hits}
    assert own == {h.record.record_id: h.similarity for h in adapted.hits}
    question = await kernel.embeddings.embed_one(QUESTION)
    moved = adapt(question)
    prior = TYPE_PRIOR_WEIGHT * log_prior(question)[MemoryType.BELIEF.value]
    for hit in adapted.hits:
        stored = await kernel.embeddings.embed_one(by_id[hit.record.record_id])
        assert hit.similarity is not None
        assert math.isclose(hit.similarity, _cosine(question, stored), abs_tol=1e-4)
        # ordered by the adapted question's cosine plus the lexical share (0.3 at most)
        lift = hit.fused - _cosine(moved, stored) - prior
        assert -1e-4 <= lift <= 0.3 + 1e-4, lift
    assert adapted.hits[0].fused >= adapted.hits[1].fused


async def test_the_floor_keeps_the_same_records_with_or_without_the_adapter(
    kernel: Kernel,
) -> None:
    """The floor compares the model's own similarity, so it keeps the same records whether
    the question is adapted or not (the floor was chosen without the adapter: ADR-015)."""
    await seed(kernel)
    plain = Retrieval(
        kernel.db, kernel.embeddings, kernel.temporal, tuning=SearchTuning(query_adapter=False)
    )
    for floor in (0.2, 0.38, 0.5):
        with_adapter = await kernel.retrieval.search(READER, QUESTION, limit=5, min_score=floor)
        without = await plain.search(READER, QUESTION, limit=5, min_score=floor)
        assert {h.record.record_id for h in with_adapter.hits} == {
            h.record.record_id for h in without.hits
        }
        assert all((h.similarity or 0.0) >= floor for h in with_adapter.hits)
