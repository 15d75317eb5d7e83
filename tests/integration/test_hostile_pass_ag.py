"""Hostile pass AG: a release of a consolidation source that its outbox event never finished.
Each test failed before the fix its docstring names."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from uuid import UUID

import asyncpg
import pytest

from engram import Kernel, open_kernel
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
)
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DAY, DEEP, INCIDENT, LATE_ETL, head_of
from tests.integration.gate_helpers import BOSS

EXTERNAL = GateDecisionType.EXTERNAL
#: The fact of INCIDENT's third record, which the agent forgets.
FORGOTTEN_FACT = "capped at 20"


@pytest.fixture
async def impatient_kernel(
    database: ScratchDatabase, embedder: FastembedEmbedder
) -> AsyncIterator[Kernel]:
    """A kernel whose outbox gives an event up after two deliveries 50 ms apart (ten over
    eight minutes by default)."""
    settings = EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        retry_initial_wait_seconds=0.01,
        outbox_max_attempts=2,
        outbox_retry_seconds=0.05,
    )
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        yield kernel


async def _seed(kernel: Kernel, texts: list[str]) -> list[UUID]:
    ids = []
    for n, text in enumerate(texts):
        record = MemoryRecord.draft(
            MemoryType.EPISODE,
            text,
            source_agent=BOSS.agent_id,
            event_time=DAY + timedelta(days=n),
        )
        result = await kernel.gate.evaluate(GateRequest(GateAction.CREATE, record, BOSS, EXTERNAL))
        assert result.record_id is not None, result.reason
        ids.append(result.record_id)
    await kernel.events.settled()
    return ids


async def _forget(kernel: Kernel, record_id: UUID) -> None:
    head = await head_of(kernel, record_id)
    forgot = await kernel.gate.evaluate(
        GateRequest.forget(head, BOSS, EXTERNAL, expected_version=head.version)
    )
    assert forgot.record_id == record_id, forgot.reason


async def _given_up(kernel: Kernel, record_id: UUID, event: str = "memory.forgotten") -> None:
    """Wait until the outbox has delivered, or given up on, the record's ``event``."""
    for _ in range(500):
        done = await kernel.db.fetchval(
            "SELECT bool_and(dispatched_at IS NOT NULL) FROM outbox "
            "WHERE event_type = $2 AND aggregate_id = $1",
            record_id,
            event,
        )
        if done:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the outbox neither delivered nor gave up on the event")


async def _what_readers_see(kernel: Kernel, query: str) -> list[str]:
    """Every text the agent gets back: searches with and without consolidated records, its
    listing, and the current version of each record listed."""
    texts: list[str] = []
    for options in ({}, {"include_consolidated": True}):
        found = await kernel.retrieval.search(BOSS, query, limit=50, **options)
        texts += [hit.record.content for hit in found.hits]
    for record in await kernel.temporal.page(caller=BOSS):
        texts.append(record.content)
        current = await kernel.temporal.current(record.record_id, caller=BOSS, count_read=False)
        assert current is not None
        texts.append(current.content)
    return texts


def _swept(kernel: Kernel, outcome: str) -> float:
    return kernel.metrics.releases_swept.labels(outcome=outcome)._value.get()


async def test_a_release_the_outbox_gave_up_on_is_finished_by_the_next_scheduled_pass(
    impatient_kernel: Kernel, database: ScratchDatabase
) -> None:
    """An agent forgot a consolidated source while the release could not read the batches
    (SELECT on consolidation_batches revoked for real): the outbox delivered its event until
    it gave up (ten times over about eight minutes by default). The summary then kept the
    forgotten fact, in search and reads, and nothing ever released it. The scheduled passes
    now sweep for such summaries first and release them through the normal path."""
    kernel = impatient_kernel
    ids = await _seed(kernel, INCIDENT)
    (made,) = (await kernel.consolidation.run(DEEP)).created
    assert FORGOTTEN_FACT in (await head_of(kernel, made)).content
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute("REVOKE SELECT ON engram.consolidation_batches FROM engram_runtime")
        await _forget(kernel, ids[2])
        await _given_up(kernel, ids[2])
    finally:
        await admin.execute("GRANT SELECT ON engram.consolidation_batches TO engram_runtime")
        await admin.close()
    abandoned = kernel.metrics.outbox_abandoned.labels(event="memory.forgotten")._value.get()
    assert 1 == abandoned
    assert (await head_of(kernel, made)).status is not MemoryStatus.FORGOTTEN  # the gap

    outcome = await kernel.scheduler.run_now("consolidation_light")

    assert "succeeded" == outcome.outcome, outcome.detail
    assert (await head_of(kernel, made)).status is MemoryStatus.FORGOTTEN
    seen = await _what_readers_see(kernel, "checkout-api connection pool root cause")
    assert seen, "the other sources' facts are readable again"
    assert not [text for text in seen if FORGOTTEN_FACT in text]
    assert 1 == _swept(kernel, "released")
    assert 0 == _swept(kernel, "failed")
    again = await kernel.consolidation.sweep_releases()
    assert 0 == again.released + again.failed


async def test_the_sweep_leaves_live_summaries_and_an_agents_correction_alone(
    kernel: Kernel,
) -> None:
    """Two summaries: one whose sources all stand, one an agent corrected before another
    agent forgot one of its sources (the release leaves it, pass AE). The sweep releases
    neither, each time it runs."""
    await _seed(kernel, INCIDENT)
    etl = await _seed(kernel, LATE_ETL)
    created = (await kernel.consolidation.run(DEEP)).created
    assert 2 == len(created)
    heads = {made: await head_of(kernel, made) for made in created}
    (etl_summary,) = [m for m, h in heads.items() if "orders_daily" in h.content]
    summary = heads[etl_summary]
    corrected = MemoryRecord.draft(
        summary.type,
        summary.content + "\nCorrection: the ETL host is etl-04.",
        record_id=etl_summary,
        source_agent=BOSS.agent_id,
        event_time=summary.event_time,
        access_level=summary.access_level,
        namespace=summary.namespace,
        metadata=dict(summary.metadata),
    )
    fixed = await kernel.gate.evaluate(
        GateRequest(GateAction.UPDATE, corrected, BOSS, EXTERNAL, summary.version)
    )
    assert 2 == fixed.version, fixed.reason
    await _forget(kernel, etl[0])
    await kernel.events.settled()
    before = {made: await head_of(kernel, made) for made in created}

    for _ in range(2):
        report = await kernel.consolidation.sweep_releases()
        assert (0, 0) == (report.released, report.failed)

    for made in created:
        after = await head_of(kernel, made)
        assert (after.version, after.status) == (before[made].version, before[made].status)
        assert after.status is not MemoryStatus.FORGOTTEN


async def test_a_change_whose_release_was_given_up_is_finished_by_the_sweep(
    impatient_kernel: Kernel, database: ScratchDatabase
) -> None:
    """The same for an agent's correction of a consolidated source (``memory.updated``): the
    release found no batch to read until the outbox gave up, and the summary kept the text
    the agent had corrected. The sweep releases it from the source's first version written
    by the agent after the batch."""
    kernel = impatient_kernel
    ids = await _seed(kernel, INCIDENT)
    (made,) = (await kernel.consolidation.run(DEEP)).created
    head = await head_of(kernel, ids[2])
    change = MemoryRecord.draft(
        head.type,
        "Root cause of the checkout-api incident: a DNS change shipped with v4.3.0.",
        record_id=ids[2],
        source_agent=BOSS.agent_id,
        event_time=head.event_time,
        access_level=head.access_level,
        namespace=head.namespace,
    )
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute("REVOKE SELECT ON engram.consolidation_batches FROM engram_runtime")
        changed = await kernel.gate.evaluate(
            GateRequest(GateAction.UPDATE, change, BOSS, EXTERNAL, head.version)
        )
        assert changed.version == head.version + 1, changed.reason
        await _given_up(kernel, ids[2], "memory.updated")
    finally:
        await admin.execute("GRANT SELECT ON engram.consolidation_batches TO engram_runtime")
        await admin.close()
    assert FORGOTTEN_FACT in (await head_of(kernel, made)).content  # the gap

    outcome = await kernel.scheduler.run_now("consolidation_light")

    assert "succeeded" == outcome.outcome, outcome.detail
    assert 1 == _swept(kernel, "released")
    assert (await head_of(kernel, made)).status is MemoryStatus.FORGOTTEN
    seen = await _what_readers_see(kernel, "checkout-api connection pool root cause")
    assert any("DNS change" in text for text in seen)
    assert not [text for text in seen if FORGOTTEN_FACT in text]


async def test_a_release_that_fails_in_the_database_does_not_stop_the_pass(
    impatient_kernel: Kernel, database: ScratchDatabase
) -> None:
    """A trigger raises on every write of one summary, so its release fails in the database
    (an infrastructure error) at each delivery until the outbox gives up, and again in the
    sweep. The sweep's first version let that error fail the whole light pass: no topic of
    any level was consolidated while that one summary could not be released. The failure is
    now counted and logged, the pass goes on, and the next sweep releases the summary once
    the database takes the write."""
    kernel = impatient_kernel
    ids = await _seed(kernel, INCIDENT)
    (made,) = (await kernel.consolidation.run(DEEP)).created
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute(
            "CREATE FUNCTION engram.summary_stuck() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'summary is stuck'; END $$"
        )
        await admin.execute(
            "CREATE TRIGGER summary_stuck BEFORE UPDATE ON engram.memories FOR EACH ROW "
            f"WHEN (OLD.record_id = '{made}') EXECUTE FUNCTION engram.summary_stuck()"
        )
        await _forget(kernel, ids[2])
        await _given_up(kernel, ids[2])
        etl = await _seed(kernel, LATE_ETL)  # a topic due at the next pass

        stuck = await kernel.scheduler.run_now("consolidation_light")

        assert "succeeded" == stuck.outcome, stuck.detail
        statuses = {(await head_of(kernel, source)).status for source in etl}
        assert {MemoryStatus.CONSOLIDATED} == statuses
        assert 1 == _swept(kernel, "failed")
        assert (await head_of(kernel, made)).status is not MemoryStatus.FORGOTTEN
        await admin.execute("DROP TRIGGER summary_stuck ON engram.memories")
    finally:
        await admin.close()

    report = await kernel.consolidation.sweep_releases()

    assert (1, 1, 0) == (report.found, report.released, report.failed)
    assert (await head_of(kernel, made)).status is MemoryStatus.FORGOTTEN
