"""Hostile pass E: SIGKILL of a worker process in the middle of its background jobs.

The workers are real processes running the ``engram worker`` loop (``tests/e2e/worker_proc.py``
and ``tests/e2e/rescan_worker_proc.py``) on a clock the test moves through a file; the kill is
a real SIGKILL of the worker's process group, and the takeover is a second real worker.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import asyncpg
import pytest

from benchmarks.agent_text import texts
from engram import Kernel
from engram.autonomy.schedule import Daily
from engram.memory.types import AccessLevel, MemoryRecord, MemoryStatus, MemoryType
from tests.conftest import REPO, ScratchDatabase
from tests.e2e.rescan_worker_proc import JOB
from tests.e2e.test_serve import ENGRAM, _env
from tests.e2e.test_workers import HOURLY, START, STEPS, Workers, admin, wait_until, workers
from tests.integration.consolidation_helpers import DAY, DEEP, head_of
from tests.integration.gate_helpers import BOSS, belief
from tests.integration.test_self_healing import _seed_incident, write

pytestmark = pytest.mark.slow

#: Records citing the marked source: the rescan raises each of them after the source, so the
#: worker spends a while between the source's flag and the undoing of its summary.
CITING = 40
#: The standard jobs that would reach the seeded records first are not due on the test's steps:
#: the catalogue's own rescan (the same detector version) and the consolidation passes.
QUIET = {
    "ENGRAM_PII_RESCAN_MINUTES": "1440",
    "ENGRAM_CONSOLIDATION_HOUR": "12",
    "ENGRAM_CONSOLIDATION_LIGHT_MINUTES": "1440",
}


def start_rescan_worker(group: Workers) -> subprocess.Popen[bytes]:
    """One worker running ``tests.e2e.rescan_worker_proc`` (its own process group)."""
    log = (group.root / f"worker-{len(group.processes)}.log").open("wb")
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.rescan_worker_proc"],
            env=group.env,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        log.close()
    group.processes.append(process)
    return process


async def _served(group: Workers, pid: int) -> bool:
    return str(pid) in {path.name for path in group.ready_dir.iterdir()}


@pytest.mark.parametrize("fault", ["sigkill", "terminate"])
async def test_a_worker_killed_between_a_pii_flag_and_its_consequences_finishes_them_later(
    kernel: Kernel, tmp_path: Path, model_dir: Path, database: ScratchDatabase, fault: str
) -> None:
    """A consolidated source that an older detector passed is found by the rescan of a worker,
    which is SIGKILLed once the flag is written (while it raises the records citing the source,
    before it undoes the summary). A second worker takes the run over (attempt 2) and finishes
    it: every record derived from the source is sensitive, the summary is undone (forgotten,
    the clean sources active again, so their facts stay readable at their own level), the job
    is recorded as succeeded, and the audit chain and the state it rebuilds hold. The same
    holds when, instead, every runtime connection to the database is terminated at that moment
    (pg_terminate_backend) and the same worker retries the due time after its back-off."""
    ids, marked = await _seed_incident(kernel)
    consolidation = await kernel.consolidation.run(DEEP)
    [item] = [item for batch in consolidation.batches for item in batch.items]
    summary = item.record_id
    citing = [
        await write(
            kernel, belief(f"Alert {n} on the payment step.", evidence_links=[marked]), BOSS
        )
        for n in range(CITING)
    ]
    await kernel.events.settled()
    async with admin(database) as conn:
        # What an older detector version screened (the column is bookkeeping, not audited).
        await conn.execute(
            "UPDATE engram.memories SET screened_with = 'regex@0' WHERE record_id = ANY($1)", ids
        )
        with workers(tmp_path, model_dir, database) as group:
            group.env.update(QUIET)
            first = start_rescan_worker(group)
            await wait_until(
                "the first worker", lambda: _served(group, first.pid), group, within=120
            )

            async def marked_at_start() -> bool:
                last = await conn.fetchval("SELECT last_due FROM engram.jobs WHERE name = $1", JOB)
                return bool(last == HOURLY.latest_due(START))

            await wait_until("the job to be seen", marked_at_start, group)
            group.set_clock(STEPS[0])

            async def flagged() -> bool:
                return bool(
                    await conn.fetchval(
                        "SELECT count(*) FROM engram.memories "
                        "WHERE record_id = $1 AND access_level = 'sensitive'",
                        marked,
                    )
                )

            await wait_until("the rescan to flag the source", flagged, group, within=120)
            due = HOURLY.latest_due(STEPS[0])
            if fault == "terminate":
                await _terminate_runtime(conn)
                # past the first back-off (60 s), still the same hourly due time
                group.set_clock(STEPS[0] + timedelta(minutes=5))
                run = await wait_until("the retry", lambda: _settled(conn, due), group, within=180)
                assert "succeeded" == run["outcome"], dict(run)
                assert run["attempt"] >= 2
                await _assert_finished(kernel, ids, marked, summary, citing)
                return
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(10)
            raised = await _sensitive_count(conn, citing)
            undone = (await head_of(kernel, summary)).status is MemoryStatus.FORGOTTEN
            assert not undone, "the kill came too late: the summary was undone already"
            assert raised < CITING, "the kill came too late: every citing record was raised"

            second = start_rescan_worker(group)

            async def finished() -> asyncpg.Record | None:
                row: asyncpg.Record | None = await conn.fetchrow(
                    "SELECT attempt, outcome, detail FROM engram.job_runs "
                    "WHERE job = $1 AND due_at = $2 AND attempt = 2 AND outcome <> 'running'",
                    JOB,
                    due,
                )
                return row

            run = await wait_until(
                "the takeover to finish", finished, group, within=180, but=frozenset({first.pid})
            )
            assert "succeeded" == run["outcome"], dict(run)
            assert second.poll() is None
            state = await conn.fetchrow(
                "SELECT running, outcome FROM engram.jobs WHERE name = $1", JOB
            )
            assert (False, "succeeded") == (state["running"], state["outcome"])
    print(f"\nkilled with {raised} of {CITING} citing records raised")
    await _assert_finished(kernel, ids, marked, summary, citing)


async def _terminate_runtime(conn: asyncpg.Connection) -> None:
    """Terminate every connection of the runtime role to this database, a few times over
    (a pool reconnects in between)."""
    for _ in range(3):
        await conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND usename = 'engram_runtime'"
        )
        await asyncio.sleep(0.1)


async def _settled(conn: asyncpg.Connection, due: datetime) -> asyncpg.Record | None:
    """The latest run of the rescan for ``due`` once it succeeded."""
    row: asyncpg.Record | None = await conn.fetchrow(
        "SELECT attempt, outcome FROM engram.job_runs WHERE job = $1 AND due_at = $2 "
        "ORDER BY attempt DESC LIMIT 1",
        JOB,
        due,
    )
    return row if row is not None and row["outcome"] == "succeeded" else None


async def _assert_finished(
    kernel: Kernel, ids: list[UUID], marked: UUID, summary: UUID, citing: list[UUID]
) -> None:
    """The flag's consequences are all written and the audit log still rebuilds the store."""
    await kernel.events.settled()
    source = await head_of(kernel, marked)
    assert source.access_level is AccessLevel.SENSITIVE
    assert source.status is MemoryStatus.ACTIVE, "the flagged source stayed consolidated"
    assert (await head_of(kernel, summary)).status is MemoryStatus.FORGOTTEN
    for clean in (ids[0], ids[2]):
        head = await head_of(kernel, clean)
        assert (head.status, head.access_level) == (MemoryStatus.ACTIVE, AccessLevel.AGENT), clean
    for rid in citing:
        assert (await head_of(kernel, rid)).access_level is AccessLevel.SENSITIVE, rid
    assert (await kernel.audit.verify()).ok
    report = await kernel.audit_state.compare(datetime.now(UTC))
    assert report.ok, [d.to_json() for d in report.differences]


async def _sensitive_count(conn: asyncpg.Connection, ids: list[UUID]) -> int:
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM engram.memories "
            "WHERE record_id = ANY($1) AND superseded_by IS NULL AND access_level = 'sensitive'",
            ids,
        )
    )


# --- the worker's settings: durations no schedule can hold --------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ENGRAM_PII_RESCAN_MINUTES", "inf"),
        ("ENGRAM_REEMBED_MINUTES", "1e300"),
        ("ENGRAM_DECAY_REFRESH_MINUTES", "1e-12"),
        ("ENGRAM_CONSOLIDATION_WATCH_SECONDS", "1e-9"),
        ("ENGRAM_CONSOLIDATION_LIGHT_MINUTES", "Infinity"),
        ("ENGRAM_RETENTION_DAYS", "1e9"),
        ("ENGRAM_JOB_BACKOFF_SECONDS", "inf"),
        ("ENGRAM_SCHEDULER_POLL_SECONDS", "1e-9"),
    ],
)
def test_an_interval_no_schedule_can_hold_is_a_usage_error(
    tmp_path: Path, model_dir: Path, name: str, value: str
) -> None:
    """`engram worker` with an infinite, astronomically long or sub-microsecond duration
    setting exits 2 naming the setting, without a traceback (it opened the kernel and died
    in an OverflowError or a ValueError of the schedule)."""
    done = subprocess.run(  # noqa: S603 - our own CLI
        [*ENGRAM, "--init", "worker"],
        env=_env(tmp_path / "data", model_dir, **{name: value}),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert 2 == done.returncode, done.stderr[-1500:]
    assert "Traceback" not in done.stderr
    assert f"invalid configuration: {name.removeprefix('ENGRAM_').lower()}" in done.stderr


# --- a deep consolidation pass, its worker SIGKILLed after its first batches --------------

RECORDS = 300


async def test_a_worker_killed_mid_pass_has_its_pass_taken_over_and_finished(
    kernel: Kernel, tmp_path: Path, model_dir: Path, database: ScratchDatabase
) -> None:
    """The worker running the nightly pass (batches of 10 sources) is SIGKILLed after two
    batches committed; a second worker records the run as abandoned and runs the same due time
    again (attempt 2) to success. Then every batch is whole (its sources consolidated, its
    records live), no source is consolidated outside a batch, the fast path is consumed as a
    pass without the kill would leave it, and the audit chain and state hold."""
    for n, text in enumerate(texts(RECORDS, 7)):
        record = MemoryRecord.draft(
            MemoryType.EPISODE,
            text,
            source_agent=BOSS.agent_id,
            event_time=DAY + timedelta(hours=n),
        )
        await write(kernel, record, BOSS)
    await kernel.events.settled()
    due = Daily(3).latest_due(STEPS[0])
    async with admin(database) as conn:
        with workers(tmp_path, model_dir, database) as group:
            group.env.update(ENGRAM_CONSOLIDATION_BATCH_SIZE="10")
            group.start(1)
            first = group.processes[0]
            await wait_until(
                "the first worker", lambda: _served(group, first.pid), group, within=120
            )

            async def seen() -> bool:
                rows = await conn.fetch("SELECT last_due FROM engram.jobs")
                return len(rows) >= 10 and all(row["last_due"] is not None for row in rows)

            await wait_until("the jobs to be seen", seen, group)
            group.set_clock(STEPS[0])

            async def two_batches() -> bool:
                return 2 <= int(
                    await conn.fetchval("SELECT count(*) FROM engram.consolidation_batches")
                )

            await wait_until("two batches", two_batches, group, within=120)
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(10)
            running = await conn.fetchrow(
                "SELECT running, holder FROM engram.jobs WHERE name = 'consolidation_deep'"
            )
            assert running["running"], "the pass ended before the kill"

            group.start(1)

            async def finished() -> asyncpg.Record | None:
                row: asyncpg.Record | None = await conn.fetchrow(
                    "SELECT outcome FROM engram.job_runs WHERE job = 'consolidation_deep' "
                    "AND due_at = $1 AND attempt = 2 AND outcome <> 'running'",
                    due,
                )
                return row

            run = await wait_until(
                "the takeover", finished, group, within=300, but=frozenset({first.pid})
            )
            assert "succeeded" == run["outcome"]
            runs = await conn.fetch(
                "SELECT attempt, outcome FROM engram.job_runs "
                "WHERE job = 'consolidation_deep' ORDER BY attempt"
            )
            assert [(1, "abandoned"), (2, "succeeded")] == [tuple(r) for r in runs]
    await kernel.events.settled()
    in_batches = set()
    for batch in await kernel.consolidation.batches(limit=1000):
        for item in batch.items:
            made = await head_of(kernel, item.record_id)
            assert made.status is MemoryStatus.ACTIVE, item.record_id
            for source in item.sources:
                assert (await head_of(kernel, source)).status is MemoryStatus.CONSOLIDATED
                in_batches.add(source)
    consolidated = await kernel.db.fetch(
        "SELECT record_id FROM memories WHERE superseded_by IS NULL AND status = 'consolidated'"
    )
    assert {row["record_id"] for row in consolidated} == in_batches
    left = await kernel.db.fetchval(
        "SELECT count(*) FROM memories WHERE superseded_by IS NULL AND status = 'active' "
        "AND consolidation_path = 'fast' AND type = 'episode'"
    )
    assert left < RECORDS // 10  # singletons at most
    assert (await kernel.audit.verify()).ok
    state = await kernel.audit_state.compare(datetime.now(UTC))
    assert state.ok, [d.to_json() for d in state.differences]
