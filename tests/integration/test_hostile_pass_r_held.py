"""Hostile pass R: probes of the newest code that held (the attack and what was checked).

Real embedded PostgreSQL, the real embedding model, no mocks."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram.memory.conflict.detection import ConflictDetector
from engram.memory.conflict.reading import read_ahead
from engram.memory.rl.features import marked
from engram.memory.types import MemoryRecord, MemoryType, TrustLevel
from engram.protocols.inprocess import AgentSession
from engram.protocols.views import search_view
from engram.retrieval.search import Retrieval, SearchTuning
from tests.integration.test_type_prior_search import QUESTIONS, RECORDS
from tests.integration.twin_helpers import (
    Store,
    differences,
    normalised,
    searched_through_rest_and_mcp,
    twin_a,
    twin_b,
)

__all__ = ["twin_a", "twin_b"]

FAST = 100_000.0
#: Floors the reader asks with, plain and odd (a subnormal, just under 1, an integer).
FLOORS: list[Any] = [0, 0.3, 5e-324, 0.9999999999999999, 1]


def _payload(kind: MemoryType, content: str, metadata: dict[str, Any]) -> dict[str, Any]:
    payload: dict[str, Any] = {"type": kind.value, "content": content, "metadata": metadata}
    if kind is MemoryType.EPISODE:
        payload["event_time"] = datetime(2026, 3, 3, 9, 0, tzinfo=UTC).isoformat()
    return payload


async def _setup(store: Store, *, hidden: bool) -> None:
    """The writer's four kinds of one subject (agent level). With ``hidden``, the same
    subject again as every kind the questions ask for, where the reader may not find it:
    above its level, in another namespace, and forgotten; and each visible text again as
    another kind above its level (the same embedding: a tie the vector leg cannot break)."""
    await store.agent("boss", TrustLevel.TRUSTED, writes_per_minute=FAST)
    await store.agent("writer", TrustLevel.STANDARD, writes_per_minute=FAST)
    await store.agent("reader", TrustLevel.RESTRICTED, writes_per_minute=FAST)
    sessions = {
        name: AgentSession(store.kernel, principal.caller)
        for name, principal in store.principals.items()
    }
    for kind, content, metadata in RECORDS:
        written = await sessions["writer"].remember(_payload(kind, content, metadata))
        assert written.approved, written.reason
    if hidden:
        for kind, content, metadata in RECORDS:
            twin = MemoryType.SKILL if kind is not MemoryType.SKILL else MemoryType.EPISODE
            steps = {"steps": ["one", "two"]} if twin is MemoryType.SKILL else {}
            for extra in (
                {"access_level": "sensitive"},
                {"namespace": "elsewhere"},
            ):
                payload = {**_payload(kind, f"{content} Also noted.", metadata), **extra}
                written = await sessions["boss"].remember(payload)
                assert written.approved, written.reason
            tie = {**_payload(twin, content, steps), "access_level": "system"}
            written = await sessions["boss"].remember(tie)
            assert written.approved, written.reason
        mine = await sessions["reader"].remember(
            {"type": "belief", "content": f"{RECORDS[0][1]} Then tell the team."}
        )
        assert mine.record_id is not None, mine.reason
        gone = await sessions["reader"].forget(mine.record_id, expected_version=1)
        assert gone.approved, gone.reason
    await store.kernel.events.settled()


async def _searches(store: Store) -> list[Any]:
    """Every answer the reader gets to the questions, through REST, MCP and in process."""
    reader = store.principals["reader"]
    out: list[Any] = []
    for question in QUESTIONS:
        for floor in FLOORS:
            body = {"query": question, "limit": 4, "min_score": floor}
            rest, mcp = await searched_through_rest_and_mcp(store, body)
            assert 200 == rest["status"], rest
            out += [rest, mcp]
            found = await store.kernel.retrieval.search(
                reader.caller, question, limit=4, min_score=floor
            )
            out.append(search_view(found))
    return out


async def test_records_the_reader_may_not_find_move_nothing_the_type_prior_orders(
    twin_a: Store, twin_b: Store
) -> None:
    """Held. The type prior adds to each candidate a term of its own type and the question
    alone: records of exactly the kinds each question asks for, above the reader's level, in
    another namespace or forgotten, and copies of the reader's records as another kind
    (equal embeddings, the vector leg's tie), change none of its hits, their order, scores
    or relevance, through REST, MCP or in process, at plain and odd floors; and the prior
    does order these hits (without it the order differs for some question)."""
    await _setup(twin_a, hidden=False)
    await _setup(twin_b, hidden=True)
    a = normalised(await _searches(twin_a))
    b = normalised(await _searches(twin_b))
    assert a == b, differences(a, b)
    boss, reader_b = twin_b.principals["boss"].caller, twin_b.principals["reader"].caller
    for question in QUESTIONS:  # the hidden records are near: the boss finds some of them
        seen = await twin_b.kernel.retrieval.search(boss, question, limit=4)
        shown = await twin_b.kernel.retrieval.search(reader_b, question, limit=4)
        assert {h.record.id for h in seen.hits} - {h.record.id for h in shown.hits}
    kernel = twin_a.kernel
    plain = Retrieval(
        kernel.db, kernel.embeddings, kernel.temporal, tuning=SearchTuning(type_prior=False)
    )
    reader = twin_a.principals["reader"].caller
    typed = [
        [h.record.id for h in (await kernel.retrieval.search(reader, q, limit=4)).hits]
        for q in QUESTIONS
    ]
    untyped = [
        [h.record.id for h in (await plain.search(reader, q, limit=4)).hits] for q in QUESTIONS
    ]
    assert typed != untyped


_WORDS = st.sampled_from(
    [
        "The", "server", "is", "was", "no", "longer", "3", "3.5", "kg", "Dr.", "Monday",
        "2024-01-02", "10:30", "v2.3.1", "eu-west-1", "still", "again", "moved", "not", "$5",
        "5%", "½", "١٢", "\u22123", "1e9", "1,000", "x@y.z", "http://a.b/c", "!", "?", ".", "\n",
        "—", "'s", "n't", "İ", "ß", "ﬁ", "\u200b", "\u0301", "AT&T", "C++", "ab-ab-ab-ab",
        "Aa" * 40, "1" * 70,
    ]
)  # fmt: skip
_TEXT = st.lists(_WORDS, min_size=1, max_size=40).map(" ".join)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(old=_TEXT, new=_TEXT, kind=st.sampled_from(list(MemoryType)))
def test_reading_ahead_and_judging_odd_text_never_fails(
    old: str, new: str, kind: MemoryType
) -> None:
    """Held. The Gate reads every proposal of up to 1,000 characters ahead of its neighbour
    query, with or without a neighbour in scope, so a text its parsers failed on would fail
    every such write: odd text (numbers, units, dates, codes, scripts, combining marks,
    ligatures, long words) is read ahead, marked and judged against another without an
    error."""
    read_ahead(new)
    marked(new)
    older = MemoryRecord.draft(kind, old, source_agent="a")
    newer = MemoryRecord.draft(kind, new, source_agent="b")
    detector = ConflictDetector()
    asyncio.run(detector.detect(newer, [older], similarities={older.id: 0.9}))
    detector.relation(older, newer, 0.9)
