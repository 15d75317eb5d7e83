"""Hostile pass Q: the newest code (the learned query adapter in search, the undoing of a
resolution on a change of level, feedback) under hostile input, races and real faults.

Every test here failed on the code it was written against; what held is in
``test_hostile_pass_q_held.py``. Real embedded PostgreSQL, the real embedding model, no
mocks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from engram import Kernel, open_kernel
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.types import MemoryStatus
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import head_of
from tests.integration.gate_helpers import INTERN, WRITER, belief, create
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
