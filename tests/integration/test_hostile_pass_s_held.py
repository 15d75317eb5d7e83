"""Hostile pass S: probes that held (the attack and what was checked), kept as regression
tests. Real embedded PostgreSQL, real migration processes killed with SIGKILL, no mocks."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import pytest

from engram import Kernel
from engram.infra import migrate
from engram.infra.embedded_server import EmbeddedPostgres
from tests.conftest import ScratchDatabase
from tests.e2e.conftest import close, start_serve
from tests.e2e.test_serve import _env, _free_port
from tests.integration.gate_helpers import escalate
from tests.integration.test_hostile_pass_b_held import _cli_on, killed_mid_burst
from tests.integration.test_hostile_pass_s import upgrading


async def test_admins_closing_one_escalation_at_once_close_it_once(kernel: Kernel) -> None:
    """Held. Eight admins acknowledge the same escalation at the same moment, each over a
    connection of its own: exactly one is told it closed it, and the row names that one."""
    await escalate(kernel, uuid.uuid4())
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
        run = await upgrading(url, stderr=asyncio.subprocess.DEVNULL)
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


@pytest.mark.slow
def test_sigkill_while_the_log_is_sealed_after_every_few_appends_keeps_a_verifiable_chain(
    tmp_path: Path, model_dir: Path
) -> None:
    """Held. `engram serve` sealing a checkpoint every two appends (so a seal is nearly
    always in flight) is SIGKILLed in a burst of writes. After a restart the log and its
    checkpoints verify, and a new seal after it chains to the ones sealed
    before the kill, and every acknowledged create is there."""
    env = _env(
        tmp_path / "data",
        model_dir,
        ENGRAM_PORT=str(_free_port()),
        ENGRAM_AUDIT_CHECKPOINT_EVERY="2",
        ENGRAM_SCHEDULER="false",
    )
    load, token = killed_mid_burst(env, 120)
    before = _cli_on(env, "audit", "verify", "--json")
    assert 0 == before.returncode, before.stdout + before.stderr[-800:]
    sealed_before = json.loads(before.stdout)["checkpoints_checked"]
    assert sealed_before >= 5, before.stdout  # the burst was sealed as it went
    again = start_serve(env)
    try:
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=again.base, headers=auth, timeout=10) as client:
            lost = [
                record_id
                for record_id, _ in load.created.values()
                if client.get(f"/v1/memories/{record_id}/versions").status_code != 200
            ]
            # One more append, so the seal below has something new to seal (the burst may
            # have spent the agent's bucket, which outlives the process: wait as told).
            for _ in range(20):
                made = client.post(
                    "/v1/memories", json={"type": "belief", "content": "After the crash drill."}
                )
                if made.status_code != 429:
                    break
                time.sleep(min(float(made.headers.get("retry-after", "1")), 3.0))
        assert [] == lost
        assert made.status_code == 201, made.text
        sealed = _cli_on(env, "audit", "checkpoint", "--json")
        assert 0 == sealed.returncode, sealed.stdout + sealed.stderr[-800:]
        after = _cli_on(env, "audit", "verify", "--json")
        assert 0 == after.returncode, after.stdout + after.stderr[-800:]
        report = json.loads(after.stdout)
        assert report["ok"]
        assert report["checkpoints_checked"] >= sealed_before + 1
        assert "Traceback" not in again.output()
    finally:
        close(again)
