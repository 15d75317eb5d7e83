"""A hit's calibrated relevance, through kernel.retrieval with the real model and database."""

from __future__ import annotations

from datetime import timedelta
from uuid import uuid4

from engram import Kernel
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    GateAction,
    GateDecisionType,
    MemoryStatus,
    utc_now,
)
from engram.retrieval.relevance import SIMILARITY_ONLY, WITH_WORDS
from engram.retrieval.search import Retrieval, SearchTuning
from tests.integration.gate_helpers import SYSTEM
from tests.integration.retrieval_helpers import FACTS, READER, seed, write


async def test_relevance_is_the_calibrated_curve_of_the_order_and_falls_along_it(
    kernel: Kernel,
) -> None:
    """Each hit's relevance is WITH_WORDS of its ordering value beside the best one: in [0, 1],
    never rising down the list, highest for the record that answers; a question about
    nothing stored gets a lower top relevance than one that is answered."""
    ids = {fact: await write(kernel, fact) for fact in FACTS}
    result = await kernel.retrieval.search(READER, "where are customer invoices kept", limit=5)
    assert ids[FACTS[0]] == result.hits[0].record.record_id
    relevance = [hit.relevance for hit in result.hits]
    assert all(r is not None and 0.0 <= r <= 1.0 for r in relevance), relevance
    assert relevance == sorted(relevance, reverse=True), relevance  # type: ignore[type-var]
    best = result.hits[0].fused
    for hit in result.hits:
        assert hit.relevance == WITH_WORDS(hit.fused, best)
    assert result.hits[0].relevance is not None
    assert result.hits[1].relevance is not None
    assert result.hits[0].relevance > result.hits[1].relevance
    unrelated = await kernel.retrieval.search(READER, "a recipe for banana bread with walnuts")
    assert unrelated.hits
    assert unrelated.hits[0].relevance is not None
    assert unrelated.hits[0].relevance < result.hits[0].relevance


async def test_a_record_that_does_not_resolve_does_not_set_the_relevance_of_an_as_of_search(
    kernel: Kernel,
) -> None:
    """An as-of search measures each hit's relevance against its best hit, never against a
    candidate that does not resolve: a record nearer the query whose version at that instant
    is consolidated (not returned unless asked for) changes neither the hits nor their
    relevance."""
    near = await write(kernel, "The staging database runs PostgreSQL 16 on two replicas.")
    other = await write(kernel, "Grafana dashboards for the checkout flow live in payments.")
    head = await kernel.temporal.current(near)
    assert head is not None
    consolidated = await kernel.gate.evaluate(
        GateRequest(
            GateAction.UPDATE,
            head.model_copy(update={"id": uuid4(), "status": MemoryStatus.CONSOLIDATED}),
            SYSTEM,
            GateDecisionType.SELF_HEALING,
            expected_version=head.version,
            status=MemoryStatus.CONSOLIDATED,
        )
    )
    assert "updated" == consolidated.outcome.value
    instant = utc_now() + timedelta(milliseconds=1)
    query = "staging database PostgreSQL replicas"
    with_it = await kernel.retrieval.search(
        READER, query, as_of_ingestion=instant, include_consolidated=True
    )
    assert near == with_it.hits[0].record.record_id  # the nearer record is a candidate
    found = await kernel.retrieval.search(READER, query, as_of_ingestion=instant)
    assert [other] == [hit.record.record_id for hit in found.hits]
    hit = found.hits[0]
    assert hit.similarity is not None
    assert hit.relevance == SIMILARITY_ONLY(hit.similarity, hit.similarity)


async def test_history_and_unweighed_searches_measure_the_similarity(kernel: Kernel) -> None:
    """A search with include_superseded, and one that does not weigh the words, give each hit
    SIMILARITY_ONLY of its similarity beside the best similarity found."""
    await seed(kernel)
    query = "Kafka topic orders-v2 retention"
    plain = Retrieval(
        kernel.db, kernel.embeddings, kernel.temporal, tuning=SearchTuning(lexical_weight=0.0)
    )
    for result in (
        await kernel.retrieval.search(READER, query, include_superseded=True),
        await plain.search(READER, query),
    ):
        similarity = [hit.similarity for hit in result.hits]
        assert all(s is not None for s in similarity)
        best = max(s for s in similarity if s is not None)
        expected = [SIMILARITY_ONLY(s, best) for s in similarity if s is not None]
        assert expected == [hit.relevance for hit in result.hits]
