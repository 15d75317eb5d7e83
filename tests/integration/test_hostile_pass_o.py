"""Hostile pass O: the code of the last two sessions (consolidation marks per level, conflict
resolution against consumed records, the operations endpoints) under races and real faults.

Every test here failed on the code it was written against; what held is in
``test_hostile_pass_o_held.py``. Real embedded PostgreSQL, the real embedding model, no
mocks: a write is held inside its transaction by a real row lock another session holds."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg
import pytest

from engram import Kernel
from engram.memory.audit.entry import BATCH_LANE
from engram.memory.types import AccessLevel, MemoryStatus
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import engine_with, head_of
from tests.integration.gate_helpers import lock_waiters
from tests.integration.pass_n_helpers import checks, jobs_over
from tests.integration.scheduler_helpers import Clock
from tests.integration.test_triggers import TOPIC, UNRELATED, episode, write

pytestmark = pytest.mark.usefixtures("schedulers")


async def test_a_write_committing_after_an_event_pass_stays_fresh_for_its_level(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Threshold one. A write's transaction starts (its ``ingestion_time`` is that instant)
    and waits for a lane of the audit log; meanwhile the event job's pass consolidates the
    level's topic and moves the level's mark to the check's due time, which is after the
    write began. The write then commits: an active fast-path record the pass never saw,
    ingested before the mark. The event trigger must still count it (it is a topic of one,
    due); the mark had moved past it, so only the nightly passes would ever take it."""
    for n, text in enumerate(TOPIC[:3]):
        await write(kernel, episode(text, n))
    await kernel.events.settled()
    engine = engine_with(kernel, event_threshold=1)
    jobs = jobs_over(kernel, engine, "consolidation_event")
    admin = await asyncpg.connect(database.admin_url)
    try:
        held = admin.transaction()
        await held.start()
        await admin.execute(
            "SELECT 1 FROM engram.audit_chain_heads WHERE lane <> $1 FOR UPDATE", BATCH_LANE
        )
        late = asyncio.create_task(write(kernel, episode(UNRELATED[0], 7)))
        await lock_waiters(admin, 1)
        began = await admin.fetchval(
            "SELECT xact_start FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()"
        )
        # the scheduler's check comes after the write began (its due time too)
        clock = Clock(began + timedelta(seconds=1))
        started = await asyncio.wait_for(checks(kernel, jobs, 2, clock), 50)
        assert ["consolidation_event"] in started
        await held.rollback()
        record_id = await asyncio.wait_for(late, 20)
    finally:
        await admin.close()
    await kernel.events.settled()
    record = await head_of(kernel, record_id)
    assert MemoryStatus.ACTIVE is record.status
    marks = await engine.watch.event_marks(None)
    level = record.access_level
    assert record.ingestion_time > marks[level], (record.ingestion_time, marks[level])
    due = await engine.watch.event_due(marks)
    assert due is not None and level in due.levels
    assert AccessLevel(level) is level
