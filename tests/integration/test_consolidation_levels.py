"""Each access level is watched and consolidated on its own (ADR-019's amendment), on the real
database and model: an event-driven pass of one level leaves the other levels' records and
marks alone, so a level's topic still triggers its own pass later; no batch joins two levels;
a level's event mark never moves back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from engram import Kernel, open_kernel
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.consolidation import ConsolidationTrigger
from engram.memory.types import AccessLevel, MemoryStatus
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import engine_with, head_of
from tests.integration.gate_helpers import BOSS, WRITER
from tests.integration.scheduler_helpers import Clock, scheduler
from tests.integration.test_triggers import TOPIC, episode, kernel_jobs, write

pytestmark = pytest.mark.usefixtures("schedulers")

#: A third account of the writer's late job, told in other words than TOPIC's.
THIRD = "The orders_daily ETL blew through its deadline again last night."


async def test_a_pass_of_another_level_does_not_move_a_levels_event_mark(
    kernel: Kernel, database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """Threshold three. The writer has two accounts of a late job (agent level); the trusted
    agent writes three sensitive accounts of it, which Layer 2 links to the writer's. The
    event job's pass reads the sensitive level only. When the writer then writes a third
    account, its level's topic has grown by three since that level's last pass (there was
    none), and the next check runs a pass of the agent level. With one cursor for every
    level, the sensitive pass had moved it past the writer's first two records: the third
    alone was counted, and the writer's topic was never consolidated by the event trigger."""
    settings = EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        retry_initial_wait_seconds=0.01,
        consolidation_event_threshold=3,
    )
    async with open_kernel(settings=settings, embeddings=embedder) as small:
        mine = [
            await write(small, episode(t, n, caller=WRITER), WRITER)
            for n, t in enumerate(TOPIC[:2])
        ]
        hidden = [
            await write(small, episode(t, n + 2, access_level=AccessLevel.SENSITIVE))
            for n, t in enumerate(TOPIC[2:])
        ]
        await small.events.settled()
        await small.refresh_gauges()  # what a scrape of /metrics reads
        gauge = small.metrics.fast_path_records
        assert [2, 3, 0] == [
            gauge.labels(access_level=level)._value.get()
            for level in ("agent", "sensitive", "public")
        ]
        clock = Clock(datetime.now(UTC))
        runner = scheduler(small, kernel_jobs(small, "consolidation_event"), clock)
        assert [] == await runner.tick()  # first sighting: marked, not run
        clock.advance(seconds=settings.consolidation_watch_seconds)
        assert ["consolidation_event"] == await runner.tick()
        [first] = await runner.wait_idle()
        assert (first.outcome, first.detail["levels"], first.detail["consumed"]) == (
            "succeeded",
            ["sensitive"],
            3,
        )
        for record_id in hidden:
            assert (await head_of(small, record_id)).status is MemoryStatus.CONSOLIDATED
        for record_id in mine:
            assert (await head_of(small, record_id)).status is MemoryStatus.ACTIVE
        marks = await small.consolidation.watch.event_marks(None)
        # up to the due time, or the database's clock if earlier (ADR-019, pass O)
        newest = await small.db.fetchval(
            "SELECT max(ingestion_time) FROM memories WHERE record_id = ANY($1) AND version = 1",
            hidden,
        )
        assert newest < marks[AccessLevel.SENSITIVE] <= first.due
        assert marks[AccessLevel.AGENT] == datetime(1970, 1, 1, tzinfo=UTC)

        mine.append(await write(small, episode(THIRD, 5, caller=WRITER), WRITER))
        await small.events.settled()
        clock.advance(seconds=settings.consolidation_watch_seconds)
        assert ["consolidation_event"] == await runner.tick()
        [*_, second] = await runner.wait_idle()
        assert (second.outcome, second.detail["levels"], second.detail["consumed"]) == (
            "succeeded",
            ["agent"],
            3,
        )
        for record_id in mine:
            assert (await head_of(small, record_id)).status is MemoryStatus.CONSOLIDATED
        await runner.stop()


async def test_no_batch_joins_two_levels(kernel: Kernel) -> None:
    """A deep pass with room for every topic in one batch still commits each level's topics
    in a batch of their own (a batch is one transaction: one level's failure must not undo
    another's), the most open level first."""
    agent = [
        await write(kernel, episode(t, n, caller=WRITER), WRITER) for n, t in enumerate(TOPIC[:3])
    ]
    sensitive = [
        await write(kernel, episode(t, n + 3, access_level=AccessLevel.SENSITIVE), BOSS)
        for n, t in enumerate(TOPIC[3:])
    ]
    await kernel.events.settled()
    report = await engine_with(kernel, batch_size=100).run(ConsolidationTrigger.SCHEDULED_DEEP)
    assert report.levels == tuple(AccessLevel)
    batches = [batch for batch in report.batches if batch.committed]
    assert [set(agent), set(sensitive)] == [set(batch.consumed) for batch in batches]
    assert (report.consumed_at(AccessLevel.AGENT), report.consumed_at(AccessLevel.SENSITIVE)) == (
        3,
        2,
    )


async def test_event_marks_never_move_back(kernel: Kernel) -> None:
    """A mark stored later but older than the one kept leaves the kept one; a level without a
    mark reads the fallback (the job's cursor), or the epoch without one."""
    watch = kernel.consolidation.watch
    now = datetime.now(UTC)
    await watch.set_event_marks({AccessLevel.AGENT: now})
    await watch.set_event_marks({AccessLevel.AGENT: now - timedelta(hours=1)})
    marks = await watch.event_marks(now - timedelta(days=1))
    assert marks[AccessLevel.AGENT] == now
    assert marks[AccessLevel.PUBLIC] == now - timedelta(days=1)
    assert (await watch.event_marks(None))[AccessLevel.USER] == datetime(1970, 1, 1, tzinfo=UTC)


async def test_an_event_check_looks_back_no_further_than_the_light_window(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A level never due keeps the epoch as its mark; the check still reads only the records
    of the light window (older topics are the scheduled passes'): three related records
    ingested a day and a half ago are no fresh topic, whatever the mark."""
    ids = [
        await write(kernel, episode(t, n, caller=WRITER), WRITER) for n, t in enumerate(TOPIC[:3])
    ]
    await kernel.events.settled()
    watch = engine_with(kernel, event_threshold=3).watch
    assert watch.event_horizon is not None
    due = await watch.event_due(None)
    assert due is not None
    assert due.levels == (AccessLevel.AGENT,)
    admin = await asyncpg.connect(database.admin_url)  # time moved back, as the owner
    try:
        await admin.execute(
            "UPDATE engram.memories SET ingestion_time = ingestion_time - interval '36 hours' "
            "WHERE record_id = ANY($1::uuid[])",
            ids,
        )
    finally:
        await admin.close()
    assert await watch.event_due(None) is None
