"""Hostile pass N, process level: an ``engram worker`` SIGKILLed while its event-driven pass
over two access levels commits batches. Nothing a writer was told is stored is lost, no
source is left consolidated without a live summary, and later checks of a restarted worker
consolidate both levels and leave neither due. Real processes, PostgreSQL and model."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import asyncpg
import pytest

from benchmarks.agent_text import texts
from engram import open_kernel
from engram.autonomy.schedule import Every
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.kernel import Kernel
from engram.memory.consolidation import ConsolidationTrigger
from engram.memory.types import AccessLevel, MemoryRecord, MemoryStatus, MemoryType
from tests.conftest import ScratchDatabase
from tests.e2e.test_workers import Workers, admin, job_rows, wait_until, workers
from tests.integration.gate_helpers import BOSS, WRITER, create
from tests.integration.race_helpers import broken_invariants

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
WATCH = timedelta(seconds=EngramSettings.model_construct().consolidation_watch_seconds)
#: The light and deep passes fall due on the hour (``Every`` an hour from the epoch; ``Daily``).
HOUR = Every(timedelta(hours=1))


def _clear_of_the_hour(now: datetime) -> datetime:
    """A due time of the watched jobs whose next ten checks cross no hour: run a few
    minutes before one, the test's clock passed it and the light pass (registered before the
    event job, so claimed first) consolidated the topics, and no event pass ran at all."""
    start = Every(WATCH).latest_due(now)
    hour = HOUR.next_due(start)
    return hour + WATCH if start + 10 * WATCH >= hour else start


@asynccontextmanager
async def settled(
    database: ScratchDatabase, embedder: FastembedEmbedder, stored: list[UUID]
) -> AsyncIterator[Kernel]:
    """A kernel opened on the database after the workers stopped, once the store's
    invariants hold and every record ``stored`` before the kill is still there, active or
    consolidated (nothing acknowledged was lost)."""
    settings = EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        consolidation_event_threshold=3,
    )
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        assert [] == await broken_invariants(kernel)
        for record_id in stored:
            head = await kernel.admin_temporal.current(record_id, count_read=False)
            assert head is not None
            assert head.status in (MemoryStatus.ACTIVE, MemoryStatus.CONSOLIDATED)
        yield kernel


async def _seed(database: ScratchDatabase, embedder: FastembedEmbedder) -> list[UUID]:
    """Agent-level episodes by the writer and sensitive ones by the trusted agent."""
    settings = EngramSettings(database_url=database.runtime_url, migrate_on_start=False)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    stored = []
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        for n, (text, caller, level) in enumerate(
            [(t, WRITER, AccessLevel.AGENT) for t in texts(160, 7)]
            + [(t, BOSS, AccessLevel.SENSITIVE) for t in texts(160, 8)]
        ):
            record = MemoryRecord.draft(
                MemoryType.EPISODE,
                text,
                source_agent=caller.agent_id,
                event_time=start + timedelta(hours=n),
                access_level=level,
            )
            result = await kernel.gate.evaluate(create(record, caller))
            assert result.record_id is not None, result.reason
            stored.append(result.record_id)
        await kernel.events.settled()
        due = await kernel.consolidation.watch.event_due(None)
        assert due is not None
        assert (AccessLevel.AGENT, AccessLevel.SENSITIVE) == due.levels
    return stored


async def _event_done(conn: asyncpg.Connection, due: datetime) -> bool:
    row = (await job_rows(conn)).get("consolidation_event")
    if row is None or row["last_due"] is None:
        return False
    return bool(row["last_due"] >= due and not row["running"])


async def _start(group: Workers, conn: asyncpg.Connection, at: datetime) -> None:
    group.set_clock(at)
    group.start(1)

    async def marked() -> bool:
        return bool(group.holders()) and await _event_done(conn, at - WATCH)

    await wait_until("the worker to serve", marked, group, within=120)


async def test_a_worker_killed_mid_event_pass_loses_nothing(
    tmp_path: Path, model_dir: Path, database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """SIGKILL after the event pass committed its first batches (five sources each): every
    stored record is still there, active or consolidated; no invariant of the store is
    broken; a restarted worker's next checks consolidate the rest, and then no level is due
    and no event-driven topic is left to plan."""
    stored = await _seed(database, embedder)
    start = _clear_of_the_hour(datetime.now(UTC))  # a due time of the watched jobs
    with workers(tmp_path, model_dir, database) as group:
        group.env.update(
            ENGRAM_CONSOLIDATION_BATCH_SIZE="5", ENGRAM_CONSOLIDATION_EVENT_THRESHOLD="3"
        )
        async with admin(database) as conn:
            await _start(group, conn, start)
            group.set_clock(start + WATCH)

            async def committing() -> bool:
                count = await conn.fetchval("SELECT count(*) FROM engram.consolidation_batches")
                return int(count) >= 2

            await wait_until("the event pass to commit batches", committing, group, within=120)
            [victim] = group.processes
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait(30)
            group.processes.clear()
            (group.ready_dir / str(victim.pid)).unlink()
            await _start(group, conn, start + 2 * WATCH)
            for step in range(3, 8):
                group.set_clock(start + step * WATCH)

                async def caught_up(step: int = step) -> bool:
                    return await _event_done(conn, start + step * WATCH)

                await wait_until("the event job to catch up", caught_up, group, within=150)
    async with settled(database, embedder, stored) as kernel:
        watch = kernel.consolidation.watch
        marks = await watch.event_marks(None)
        assert None is await watch.event_due(marks)
        planned = await kernel.consolidation.evaluate_candidates(ConsolidationTrigger.EVENT_DRIVEN)
        assert [] == [(c.access_level, len(c.sources)) for c in planned if len(c.sources) >= 3]
        runs = await kernel.db.fetch(
            "SELECT outcome FROM job_runs WHERE job = 'consolidation_event' ORDER BY started_at"
        )
        assert "abandoned" == runs[0]["outcome"]
