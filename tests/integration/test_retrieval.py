"""Hybrid retrieval and feedback through kernel.retrieval, against the real model and database."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import asyncpg
import pytest

from engram import Kernel
from engram.config import EMBEDDING_DIMENSION, EngramSettings
from engram.errors import Forbidden, NotFound, ValidationFailed
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    TrustLevel,
    utc_now,
)
from engram.retrieval.search import Retrieval, SearchResult, SearchTuning
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import (
    EXTERNAL,
    SYSTEM,
    TRUSTED,
    WHEN,
    belief,
    create,
    update,
)
from tests.integration.retrieval_helpers import FACTS, READER, WRITER, seed, write

WITH_TEXT = SearchTuning(text_leg=True)


async def test_a_paraphrase_finds_the_record_through_the_vector_leg(kernel: Kernel) -> None:
    """A paraphrase ranks its record first through the vector leg, without degrading."""
    ids = await seed(kernel)
    result = await kernel.retrieval.search(READER, "where are customer bills kept", limit=3)
    assert ids[FACTS[0]] == result.hits[0].record.record_id
    assert "vector" in result.hits[0].legs
    assert not result.degraded
    assert result.hits[0].fused > result.hits[1].fused


async def test_an_exact_rare_word_brings_in_the_text_leg_and_both_legs_rank_first(
    kernel: Kernel,
) -> None:
    """With the text leg on, an exact rare term brings it in, and the record found by both
    legs ranks first."""
    ids = await seed(kernel)
    hybrid = Retrieval(kernel.db, kernel.embeddings, kernel.temporal, tuning=WITH_TEXT)
    result = await hybrid.search(READER, "orders-v2 retention", limit=5)
    top = result.hits[0]
    assert ids[FACTS[4]] == top.record.record_id
    assert ("text", "vector") == top.legs
    assert {"text": 1, "vector": 1} == top.ranks
    assert all(hit.legs == ("vector",) for hit in result.hits[1:])


async def test_a_shared_rare_code_lifts_the_record_that_holds_it(kernel: Kernel) -> None:
    """By default the vector leg alone finds the candidates, and the one holding the query's
    code is lifted above a neighbour that is as close in meaning but holds another code."""
    holder = await write(kernel, "Error E4021 on the billing API means the invoice was locked.")
    other = await write(kernel, "Error E4012 on the billing API means the invoice is missing.")
    query = "what does billing error E4012 mean"
    plain = Retrieval(
        kernel.db, kernel.embeddings, kernel.temporal, tuning=SearchTuning(lexical_weight=0.0)
    )
    result = await kernel.retrieval.search(READER, query, limit=2)
    assert [other, holder] == [hit.record.record_id for hit in result.hits]
    assert all(hit.legs == ("vector",) for hit in result.hits)
    assert {"vector"} == set(result.legs)
    lift = [hit.fused - (hit.similarity or 0.0) for hit in result.hits]
    assert lift[0] > lift[1] > 0  # both share words; only the first shares the code
    similar = await plain.search(READER, query, limit=2)  # λ = 0: the legs' fused order
    assert {other, holder} == {hit.record.record_id for hit in similar.hits}
    assert all(hit.fused < 0.02 for hit in similar.hits)  # 1 / (60 + rank)


async def test_results_are_current_unless_history_is_asked_for(kernel: Kernel) -> None:
    """Search returns current versions unless history or an as-of time is asked for."""
    first = await kernel.gate.evaluate(
        create(belief("The staging database runs PostgreSQL 14."), WRITER)
    )
    assert first.record_id is not None
    assert first.modified_record is not None
    second = await kernel.gate.evaluate(
        update(first.record_id, "The staging database runs PostgreSQL 17.", 1, WRITER)
    )
    assert second.approved
    current = await kernel.retrieval.search(READER, "staging database PostgreSQL", limit=5)
    assert [2] == [hit.record.version for hit in current.hits]
    history = await kernel.retrieval.search(
        READER, "staging database PostgreSQL", limit=5, include_superseded=True
    )
    assert [1, 2] == sorted(hit.record.version for hit in history.hits)
    before_update = first.modified_record.ingestion_time + timedelta(microseconds=1)
    as_of = await kernel.retrieval.search(
        READER, "staging database PostgreSQL", limit=5, as_of_ingestion=before_update
    )
    assert ["The staging database runs PostgreSQL 14."] == [h.record.content for h in as_of.hits]
    too_early = first.modified_record.ingestion_time - timedelta(seconds=1)
    assert (
        []
        == (
            await kernel.retrieval.search(READER, "staging database", as_of_ingestion=too_early)
        ).hits
    )


async def test_forgotten_records_and_other_namespaces_are_left_out(kernel: Kernel) -> None:
    """Search leaves out forgotten records and records of other namespaces."""
    ids = await seed(kernel)
    head = await kernel.temporal.current(ids[FACTS[3]])
    assert head is not None
    forgotten = await kernel.gate.evaluate(GateRequest.forget(head, WRITER, EXTERNAL))
    assert forgotten.approved
    result = await kernel.retrieval.search(READER, "Grafana dashboards checkout", limit=10)
    assert ids[FACTS[3]] not in {hit.record.record_id for hit in result.hits}
    elsewhere = await kernel.retrieval.search(READER, "Grafana", namespace="elsewhere")
    assert [] == elsewhere.hits


async def test_searches_follow_the_read_rule_of_temporal_listings(kernel: Kernel) -> None:
    """Searching now or as of just after the last write finds what the listing lists (ended and
    future validity included, a consolidated record not); as of event time now, neither."""
    jan, feb = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 2, 1, tzinfo=UTC)
    plain = await write(kernel, FACTS[0])
    ended = await kernel.gate.evaluate(
        create(
            belief("The change freeze held through January.", event_time=jan).model_copy(
                update={"event_time_end": feb}
            ),
            WRITER,
        )
    )
    future = await kernel.gate.evaluate(
        create(
            belief("The office moves to Lyon.", event_time=utc_now() + timedelta(days=365)),
            WRITER,
        )
    )
    notes = await kernel.gate.evaluate(create(belief("Standup notes go to the wiki."), WRITER))
    assert notes.modified_record is not None
    consolidated = await kernel.gate.evaluate(
        GateRequest(
            GateAction.UPDATE,
            notes.modified_record.model_copy(
                update={"id": uuid4(), "status": MemoryStatus.CONSOLIDATED}
            ),
            SYSTEM,
            GateDecisionType.SELF_HEALING,
            expected_version=1,
            status=MemoryStatus.CONSOLIDATED,
        )
    )
    assert "updated" == consolidated.outcome.value
    after = utc_now() + timedelta(milliseconds=1)
    now = utc_now() + timedelta(milliseconds=2)

    async def found(
        as_of_ingestion: datetime | None = None, as_of_event: datetime | None = None
    ) -> set[UUID]:
        result = await kernel.retrieval.search(
            READER,
            "office freeze notes",
            limit=10,
            as_of_ingestion=as_of_ingestion,
            as_of_event=as_of_event,
        )
        listed = await kernel.temporal.query(
            caller=READER,
            as_of_ingestion=as_of_ingestion,
            as_of_event=as_of_event,
            count_read=False,
        )
        searched = {hit.record.record_id for hit in result.hits}
        assert {record.record_id for record in listed} == searched, (as_of_ingestion, as_of_event)
        return searched

    believed = {plain, ended.record_id, future.record_id}
    assert believed == await found()
    assert believed == await found(as_of_ingestion=after)
    assert {plain} == await found(as_of_event=now)


async def test_callers_see_only_the_levels_they_may_read(kernel: Kernel) -> None:
    """Search returns only records at access levels the caller may read."""
    await seed(kernel)
    quarantined = await write(
        kernel, "Escalations about invoices go to dana.fischer@example.com directly."
    )
    assert AccessLevel.SENSITIVE is (await kernel.temporal.current(quarantined)).access_level  # type: ignore[union-attr]
    query = "who receives invoice escalations"
    standard = await kernel.retrieval.search(READER, query, limit=10)
    assert quarantined not in {hit.record.record_id for hit in standard.hits}
    trusted = await kernel.retrieval.search(TRUSTED, query, limit=10)
    assert quarantined == trusted.hits[0].record.record_id
    restricted = caller_for_tier("tiny", TrustLevel.RESTRICTED)
    user_level = MemoryRecord.draft(
        MemoryType.BELIEF,
        "The invoice archive moves to cold storage after two years.",
        source_agent=WRITER.agent_id,
        access_level=AccessLevel.USER,
    )
    stored = await kernel.gate.evaluate(
        GateRequest(GateAction.CREATE, user_level, WRITER, EXTERNAL)
    )
    assert stored.approved
    seen = await kernel.retrieval.search(restricted, "invoice archive cold storage", limit=10)
    assert stored.record_id not in {hit.record.record_id for hit in seen.hits}


async def test_records_a_caller_may_not_read_do_not_change_its_ranking(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Nothing a caller may not read decides which of its words the text leg matches: 150
    sensitive records holding a query's rare terms, with the table's statistics fresh (the
    earlier rule left out words the statistics called common), leave a standard reader's hits,
    their ranks, fused values, similarities and relevance exactly as they were."""
    await seed(kernel)
    query = "Kafka topic orders-v2"
    hybrid = Retrieval(kernel.db, kernel.embeddings, kernel.temporal, tuning=WITH_TEXT)
    before = await hybrid.search(READER, query, limit=10)
    default_before = await kernel.retrieval.search(READER, query, limit=10)
    assert "text" in before.hits[0].legs
    writer = replace(TRUSTED, writes_per_minute=100_000)
    for n in range(150):
        hidden = MemoryRecord.draft(
            MemoryType.BELIEF,
            f"Kafka topic orders-v2 replay job {n} mirrors partition {n * 7 + 3} for tenant "
            f"{n * 13 + 1000}.",
            source_agent=writer.agent_id,
            access_level=AccessLevel.SENSITIVE,
        )
        stored = await kernel.gate.evaluate(
            GateRequest(GateAction.CREATE, hidden, writer, EXTERNAL)
        )
        assert stored.approved, stored.reason
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute("ANALYZE engram.memories")
    finally:
        await admin.close()
    after = await hybrid.search(READER, query, limit=10)
    default_after = await kernel.retrieval.search(READER, query, limit=10)

    def seen(result: SearchResult) -> list[tuple[UUID, dict[str, int], float, Any, Any]]:
        return [
            (h.record.record_id, h.ranks, h.fused, h.similarity, h.relevance) for h in result.hits
        ]

    assert seen(before) == seen(after)
    assert before.legs == after.legs
    assert seen(default_before) == seen(default_after)


async def test_type_filter_limit_and_read_counting(kernel: Kernel) -> None:
    """Search honours the type filter and the limit, counts reads, and writes no audit entries."""
    ids = await seed(kernel)
    episode = MemoryRecord.draft(
        MemoryType.EPISODE,
        "On Tuesday the production deployment was delayed by the change review.",
        source_agent=WRITER.agent_id,
        event_time=WHEN,
    )
    stored = await kernel.gate.evaluate(GateRequest(GateAction.CREATE, episode, WRITER, EXTERNAL))
    assert stored.approved
    only = await kernel.retrieval.search(
        READER, "production deployment Tuesday", types=[MemoryType.EPISODE]
    )
    assert [stored.record_id] == [hit.record.record_id for hit in only.hits]
    two = await kernel.retrieval.search(READER, "production deployment Tuesday", limit=2)
    assert 2 == len(two.hits)
    await kernel.temporal.flush_reads()
    counted = await kernel.db.fetchval(
        "SELECT access_count[5] FROM memory_access WHERE record_id = $1", ids[FACTS[1]]
    )
    assert counted >= 1
    assert len(FACTS) + 1 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")


@pytest.mark.parametrize(
    ("query", "limit", "problem"),
    [("   ", 10, "query"), ("x" * 2001, 10, "query"), ("fine", 0, "limit"), ("fine", 101, "limit")],
)
async def test_bad_search_input_is_a_typed_rejection(
    kernel: Kernel, query: str, limit: int, problem: str
) -> None:
    """Malformed search input is rejected as a validation failure naming the problem."""
    with pytest.raises(ValidationFailed, match=problem):
        await kernel.retrieval.search(READER, query, limit=limit)


async def test_feedback_is_stored_and_a_useful_rating_counts_as_a_read(kernel: Kernel) -> None:
    """Feedback is stored per reader and signal, and a useful rating counts as a read of that
    version.
    """
    ids = await seed(kernel)
    receipt = await kernel.retrieval.feedback(READER, ids[FACTS[2]], useful=True)
    await kernel.retrieval.feedback(READER, ids[FACTS[2]], useful=False, signal="ignored")
    rows = await kernel.db.fetch(
        "SELECT agent_id, useful, signal, version_id FROM memory_feedback ORDER BY id"
    )
    assert [("reader", True, "explicit"), ("reader", False, "ignored")] == [
        (r["agent_id"], r["useful"], r["signal"]) for r in rows
    ]
    assert receipt.version_id == rows[0]["version_id"]
    await kernel.temporal.flush_reads()
    assert 1 == await kernel.db.fetchval(
        "SELECT access_count[5] FROM memory_access WHERE record_id = $1", ids[FACTS[2]]
    )


async def test_feedback_rejections(kernel: Kernel) -> None:
    """Feedback on an unknown or unreadable record, or with a bad signal, is rejected and stores
    nothing.
    """
    ids = await seed(kernel)
    with pytest.raises(NotFound):
        await kernel.retrieval.feedback(READER, uuid4(), useful=True)
    with pytest.raises(ValidationFailed, match="signal"):
        await kernel.retrieval.feedback(READER, ids[FACTS[0]], useful=True, signal="Bad Signal!")
    with pytest.raises(Forbidden):
        await kernel.retrieval.feedback(CallerIdentity.system("x"), ids[FACTS[0]], useful=True)
    secret = await write(kernel, "The vault root token sits with ops.lead@example.com today.")
    with pytest.raises(NotFound):
        await kernel.retrieval.feedback(READER, secret, useful=True)
    assert 0 == await kernel.db.fetchval("SELECT count(*) FROM memory_feedback")


async def test_without_the_model_the_text_leg_answers_alone(kernel: Kernel, tmp_path: Path) -> None:
    """An embedding adapter whose model files are gone (a real failure) degrades the search:
    its hits have neither a similarity nor a relevance."""
    ids = await seed(kernel)
    broken = FastembedEmbedder(
        tmp_path,
        model_name=EngramSettings().embedding_model_name,
        dimension=EMBEDDING_DIMENSION,
        workers=1,
        threads=1,
    )
    retrieval = Retrieval(kernel.db, broken, kernel.temporal)
    result = await retrieval.search(READER, "Kafka orders-v2 retention")
    assert result.degraded
    assert [ids[FACTS[4]]] == [hit.record.record_id for hit in result.hits]
    assert ("text",) == result.hits[0].legs
    assert (None, None) == (result.hits[0].similarity, result.hits[0].relevance)


async def test_versioned_searches_keep_the_vector_order(kernel: Kernel) -> None:
    """As-of and include_superseded searches are not reordered by word weights: their
    candidates may include versions that do not resolve for the caller (forgotten or hidden
    since), which must not weigh the words. Their hits keep the vector leg's order."""
    await seed(kernel)
    query = "Kafka topic orders-v2 retention"
    for options in ({"as_of_event": utc_now()}, {"include_superseded": True}):
        result = await kernel.retrieval.search(READER, query, limit=5, **options)  # type: ignore[arg-type]
        assert [hit.ranks["vector"] for hit in result.hits] == sorted(
            hit.ranks["vector"] for hit in result.hits
        )
        assert all(hit.fused == 1 / (60 + hit.ranks["vector"]) for hit in result.hits)
    current = await kernel.retrieval.search(READER, query, limit=5)
    assert current.hits[0].fused > 0.5  # similarity + lexical share: reordered


async def _cache_moved_44_times(kernel: Kernel, writer: CallerIdentity, **fields: Any) -> UUID:
    """A record whose host changes 44 times: 45 versions near one query (``fields``: of the
    record, e.g. its access level). Returns its id."""
    text = "The monorepo build cache lives on host cache-{:02d}."
    first = await kernel.gate.evaluate(create(belief(text.format(0), **fields), writer))
    assert first.record_id is not None
    assert first.approved, first.reason
    for version in range(1, 45):
        moved = await kernel.gate.evaluate(
            update(first.record_id, text.format(version), version, writer, **fields)
        )
        assert moved.approved, moved.reason
    return first.record_id


async def test_an_as_of_search_looks_past_a_window_one_record_fills(kernel: Kernel) -> None:
    """An as-of search's candidates are versions: a record with more versions near the query
    than the first window holds (40) must not crowd the other records out of the answer."""
    await seed(kernel)
    first = await _cache_moved_44_times(kernel, WRITER)
    result = await kernel.retrieval.search(
        READER, "where is the monorepo build cache", limit=3, as_of_event=utc_now()
    )
    found = [hit.record.record_id for hit in result.hits]
    assert 3 == len(set(found)) == len(found)
    assert first == found[0]
    assert "cache-44" in result.hits[0].record.content
    assert result.legs["vector"] > 40  # it looked deeper than the first window
    # Past a full window whose last version is already below the floor, nothing deeper can
    # pass it: the search does not widen.
    floored = await kernel.retrieval.search(
        READER,
        "Kafka topic orders-v2 retention",
        limit=3,
        as_of_event=utc_now(),
        min_score=0.6,
    )
    assert len(floored.hits) < 3
    assert 40 == floored.legs["vector"]


async def test_hidden_versions_do_not_change_an_as_of_answer_or_its_window(
    kernel: Kernel,
) -> None:
    """A record above the reader's level with many versions near the query changes neither
    the reader's as-of hits nor how deep its search looked (``legs``) nor anything else it
    gets back: the windows hold only versions the reader may read."""
    await seed(kernel)
    query = "where is the monorepo build cache"

    async def answer() -> tuple[list[tuple[UUID, int, float | None]], dict[str, int]]:
        result = await kernel.retrieval.search(READER, query, limit=3, as_of_event=utc_now())
        hits = [(h.record.id, h.ranks["vector"], h.similarity) for h in result.hits]
        return hits, result.legs

    before = await answer()
    writer = replace(TRUSTED, writes_per_minute=100_000)
    await _cache_moved_44_times(kernel, writer, access_level=AccessLevel.SYSTEM)
    assert before == await answer()


async def test_history_search_hides_records_and_versions_a_reader_may_not_see(
    kernel: Kernel,
) -> None:
    """include_superseded never returns an old version of a record whose head the reader may
    not read (such a record is absent at every instant), and a returned version's
    superseded_by never names a version the reader may not read; the versions it may read are
    numbered without a gap (ADR-009, amended 2026-11-27)."""
    writer = replace(TRUSTED, writes_per_minute=100_000)
    hidden = await kernel.gate.evaluate(
        create(belief("The payroll export runs on host pay-exp-01 every Friday."), writer)
    )
    assert hidden.record_id is not None
    raised = await kernel.gate.evaluate(
        update(
            hidden.record_id,
            "The payroll export runs on host pay-exp-02 every Friday.",
            1,
            writer,
            access_level=AccessLevel.SENSITIVE,
        )
    )
    assert raised.approved, raised.reason
    chain = await kernel.gate.evaluate(
        create(belief("The invoice export runs on host inv-exp-01 every Monday."), writer)
    )
    assert chain.record_id is not None
    for version, (content, level) in enumerate(
        [
            ("The invoice export runs on host inv-exp-02 every Monday.", AccessLevel.SENSITIVE),
            ("The invoice export runs on host inv-exp-03 every Monday.", AccessLevel.AGENT),
        ],
        start=1,
    ):
        moved = await kernel.gate.evaluate(
            update(chain.record_id, content, version, writer, access_level=level)
        )
        assert moved.approved, moved.reason
    result = await kernel.retrieval.search(
        READER, "which host runs the export", limit=20, include_superseded=True
    )
    found = {(hit.record.record_id, hit.record.version): hit.record for hit in result.hits}
    assert hidden.record_id not in {record_id for record_id, _ in found}
    assert not [r for r in found.values() if "inv-exp-02" in r.content]  # the sensitive one
    assert {1, 2} == {version for record_id, version in found if record_id == chain.record_id}
    first = found[(chain.record_id, 1)]
    second = found[(chain.record_id, 2)]  # the stored version 3, the next the reader may read
    assert "inv-exp-03" in second.content
    assert second.id == first.superseded_by  # not the sensitive stored version 2


async def test_a_forgotten_record_is_found_by_no_search_after_it_was_forgotten(
    kernel: Kernel,
) -> None:
    """No version of a forgotten record is a hit of a history search, nor counted in an
    as-of search's legs at an instant after the forget; at an instant before it, the record
    is found as it was (what a temporal listing answers)."""
    writer = replace(TRUSTED, writes_per_minute=100_000)
    made = await kernel.gate.evaluate(
        create(belief("The ledger service runs on PostgreSQL 16 in eu-west-1."), writer)
    )
    assert made.record_id is not None
    moved = await kernel.gate.evaluate(
        update(made.record_id, "The ledger service runs on PostgreSQL 17 in eu-west-1.", 1, writer)
    )
    assert moved.modified_record is not None
    before = utc_now()
    gone = await kernel.gate.evaluate(GateRequest.forget(moved.modified_record, writer, EXTERNAL))
    assert gone.approved, gone.reason
    history = await kernel.retrieval.search(
        READER, "ledger PostgreSQL", limit=20, include_superseded=True
    )
    assert [] == history.hits
    assert 0 == sum(history.legs.values())
    later = await kernel.retrieval.search(
        READER, "ledger PostgreSQL", limit=20, as_of_event=utc_now() + timedelta(days=1)
    )
    assert ([], 0) == (later.hits, sum(later.legs.values()))
    then = await kernel.retrieval.search(
        READER, "ledger PostgreSQL", limit=20, as_of_ingestion=before
    )
    assert [(made.record_id, 2)] == [(h.record.record_id, h.record.version) for h in then.hits]


@pytest.mark.parametrize(
    "query",
    [
        "it's E4012 & 'orders-v2' | !kafka",
        "retention:* (orders-v2) <-> replays",
        "back\\slash \\\\ double and ''' quotes \" ",
        "the of and a",  # stop words only: no word to weigh
        "?!... --- ;;;",  # punctuation only
        "ümlaut café naïve 東京 kafka",
        "x" * 1999,
    ],
)
async def test_tsquery_syntax_and_odd_words_in_a_query_are_plain_words(
    kernel: Kernel, query: str
) -> None:
    """Quotes, backslashes, tsquery operators, stop words alone, punctuation alone, other
    scripts and a 1,999-letter word reach the lexical lookup as words, never as syntax: the
    search answers (no error), from readable records only."""
    ids = await seed(kernel)
    result = await kernel.retrieval.search(READER, query, limit=5)
    assert not result.degraded
    assert {hit.record.record_id for hit in result.hits} <= set(ids.values())
    assert all(0.0 <= (hit.similarity or 0.0) <= 1.0 for hit in result.hits)
    assert all(0.0 <= (hit.relevance or 0.0) <= 1.0 for hit in result.hits)


async def test_searches_racing_updates_and_forgets_answer_from_readable_versions(
    kernel: Kernel,
) -> None:
    """Searches run while the records they find are updated and forgotten: every search
    answers, and every hit is a version the reader may read, of the current chain or one
    that moved on during the search, never a sensitive one."""
    ids = await seed(kernel)
    writer = replace(TRUSTED, writes_per_minute=100_000)
    target = ids[FACTS[4]]

    async def churn() -> None:
        for version in range(1, 7):
            level = AccessLevel.SENSITIVE if version % 2 else AccessLevel.AGENT
            content = f"Kafka topic orders-v2 keeps {version + 7} days of retention for replays."
            moved = await kernel.gate.evaluate(
                update(target, content, version, writer, access_level=level)
            )
            assert moved.approved, moved.reason
        head = await kernel.temporal.current(target, count_read=False)
        assert head is not None
        forgot = await kernel.gate.evaluate(
            GateRequest.forget(head, writer, EXTERNAL, expected_version=head.version)
        )
        assert forgot.approved, forgot.reason

    async def search() -> list[SearchResult]:
        return [
            await kernel.retrieval.search(READER, "Kafka orders-v2 retention", limit=5)
            for _ in range(25)
        ]

    _, *found = await asyncio.gather(churn(), search(), search())
    for results in found:
        for result in results:
            assert not result.degraded
            for hit in result.hits:
                assert hit.record.access_level is not AccessLevel.SENSITIVE
                assert hit.record.record_id in set(ids.values())
                assert hit.relevance is not None
                assert 0.0 <= hit.relevance <= 1.0
    final = await kernel.retrieval.search(READER, "Kafka orders-v2 retention", limit=5)
    assert target not in {hit.record.record_id for hit in final.hits}
