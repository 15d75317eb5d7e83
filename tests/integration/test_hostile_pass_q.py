"""Hostile pass Q: the newest code (the learned query adapter in search, the undoing of a
resolution on a change of level, feedback) under hostile input, races and real faults.

Every test here failed on the code it was written against; what held is in
``test_hostile_pass_q_held.py``. Real embedded PostgreSQL, the real embedding model, no
mocks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import asyncpg
import pytest

from engram import Kernel, open_kernel
from engram.config import EngramSettings
from engram.errors import ValidationFailed
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.gate.pii import PiiKind, scan
from engram.memory.types import AccessLevel, MemoryRecord, MemoryStatus, MemoryType
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DAY, head_of
from tests.integration.gate_helpers import BOSS, INTERN, WRITER, belief, create
from tests.integration.race_helpers import broken_invariants
from tests.integration.retrieval_helpers import READER, seed
from tests.integration.test_hostile_pass_h import (
    NEWER_POOL,
    STATE_THREAD,
    _seed_thread,
    _written_while_a_batch_commits,
)
from tests.integration.test_layer2_hostile import APRIL, MARCH, V20, V21
from tests.integration.test_raised_claims import _raised, _written


@asynccontextmanager
async def _second_kernel(
    database: ScratchDatabase, embedder: FastembedEmbedder
) -> AsyncIterator[Kernel]:
    """Another kernel on the same database (a second server process, say)."""
    settings = EngramSettings(
        database_url=database.runtime_url, migrate_on_start=False, retry_initial_wait_seconds=0.01
    )
    async with open_kernel(settings=settings, embeddings=embedder) as other:
        yield other


async def _waiting_on_a_lock(database: ScratchDatabase) -> bool:
    """Whether some backend of ``database`` waits for a row lock."""
    conn = await asyncpg.connect(database.admin_url)
    try:
        return bool(
            await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = $1 AND wait_event_type = 'Lock'",
                database.name,
            )
        )
    finally:
        await conn.close()


async def test_a_resolution_committed_after_a_concurrent_raise_of_its_grounds_is_undone(
    kernel: Kernel, database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """High. v2.1 supersedes v2.0; while the resolver's step ending v2.0 waits for v2.0's
    row (a slow transaction holds it), a trusted agent on a second kernel raises v2.1 to
    sensitive. The raise's reopener found no step to undo (it had not committed), and the
    step then committed: the restricted reader read v2.0 ended in April on the grounds of a
    claim it may not read, for good. The resolver now looks at the levels again once its
    step has committed, and undoes what a raise committed meanwhile has hidden."""
    older = await _written(kernel, create(belief(V20, event_time=MARCH), WRITER))
    holder = await asyncpg.connect(database.admin_url)
    try:
        lock = holder.transaction()
        await lock.start()
        await holder.execute(
            "SELECT 1 FROM engram.memories"
            " WHERE record_id = $1 AND superseded_by IS NULL FOR NO KEY UPDATE",
            older,
        )
        written = await kernel.gate.evaluate(create(belief(V21, event_time=APRIL), WRITER))
        assert written.record_id is not None, written.reason
        newer = written.record_id
        for _ in range(200):  # the resolver's step waits for v2.0's row
            if await _waiting_on_a_lock(database):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the resolver never reached v2.0's row")
        async with _second_kernel(database, embedder) as other:
            await _raised(other, newer)
        await lock.rollback()
    finally:
        await holder.close()
    await kernel.events.settled()

    seen = await kernel.temporal.current(older, caller=INTERN, count_read=False)
    assert seen is not None
    assert (None, MemoryStatus.ACTIVE) == (seen.event_time_end, seen.status)
    assert (await head_of(kernel, newer)).status is MemoryStatus.CHALLENGED
    # the step did commit after the raise (v2 ended in April) and was undone (v3)
    ends = [v.event_time_end for v in await kernel.temporal.get_version_chain(older)]
    assert [None, APRIL, None] == ends


async def _ratings(database: ScratchDatabase) -> int:
    conn = await asyncpg.connect(database.admin_url)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM engram.memory_feedback"))
    finally:
        await conn.close()


async def test_a_rating_refused_for_a_record_id_given_as_text_stores_nothing(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Medium. An in-process rating whose record id was the id's text (as a client holding
    JSON has it) was stored, and then refused as "request_id: already used to rate another
    record" (the stored UUID did not equal the text): each call the caller was told failed
    stored one more rating, the learned advisor's reward. A rating with ``useful`` not a
    bool reached the database (DatabaseError). Both are now refused before anything is
    read or stored, as ValidationFailed."""
    record_id = next(iter((await seed(kernel)).values()))
    for arguments in (
        {"record_id": str(record_id), "useful": True},
        {"record_id": record_id, "useful": "yes"},
        {"record_id": record_id, "useful": None},
        {"record_id": record_id, "useful": 1},
    ):
        with pytest.raises(ValidationFailed):
            await kernel.retrieval.feedback(READER, **arguments)
    assert 0 == await _ratings(database)


ODD_ARGUMENTS: list[dict[str, Any]] = [
    {"min_score": "0.5"},
    {"min_score": "1e309"},
    {"min_score": None},
    {"min_score": True},
    {"limit": "5"},
    {"limit": 5.5},
    {"limit": None},
    {"limit": True},
    {"types": ["belief"]},
    {"types": "belief"},
    {"namespace": None},
    {"namespace": 5},
    {"tags": [5]},
    {"tags": {"a": 1}},
    {"as_of_event": "2026-01-01"},
    {"as_of_ingestion": datetime.max.replace(tzinfo=timezone(timedelta(hours=-14)))},
    {"include_superseded": "yes"},
    {"include_consolidated": 1},
]


@pytest.mark.parametrize("arguments", ODD_ARGUMENTS, ids=repr)
async def test_an_in_process_search_of_mistyped_arguments_is_refused_as_invalid(
    kernel: Kernel, arguments: dict[str, Any]
) -> None:
    """Low. ``Retrieval.search`` (the in-process search) checked the values of its
    arguments but not their types: a ``min_score`` or ``limit`` given as text or None, a
    type given by its name, a namespace of None raised TypeError, AttributeError or the
    driver's DatabaseError, and ``True`` passed as a limit of 1 and a floor of 1. Each is
    now a ValidationFailed naming the argument."""
    with pytest.raises(ValidationFailed):
        await kernel.retrieval.search(READER, "where are invoices kept", **arguments)


@pytest.mark.parametrize("query", [None, 5, b"invoices"], ids=repr)
async def test_an_in_process_search_of_a_query_that_is_not_text_is_refused(
    kernel: Kernel, query: Any
) -> None:
    """Low. A query that is not a string raised AttributeError; it is now refused."""
    with pytest.raises(ValidationFailed):
        await kernel.retrieval.search(READER, query)


#: Secrets given after "pass" that a verb-like word precedes: found before 2026-11-28, when the
#: screen began to read such a "pass" as a verb.
PASS_AFTER_A_VERB = [
    "Login to pass: hunter22",
    "you pass: Xk9#mQ2!vL7p",
    "VPN: user dana, we pass Tr0ub4dor&3",
    "The wifi we pass is Xk9#mQ2!vL7p",
    "server root, it pass: Tr0ub4dor&3",
    "to pass Tr0ub4dor&3",
    "For the staging box they pass = S3cure!Stag1ng",
]


@pytest.mark.parametrize("text", PASS_AFTER_A_VERB)
def test_a_secret_after_pass_is_found_whatever_word_comes_before(text: str) -> None:
    """Medium. To let "the one thing she lets pass is Parmesan" through, the screen read any
    "pass" after "to", "will", "we", "you", "it"... as a verb and looked no further, so a
    password given after it ("Login to pass: hunter22", "we pass Tr0ub4dor&3") was not found
    and the record was stored at the level asked, for every reader of that level. "pass" is
    now read as a verb only when what follows it is said, not assigned (no ':' or '='), and
    is a word (letters, hyphens, apostrophes), as in both sentences the reading was made for."""
    assert PiiKind.SECRET_ASSIGNMENT in {finding.kind for finding in scan(text)}, text


async def test_a_password_after_we_pass_is_quarantined(kernel: Kernel) -> None:
    """Medium (the Gate's view of the above): the record is quarantined at sensitive, so a
    reader of its proposed level does not get the password."""
    result = await kernel.gate.evaluate(
        create(belief("VPN for the Lisbon office: user dana, we pass Tr0ub4dor&3"), WRITER)
    )
    assert result.record_id is not None, result.reason
    stored = await head_of(kernel, result.record_id)
    assert AccessLevel.SENSITIVE is stored.access_level
    assert await kernel.temporal.current(result.record_id, caller=READER) is None


async def test_a_consumed_source_ended_by_a_claim_raised_later_is_reopened(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Medium. A trusted agent's newer statement of an incident is written while a deep pass
    commits the thread: its supersession is carried out on the source the batch consumed
    meanwhile (validity ended, still ``consolidated``; pass H). When the statement is then
    raised to sensitive, the reopener left that source as it was ("consolidated since"),
    so a restricted reader searching with ``include_consolidated`` found it ended at the
    hidden statement's event time. A source the batch had consumed before the step is now
    restated with its validity open again, still ``consolidated``; one consumed or
    forgotten after the step is still left as it is."""
    ids = await _seed_thread(kernel, "pool", STATE_THREAD)
    newer = MemoryRecord.draft(
        MemoryType.EPISODE,
        NEWER_POOL,
        source_agent=BOSS.agent_id,
        event_time=DAY + timedelta(days=5),
        namespace="pool",
    )
    found, report = await _written_while_a_batch_commits(kernel, database, newer)
    assert "supersession" in found, found
    await kernel.events.settled()
    assert DAY + timedelta(days=5) == (await head_of(kernel, ids[2])).event_time_end
    [newer_id] = [
        row["record_id"]
        for row in await kernel.db.fetch(
            "SELECT record_id FROM memories WHERE content = $1 AND superseded_by IS NULL",
            NEWER_POOL,
        )
    ]

    await _raised(kernel, newer_id)

    source = await head_of(kernel, ids[2])
    assert (MemoryStatus.CONSOLIDATED, None) == (source.status, source.event_time_end)
    seen = await kernel.retrieval.search(
        INTERN, NEWER_POOL, limit=10, namespace="pool", include_consolidated=True
    )
    assert all(hit.record.event_time_end is None for hit in seen.hits)
    assert ids[2] in {hit.record.record_id for hit in seen.hits}
    [summary] = [item.record_id for batch in report.batches for item in batch.items]
    assert MemoryStatus.ACTIVE is (await head_of(kernel, summary)).status
    assert [] == await broken_invariants(kernel)
