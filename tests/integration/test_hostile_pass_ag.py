"""Hostile pass AG: a release of a consolidation source that its outbox event never finished.
Each test failed before the fix its docstring names."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from uuid import UUID

import asyncpg
import pytest

from engram import Kernel, open_kernel
from engram.config import EngramSettings
from engram.errors import EngramError
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
)
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DEEP, INCIDENT, LATE_ETL, head_of
from tests.integration.gate_helpers import BOSS, holding_head, lock_waiters
from tests.integration.test_hostile_pass_ae import _seed

EXTERNAL = GateDecisionType.EXTERNAL
ENGRAM = (sys.executable, "-m", "engram.protocols.cli")
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


async def _forget(kernel: Kernel, record_id: UUID, *, check: bool = True) -> None:
    head = await head_of(kernel, record_id)
    forgot = await kernel.gate.evaluate(
        GateRequest.forget(head, BOSS, EXTERNAL, expected_version=head.version)
    )
    assert forgot.record_id == record_id or not check, forgot.reason


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


async def _forget_while_releases_fail(
    kernel: Kernel, database: ScratchDatabase, record_id: UUID
) -> None:
    """Forget ``record_id`` while its release cannot read the batches (SELECT on
    consolidation_batches revoked for real) until the outbox gives its event up."""
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute("REVOKE SELECT ON engram.consolidation_batches FROM engram_runtime")
        await _forget(kernel, record_id)
        await _given_up(kernel, record_id)
    finally:
        await admin.execute("GRANT SELECT ON engram.consolidation_batches TO engram_runtime")
        await admin.close()


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
    await _forget_while_releases_fail(kernel, database, ids[2])
    abandoned = kernel.metrics.outbox_abandoned.labels(event="memory.forgotten")._value.get()
    assert 1 == abandoned
    assert (await head_of(kernel, made)).status is not MemoryStatus.FORGOTTEN  # the gap

    outcome = await kernel.scheduler.run_now("consolidation_light")

    assert "succeeded" == outcome.outcome, outcome.detail
    assert (1, 0) == (outcome.detail["releases_swept"], outcome.detail["releases_failed"])
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
        assert (0, 1) == (stuck.detail["releases_swept"], stuck.detail["releases_failed"])
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


# --- what held: releases racing passes, rollbacks, corrections and a failing outbox --------

BACKUP = [
    "The nightly backup of the billing database to bucket bk-77 took 41 minutes on Monday.",
    "Billing database backup to bk-77 ran 44 minutes on Tuesday night.",
    "Wednesday's billing database backup into bucket bk-77 needed 39 minutes.",
]


async def _correct(kernel: Kernel, record_id: UUID, note: str) -> object:
    head = await head_of(kernel, record_id)
    draft = MemoryRecord.draft(
        head.type,
        head.content + "\n" + note,
        record_id=record_id,
        source_agent=BOSS.agent_id,
        event_time=head.event_time,
        access_level=head.access_level,
        namespace=head.namespace,
        metadata=dict(head.metadata),
    )
    return await kernel.gate.evaluate(
        GateRequest(GateAction.UPDATE, draft, BOSS, EXTERNAL, head.version)
    )


async def _broken_promises(kernel: Kernel) -> list[str]:
    """What breaks ADR-018's promises: a live summary no agent wrote over a source that is no
    longer consolidated (what was taken back lives on), a source consolidated under two live
    summaries (stated twice) or under none (lost)."""
    problems = []
    rows = await kernel.db.fetch(
        "SELECT item FROM consolidation_batches, jsonb_array_elements(items) AS item "
        "WHERE rolled_back_at IS NULL"
    )
    holders: dict[UUID, list[UUID]] = {}
    for row in rows:
        summary = await head_of(kernel, UUID(row["item"]["record_id"]))
        if summary.status is MemoryStatus.FORGOTTEN:
            continue
        corrected = await kernel.db.fetchval(
            "SELECT EXISTS (SELECT 1 FROM memories WHERE record_id = $1 "
            "AND gate_decision_type = 'external')",
            summary.record_id,
        )
        for source in row["item"]["sources"]:
            head = await head_of(kernel, UUID(source))
            if head.status is MemoryStatus.CONSOLIDATED:
                holders.setdefault(head.record_id, []).append(summary.record_id)
            elif not corrected:
                problems.append(f"summary {summary.record_id} over a {head.status} source")
    problems += [f"{s} under {len(live)} summaries" for s, live in holders.items() if len(live) > 1]
    hidden = await kernel.db.fetch(
        "SELECT record_id FROM memories WHERE superseded_by IS NULL AND status = 'consolidated'"
    )
    problems += [f"{row[0]} under no summary" for row in hidden if row[0] not in holders]
    return problems


@pytest.mark.parametrize("seed", range(4))
async def test_releases_racing_passes_rollbacks_and_corrections_keep_every_promise(
    impatient_kernel: Kernel, database: ScratchDatabase, seed: int
) -> None:
    """Forgets and changes of sources, an agent's correction of a summary, a pass, a sweep
    and (half the time) a rollback, all at once, most often while the releases cannot read
    the batches until the outbox gives them up; then the sweep. Every promise holds: no
    double release, no correction undone, nothing stated twice or lost. With a sweep that
    finds nothing (as before the fix) it fails: summaries keep what was taken back."""
    kernel = impatient_kernel
    rng = random.Random(seed)  # noqa: S311 - interleavings, not secrets
    topics = [await _seed(kernel, texts) for texts in (INCIDENT, LATE_ETL, BACKUP)]
    first = await kernel.consolidation.run(DEEP)
    made = first.created
    actions = [
        _forget(kernel, topics[0][rng.randrange(3)], check=False),
        _correct(kernel, topics[1][rng.randrange(4)], "Edited: the ETL host is etl-09."),
        _correct(kernel, made[rng.randrange(len(made))], "Correction: seen by ops."),
        _forget(kernel, topics[2][rng.randrange(3)], check=False),
        kernel.consolidation.run(DEEP),
        kernel.consolidation.sweep_releases(),
    ]
    if rng.random() < 0.5:
        actions.append(kernel.consolidation.rollback(first.batches[0].batch_id))
    rng.shuffle(actions)
    admin = await asyncpg.connect(database.admin_url)
    try:
        denied = rng.random() < 0.75
        if denied:
            await admin.execute("REVOKE SELECT ON engram.consolidation_batches FROM engram_runtime")
        results = await asyncio.gather(*actions, return_exceptions=True)
        for _ in range(500):
            if not await kernel.db.fetchval(
                "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL"
            ):
                break
            await asyncio.sleep(0.02)
    finally:
        await admin.execute("GRANT SELECT ON engram.consolidation_batches TO engram_runtime")
        await admin.close()
    assert all(not isinstance(r, Exception) or isinstance(r, EngramError) for r in results)

    await kernel.consolidation.sweep_releases()
    await kernel.events.settled()

    assert [] == await _broken_promises(kernel), results


async def test_a_sweep_killed_mid_release_leaves_nothing_half_done(
    impatient_kernel: Kernel, database: ScratchDatabase
) -> None:
    """``engram jobs run consolidation_light`` is killed with SIGKILL while its sweep's
    release of a summary waits for the summary's row lock: nothing of the release is written
    (the summary stands, every remaining source is still consolidated under it, no fact is
    stated twice), and the next pass's sweep releases it."""
    kernel = impatient_kernel
    ids = await _seed(kernel, INCIDENT)
    (made,) = (await kernel.consolidation.run(DEEP)).created
    await _forget_while_releases_fail(kernel, database, ids[2])
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(ENGRAM_DATABASE_URL=database.runtime_url, ENGRAM_MIGRATE_ON_START="false")
    async with holding_head(database.admin_url, made) as held:
        process = await asyncio.create_subprocess_exec(
            *ENGRAM,
            "jobs",
            "run",
            "consolidation_light",
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            # a cold process opens a kernel before it reaches the lock: slow on a busy machine
            await lock_waiters(held.watch, 1, seconds=90)
        finally:
            os.kill(process.pid, signal.SIGKILL)
            await process.wait()
        assert -signal.SIGKILL == process.returncode
        await held.release()
    for _ in range(200):  # the killed client's backends end once they read its socket
        busy = await kernel.db.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend' AND state <> 'idle' AND pid <> pg_backend_pid()"
        )
        if not busy:
            break
        await asyncio.sleep(0.05)
    assert (await head_of(kernel, made)).status is not MemoryStatus.FORGOTTEN
    for source in ids[:2]:
        assert (await head_of(kernel, source)).status is MemoryStatus.CONSOLIDATED

    outcome = await kernel.scheduler.run_now("consolidation_light")

    assert "succeeded" == outcome.outcome, outcome.detail
    assert (await head_of(kernel, made)).status is MemoryStatus.FORGOTTEN
    assert [] == await _broken_promises(kernel)


async def test_two_sweeps_at_once_release_a_summary_once(
    impatient_kernel: Kernel, database: ScratchDatabase
) -> None:
    """Two sweeps (two kernels' operators running the light job by hand, say) find the same
    lost release at once: the summary is forgotten by one of them, once, and the other
    finds nothing left to do; every promise holds."""
    kernel = impatient_kernel
    ids = await _seed(kernel, INCIDENT)
    (made,) = (await kernel.consolidation.run(DEEP)).created
    await _forget_while_releases_fail(kernel, database, ids[0])

    # The summary's head is held until both sweeps have looked the release up and wait to
    # make it: without the lock the first could commit before the second looked.
    async with holding_head(database.admin_url, made) as held:
        sweeps = [asyncio.create_task(kernel.consolidation.sweep_releases()) for _ in range(2)]
        await lock_waiters(held.watch, 2, seconds=60)
    reports = await asyncio.gather(*sweeps)

    assert [1, 1] == [report.found for report in reports]  # both set out to release it
    assert 1 == sum(report.released for report in reports), reports
    assert 0 == sum(report.failed for report in reports), reports
    forgets = await kernel.db.fetchval(
        "SELECT count(*) FROM librarian_audit WHERE record_id = $1 AND action = 'FORGET' "
        "AND outcome = 'forgotten'",
        made,
    )
    assert 1 == forgets
    assert [] == await _broken_promises(kernel)
