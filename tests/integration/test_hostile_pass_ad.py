"""Hostile pass AD: what a caller reads must not change with records it may not read.

Every test here failed on the code it was written against. Real embedded PostgreSQL, the real
embedding model (or a real timeout of it), no mocks.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import numpy as np
import pytest
from pgvector.asyncpg import register_vector

from engram import Kernel, open_kernel
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.types import AccessLevel, WriteOutcome
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import BOSS, INTERN, OTHER, belief, create, update

MODEL = EngramSettings().embedding_model_name

LEDGER = "The ledger service runs on PostgreSQL 16 in the Frankfurt region."


async def _repeat_beside(
    kernel: Kernel, namespace: str, *, hidden: bool, repeated: str = LEDGER
) -> WriteOutcome:
    """An agent-level record of LEDGER, then the trusted agent's agent-level ``repeated``
    (LEDGER, or a text equal to it once normalised); with ``hidden``, the trusted agent stored
    LEDGER at ``sensitive`` first."""
    if hidden:
        secret = await kernel.gate.evaluate(
            create(
                belief(
                    LEDGER,
                    namespace=namespace,
                    access_level=AccessLevel.SENSITIVE,
                    source_agent=BOSS.agent_id,
                ),
                BOSS,
            )
        )
        assert secret.outcome is WriteOutcome.CREATED, secret.reason
    shared = await kernel.gate.evaluate(
        create(belief(LEDGER, namespace=namespace, source_agent=OTHER.agent_id), OTHER)
    )
    assert shared.outcome is WriteOutcome.CREATED, shared.reason
    again = await kernel.gate.evaluate(
        create(belief(repeated, namespace=namespace, source_agent=BOSS.agent_id), BOSS)
    )
    assert again.record_id is not None, again.reason
    if again.outcome is WriteOutcome.REINFORCED:
        assert again.record_id == shared.record_id
    return again.outcome


async def test_an_exact_duplicate_above_a_proposals_level_hides_none_at_its_level(
    stalled_kernel: Kernel,
) -> None:
    """High. The exact-duplicate look-up took the oldest active head of the content among
    every level the writer reads, and the Gate then set it aside when it stood above the
    proposal's level (its readers may not read it): an older copy the trusted writer kept at
    ``sensitive`` hid the copy at the proposal's own level. Without an embedding (the model
    timed out, a degraded write) that look-up is the only duplicate check, so the trusted
    agent's agent-level repetition was stored as a second record instead of reinforcing the
    one agent-level readers have: what a restricted reader lists changed with a record it may
    not read."""
    kernel = stalled_kernel
    assert await _repeat_beside(kernel, "plain", hidden=False) is WriteOutcome.REINFORCED
    assert await _repeat_beside(kernel, "beside", hidden=True) is WriteOutcome.REINFORCED
    for namespace in ("plain", "beside"):
        listed = await kernel.temporal.page(caller=INTERN, namespace=namespace)
        assert [r.content for r in listed] == [LEDGER]


async def test_an_exact_duplicate_above_a_proposals_level_hides_none_with_the_model(
    kernel: Kernel,
) -> None:
    """High. The same with the model answering: a text equal to the stored one only once
    normalised (NFKC folds fullwidth letters; the model reads them as other tokens) is no
    near duplicate, so the exact look-up alone could find the agent-level copy, and the
    older sensitive copy hid it."""
    wide = LEDGER.replace("ledger", "\uff4c\uff45\uff44\uff47\uff45\uff52")
    outcome = await _repeat_beside(kernel, "plain", hidden=False, repeated=wide)
    assert outcome is WriteOutcome.REINFORCED
    outcome = await _repeat_beside(kernel, "beside", hidden=True, repeated=wide)
    assert outcome is WriteOutcome.REINFORCED
    for namespace in ("plain", "beside"):
        listed = await kernel.temporal.page(caller=INTERN, namespace=namespace)
        assert [r.content for r in listed] == [LEDGER]


# --- the vector leg's scan and records the caller may not read ---------------------------

#: The index scan's limit in these tests (pgvector's ``hnsw.max_scan_tuples``, 20,000 by
#: default): a store needs more hidden versions near a query than the limit for them to fill
#: the scan, so the test lowers the limit instead of writing 20,000 of them. Below about 2,000
#: versions the planner measures every version without the index (ADR-016), hence 3,000.
SCAN_LIMIT = 1_000
HIDDEN_NEAR = 3_000
READABLE_FAR = 3_000
QUERY = "which region does the billing database fail over to"
OWN = [
    "The billing database fails over to the Dublin region within five minutes.",
    "Billing replicas are promoted by the on-call database engineer.",
    "The billing service keeps its invoices in PostgreSQL.",
    "Failover drills for billing run on the first Monday of each quarter.",
    "The Dublin region hosts the warm standby of every payments database.",
]


async def _seed(database: ScratchDatabase, vectors: list[np.ndarray], level: str) -> None:
    """Beliefs at ``level`` with the given vectors, written straight into the table (as
    ``benchmarks/seed_versions`` seeds large stores; the audit foreign key is not checked
    while seeding), then ANALYZE."""
    conn = await asyncpg.connect(database.admin_url)
    try:
        await register_vector(conn)
        await conn.execute("SET session_replication_role = replica")
        await conn.executemany(
            "INSERT INTO engram.memories (id, record_id, version, type, content, metadata,"
            " source_agent, source_confidence, event_time, ingestion_time, access_level,"
            " gate_decision_id, gate_decision_type, namespace, status, importance,"
            " content_hash, embedding, embedding_model)"
            " VALUES ($1, $1, 1, 'belief', $2, '{}', 'seed', 0.75, now(), now(), $3,"
            " gen_random_uuid(), 'external', 'default', 'active', 0.5,"
            " sha256(convert_to($2, 'UTF8')), $4, $5)",
            [
                (uid := uuid.uuid4(), f"Seeded {level} note {uid}.", level, v, MODEL)
                for v in vectors
            ],
        )
        await conn.execute("ANALYZE engram.memories")
    finally:
        await conn.close()


def _near(vector: list[float], count: int, spread: float = 0.01) -> list[np.ndarray]:
    """``count`` unit vectors close to ``vector`` (cosine about 0.98 at the default spread,
    0.9998 at 0.001)."""
    rng = np.random.default_rng(7)
    base = np.asarray(vector, dtype=np.float64)
    moved = base + rng.normal(0.0, spread, (count, base.size))
    return list((moved / np.linalg.norm(moved, axis=1, keepdims=True)).astype(np.float32))


def _far(count: int) -> list[np.ndarray]:
    """``count`` random unit vectors (cosine about 0 with any query)."""
    moved = np.random.default_rng(11).normal(0.0, 1.0, (count, 384))
    return list((moved / np.linalg.norm(moved, axis=1, keepdims=True)).astype(np.float32))


async def _seed_hidden_near(
    database: ScratchDatabase, vector: list[float], count: int, spread: float = 0.01
) -> None:
    """``count`` sensitive beliefs whose vectors lie close to ``vector``: what a trusted
    agent's many notes on one topic look like to the index."""
    await _seed(database, _near(vector, count, spread), "sensitive")


@pytest.fixture
async def scan_limited(
    database: ScratchDatabase, embedder: FastembedEmbedder
) -> AsyncIterator[tuple[Kernel, ScratchDatabase]]:
    """A kernel whose connections stop an index scan after SCAN_LIMIT versions, on a store
    holding READABLE_FAR agent-level beliefs about nothing in particular: the caller's levels
    are common, so the planner walks the index (for a filter it expects to match a few rows
    it measures those rows instead)."""
    await _seed(database, _far(READABLE_FAR), "agent")
    conn = await asyncpg.connect(database.admin_url)
    try:
        await conn.execute(
            f'ALTER ROLE engram_runtime IN DATABASE "{database.name}" '
            f"SET hnsw.max_scan_tuples = {SCAN_LIMIT}"
        )
    finally:
        await conn.close()
    settings = EngramSettings(
        database_url=database.runtime_url, migrate_on_start=False, db_pool_max_size=10
    )
    async with open_kernel(settings=settings, embeddings=embedder) as opened:
        yield opened, database


async def test_hidden_versions_near_a_query_take_no_hits_from_a_reader(
    scan_limited: tuple[Kernel, ScratchDatabase],
) -> None:
    """High. The vector leg walks the HNSW index with the caller's access filter applied to
    each version it visits, and pgvector's iterative scan stops after
    ``hnsw.max_scan_tuples`` versions, those filtered out included. Versions a reader may not
    read lying nearer a query than its own therefore used up the scan: a restricted agent's
    search found fewer of its records, or none, once a trusted agent had written enough
    sensitive notes on the topic (documented as possible since hostile pass M, never fixed).
    A reader's hits must be the same with and without them."""
    kernel, database = scan_limited
    for content in OWN:
        result = await kernel.gate.evaluate(
            create(belief(content, source_agent=OTHER.agent_id), OTHER)
        )
        assert result.outcome is WriteOutcome.CREATED, result.reason
    floor = {"min_score": 0.2}  # the seeded records about nothing score about 0
    searches: list[dict[str, Any]] = [
        floor,
        {"limit": 3, **floor},
        {"as_of_ingestion": datetime.now(UTC), **floor},
        {"include_superseded": True, **floor},
    ]

    async def hits() -> list[list[str]]:
        found = []
        for options in searches:
            result = await kernel.retrieval.search(INTERN, QUERY, **options)
            found.append([hit.record.content for hit in result.hits])
        return found

    before = await hits()
    assert all(before), before
    assert len(before[0]) == len(OWN)
    await _seed_hidden_near(database, await kernel.embeddings.embed_one(QUERY), HIDDEN_NEAR)
    assert await hits() == before


async def test_hidden_versions_near_a_proposal_hide_no_duplicate_from_its_writer(
    scan_limited: tuple[Kernel, ScratchDatabase],
) -> None:
    """Medium. The Gate looks up a proposal's neighbours with the same filtered index walk:
    once versions the writer may not read nearer its proposal than its own record used up
    the scan (a trusted agent's sensitive copies of the sentence, more of them than
    ``hnsw.max_scan_tuples``), a restricted agent's restatement of an agent-level record
    found no neighbour and was stored as a second record instead of reinforcing the first
    (its answer, and what every agent-level reader then lists, changed with records neither
    may read)."""
    kernel, database = scan_limited
    restated = LEDGER.replace("16 in", "16, in")

    async def repeat(namespace: str) -> WriteOutcome:
        first = await kernel.gate.evaluate(
            create(belief(LEDGER, namespace=namespace, source_agent=OTHER.agent_id), OTHER)
        )
        assert first.outcome is WriteOutcome.CREATED, first.reason
        again = await kernel.gate.evaluate(
            create(belief(restated, namespace=namespace, source_agent=INTERN.agent_id), INTERN)
        )
        return again.outcome

    assert await repeat("plain") is WriteOutcome.REINFORCED
    proposal = await kernel.embeddings.embed_one(restated)
    await _seed_hidden_near(database, proposal, HIDDEN_NEAR, spread=0.001)
    assert await repeat("default") is WriteOutcome.REINFORCED


# --- decay and a record's hidden past ---------------------------------------------------------

DRILL = "The zyqbar failover drill runs every Thursday at noon."


async def test_a_records_decay_does_not_count_the_age_of_versions_its_readers_may_not_read(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Medium. A record's stored ``decay_score`` ages from its first version, whatever that
    version's level: a record the trusted agent kept at ``sensitive`` for a year and then
    lowered to ``agent`` showed agent-level readers, for whom it is one version written
    today, the score of a year-old record (about half), saying it had existed hidden and for
    how long. It now ages from its first version every reader of its current level may
    read (the version ADR-009's numbering calls 1 for them)."""
    plain = await kernel.gate.evaluate(
        create(belief(DRILL, namespace="plain", source_agent=BOSS.agent_id), BOSS)
    )
    assert plain.record_id is not None, plain.reason
    kept = await kernel.gate.evaluate(
        create(
            belief(
                DRILL + " Owner: platform.",
                namespace="raised",
                access_level=AccessLevel.SENSITIVE,
                source_agent=BOSS.agent_id,
            ),
            BOSS,
        )
    )
    assert kept.record_id is not None, kept.reason
    conn = await asyncpg.connect(database.admin_url)
    try:  # a year passes (the test cannot wait for it)
        await conn.execute(
            "UPDATE engram.memories SET ingestion_time = ingestion_time - interval '365 days',"
            " event_time = event_time - interval '365 days' WHERE record_id = $1",
            kept.record_id,
        )
    finally:
        await conn.close()
    lowered = await kernel.gate.evaluate(
        update(kept.record_id, DRILL, 1, BOSS, namespace="raised", access_level=AccessLevel.AGENT)
    )
    assert lowered.outcome is WriteOutcome.UPDATED, lowered.reason
    await kernel.temporal.refresh_decay()
    scores = []
    for record_id in (plain.record_id, kept.record_id):
        seen = await kernel.temporal.current(record_id, caller=INTERN, count_read=False)
        assert seen is not None
        assert (seen.version, seen.content) == (1, DRILL)
        scores.append(seen.decay_score)
        assert await kernel.temporal.compute_decay(record_id) == pytest.approx(scores[-1], abs=0.01)
    assert scores[1] == pytest.approx(scores[0], abs=0.01)
