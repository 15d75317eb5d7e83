"""Hostile pass O, process level: two ``engram worker`` processes on one database, the one
running the event-driven pass over two access levels SIGKILLed mid-pass. The other takes
the job over; no level's mark ever moves back, nothing stored is lost, no source is left
consolidated without a live summary, and both levels end consolidated and not due. Real
processes, PostgreSQL and model."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from engram.infra.fastembed_embedder import FastembedEmbedder
from tests.conftest import ScratchDatabase
from tests.e2e.test_hostile_pass_n_crash import (
    WATCH,
    _clear_of_the_hour,
    _event_done,
    _seed,
    settled,
)
from tests.e2e.test_workers import admin, job_rows, wait_until, workers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


class Marks:
    """Every reading of ``consolidation_marks``, and each time one moved back."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.last: dict[str, datetime] = {}
        self.back: list[str] = []

    async def read(self) -> None:
        rows = await self.conn.fetch(
            "SELECT access_level, passed_at FROM engram.consolidation_marks"
        )
        for row in rows:
            level, at = row["access_level"], row["passed_at"]
            if level in self.last and at < self.last[level]:
                self.back.append(f"{level}: {self.last[level]} -> {at}")
            self.last[level] = max(at, self.last.get(level, at))


async def test_two_workers_one_killed_mid_event_pass_the_other_takes_over(
    tmp_path: Path, model_dir: Path, database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """Two workers serve; at the next due time one of them runs the event pass (batches of
    five) and is SIGKILLed once two batches committed. The survivor's later checks finish
    the job: every stored record is active or consolidated, the store's invariants hold, no
    level is due, and no mark read while it all ran ever moved back."""
    stored = await _seed(database, embedder)
    start = _clear_of_the_hour(datetime.now(UTC))
    with workers(tmp_path, model_dir, database) as group:
        group.env.update(
            ENGRAM_CONSOLIDATION_BATCH_SIZE="5", ENGRAM_CONSOLIDATION_EVENT_THRESHOLD="3"
        )
        async with admin(database) as conn:
            marks = Marks(conn)
            group.set_clock(start)
            group.start(2)

            async def serving() -> bool:
                await marks.read()
                return len(group.holders()) == 2 and await _event_done(conn, start - WATCH)

            await wait_until("both workers to serve", serving, group, within=180)
            group.set_clock(start + WATCH)

            async def committing() -> bool:
                await marks.read()
                count = await conn.fetchval("SELECT count(*) FROM engram.consolidation_batches")
                return int(count) >= 2

            await wait_until("the event pass to commit batches", committing, group, within=120)
            holder = (await job_rows(conn))["consolidation_event"]["holder"]
            [victim] = [p for p in group.processes if group.holders().get(p.pid) == holder]
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait(30)
            group.processes.remove(victim)
            (group.ready_dir / str(victim.pid)).unlink()
            for step in range(2, 7):
                group.set_clock(start + step * WATCH)

                async def caught_up(step: int = step) -> bool:
                    await marks.read()
                    return await _event_done(conn, start + step * WATCH)

                await wait_until("the survivor to run the event job", caught_up, group, within=150)
    assert [] == marks.back
    async with settled(database, embedder, stored) as kernel:
        watch = kernel.consolidation.watch
        assert None is await watch.event_due(await watch.event_marks(None))
