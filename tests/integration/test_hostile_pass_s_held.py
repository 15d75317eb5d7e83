"""Hostile pass S: probes that held (the attack and what was checked), kept as regression
tests. Real embedded PostgreSQL, real migration processes killed with SIGKILL, no mocks."""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid

import asyncpg

from engram import Kernel
from engram.infra import migrate
from engram.infra.embedded_server import EmbeddedPostgres
from engram.infra.events import Event
from tests.conftest import ScratchDatabase


async def test_admins_closing_one_escalation_at_once_close_it_once(kernel: Kernel) -> None:
    """Held. Eight admins acknowledge the same escalation at the same moment, each over a
    connection of its own: exactly one is told it closed it, and the row names that one."""
    await kernel.notifications.handle(
        Event(
            name="memory.conflict_detected",
            aggregate_id=uuid.uuid4(),
            payload={"decision_id": str(uuid.uuid4()), "classification": "unresolvable"},
        )
    )
    (row,) = await kernel.admin_queue.pending()
    names = [f"admin-{n}" for n in range(8)]
    answers = await asyncio.gather(
        *(kernel.admin_queue.acknowledge(row["id"], by=name) for name in names)
    )
    assert 1 == sum(answers)
    winner = names[answers.index(True)]
    closed = await kernel.db.fetchrow(
        "SELECT acknowledged_by FROM escalations WHERE id = $1", row["id"]
    )
    assert closed is not None
    assert winner == closed["acknowledged_by"]
    assert [] == await kernel.admin_queue.pending()


_UPGRADE = "import sys; from engram.infra import migrate; migrate.upgrade(sys.argv[1])"
_WAITING = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
    "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND query ILIKE '%memory_feedback%'"
)
_OTHERS = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
)
_HAS_COLUMN = (
    "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'engram' "
    "AND table_name = 'outbox' AND column_name = 'next_attempt_at'"
)


async def _poll(conn: asyncpg.Connection, query: str, *args: object) -> object:
    """The first non-empty answer of ``query`` within 60 s."""
    for _ in range(600):
        value = await conn.fetchval(query, *args)
        if value:
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"no answer from {query}")


async def test_a_migration_killed_midway_leaves_the_older_schema_whole_and_resumes(
    pg_server: EmbeddedPostgres, empty_database: ScratchDatabase
) -> None:
    """Held. A database at revision 0015 is migrated to head; the process is SIGKILLed after
    0016 altered the outbox, while 0017 waits for the feedback table (another session holds
    it). Nothing of 0016 stays (the run is one transaction), the revision is still 0015, and
    the next run reaches head with 0016's column."""
    url = pg_server.admin_url(empty_database.name)
    await asyncio.to_thread(migrate.upgrade, url, "0015")
    holder = await asyncpg.connect(url)
    watcher = await asyncpg.connect(url)
    try:
        hold = holder.transaction()
        await hold.start()
        await holder.execute("LOCK TABLE engram.memory_feedback IN ACCESS EXCLUSIVE MODE")
        run = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _UPGRADE,
            url,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await _poll(watcher, _WAITING)
        run.send_signal(signal.SIGKILL)
        assert -signal.SIGKILL == await asyncio.wait_for(run.wait(), timeout=30)
        await hold.rollback()
        await holder.close()
        # The killed run's backend ends once it finds its client gone.
        for _ in range(300):
            if await watcher.fetchval(_OTHERS) == 0:
                break
            await asyncio.sleep(0.1)
        assert 0 == await watcher.fetchval(_OTHERS)
        assert "0015" == await watcher.fetchval("SELECT version_num FROM public.alembic_version")
        assert 0 == await watcher.fetchval(_HAS_COLUMN)
        await asyncio.to_thread(migrate.upgrade, url)
        version = await watcher.fetchval("SELECT version_num FROM public.alembic_version")
        assert migrate.head_revision() == version
        assert 1 == await watcher.fetchval(_HAS_COLUMN)
    finally:
        if not holder.is_closed():
            await holder.close()
        await watcher.close()
