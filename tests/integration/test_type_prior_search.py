"""The type prior in a search (engram.retrieval.type_prior): the default search adds the
weighted log probability of each candidate's type to its order value, and nothing else; a
hit's similarity, and so the floor, do not move. Real embedded PostgreSQL and the real model."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from engram import Kernel
from engram.memory.types import MemoryRecord, MemoryType
from engram.retrieval.search import Retrieval, SearchTuning
from engram.retrieval.type_prior import TYPE_PRIOR_WEIGHT, log_prior
from tests.integration.gate_helpers import create
from tests.integration.retrieval_helpers import READER, WRITER

# One subject, told as four kinds of memory.
RECORDS = [
    (
        MemoryType.SKILL,
        (
            "Rotating the gateway's TLS certificate: issue a new one from the internal CA, "
            "load it on the standby node, switch traffic, then retire the old certificate."
        ),
        {"steps": ["issue from the internal CA", "load on standby", "switch", "retire old"]},
    ),
    (
        MemoryType.EPISODE,
        (
            "The gateway's TLS certificate expired on 3 March and card payments failed for "
            "forty minutes until it was replaced."
        ),
        {},
    ),
    (
        MemoryType.DECISION,
        (
            "We decided to rotate the gateway's TLS certificate every 60 days instead of "
            "yearly, because the March outage showed nobody watched the expiry date."
        ),
        {"rationale": "the March outage"},
    ),
    (
        MemoryType.BELIEF,
        "The gateway's TLS certificate is issued by the internal CA and is valid for 90 days.",
        {},
    ),
]
QUESTIONS = [
    "how do I rotate the gateway TLS certificate",
    "what happened when the gateway certificate expired",
    "why do we rotate the gateway certificate every 60 days",
]


async def _seed(kernel: Kernel) -> dict[str, MemoryType]:
    kinds = {}
    for kind, content, metadata in RECORDS:
        fields = {"source_agent": WRITER.agent_id, "metadata": metadata}
        if kind is MemoryType.EPISODE:
            fields["event_time"] = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
        result = await kernel.gate.evaluate(
            create(MemoryRecord.draft(kind, content, **fields), WRITER)
        )
        assert result.approved, result.reason
        assert result.record_id is not None
        kinds[str(result.record_id)] = kind
    return kinds


async def test_the_prior_adds_its_term_to_the_order_and_leaves_similarity_alone(
    kernel: Kernel,
) -> None:
    """With the prior on, each hit's order value is the value without it plus
    TYPE_PRIOR_WEIGHT times the log probability of its type for the question; similarities
    are the same either way, and the hits are ordered by the value."""
    kinds = await _seed(kernel)
    plain = Retrieval(
        kernel.db, kernel.embeddings, kernel.temporal, tuning=SearchTuning(type_prior=False)
    )
    for question in QUESTIONS:
        prior = log_prior(await kernel.embeddings.embed_one(question))
        typed = await kernel.retrieval.search(READER, question, limit=4)
        untyped = await plain.search(READER, question, limit=4)
        assert len(typed.hits) == len(untyped.hits) == 4
        without = {str(h.record.record_id): h for h in untyped.hits}
        for hit in typed.hits:
            key = str(hit.record.record_id)
            term = TYPE_PRIOR_WEIGHT * prior[kinds[key].value]
            assert math.isclose(hit.fused, without[key].fused + term, abs_tol=1e-5), question
            assert hit.similarity == without[key].similarity
        values = [h.fused for h in typed.hits]
        assert values == sorted(values, reverse=True)


async def test_the_prior_reads_the_kind_of_question(kernel: Kernel) -> None:
    """The learned prior, asked by the real model's embedding of each question, puts the kind
    that answers it first among the four stored kinds."""
    expected = [MemoryType.SKILL, MemoryType.EPISODE, MemoryType.DECISION]
    for question, kind in zip(QUESTIONS, expected, strict=True):
        prior = log_prior(await kernel.embeddings.embed_one(question))
        stored = [k.value for k, _, _ in RECORDS]
        assert max(stored, key=prior.__getitem__) == kind.value, (question, prior)
