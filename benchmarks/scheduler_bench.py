"""The scheduler's cost and reach: idle overhead of three kernels, trigger-to-start latency,
and the write path with and without background jobs running.

Prints one JSON object. A private embedded PostgreSQL; ``--workers`` ``engram worker``
processes run on it (each a kernel with its scheduler and embedding model, no HTTP), and
this process opens a kernel of its own to write. Then:

- **idle**: CPU seconds the worker processes (and their model workers) use over
  ``--idle-seconds`` on an empty store (nothing for any job to do), as a percentage of one
  core, and the database's transactions per second meanwhile (from ``pg_stat_database``);
  the same for a control of as many kernels without a scheduler; the scheduler's own cost is
  the difference. The seeded records come after this;
- **trigger to start**: ``--triggers`` times, a new topic of five closely related records is
  written; the time from the commit of the fifth to the start of the ``consolidation_event``
  run that consolidates it (``engram.job_runs.started_at``), p50/p95. It is bounded by the
  watch interval (``--watch-seconds``) plus the poll interval (``--poll-seconds``). The
  scheduled light and deep passes are kept from falling due meanwhile (a pass on the hour
  would consolidate the topic before the event trigger saw it);
- **writes beside jobs**: ``--probe`` sequential governed writes (a trusted agent, in this
  process) while no scheduler runs, then the same number while the workers run jobs back to back
  (restarted polling every 0.5 s with ``decay_refresh``, ``pii_rescan`` and ``reembed`` due
  every 3 s and ``consolidation_light`` every 6 s over the ``--records`` seeded records, with
  a new PII detector version so the rescan reads every record); p50/p95/p99 of each, and how
  many job runs the workers made meanwhile.

    python -m benchmarks.scheduler_bench [--workers 3] [--idle-seconds 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import uvloop

from benchmarks.agent_text import texts
from benchmarks.harness import DATABASE, bulk_writer, report, runtime_settings, scratch_server
from benchmarks.stats import percentiles
from engram import open_kernel
from engram.config import EngramSettings
from engram.infra.embedded_server import EmbeddedPostgres
from engram.kernel import Kernel
from engram.memory.gate.requests import GateRequest
from engram.memory.types import GateAction, GateDecisionType, MemoryRecord, MemoryType

WRITER = bulk_writer("bench-writer")
TOPIC = [
    "Deploy {n} of the billing-api to eu-west failed at the migration step with a lock timeout.",
    "The billing-api deploy {n} to eu-west hit a lock timeout while running its migration.",
    "Billing-api release {n} in eu-west stopped: the schema migration timed out on a lock.",
    "Rolled back billing-api deploy {n} in eu-west after the migration lock timeout.",
    "Deploy {n} of billing-api (eu-west) retried after the migration lock timeout; it passed.",
]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children so far (from /proc)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for child in [pid, *_children(pid)]:
        try:
            fields = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _children(pid: int) -> list[int]:
    try:
        found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    kids = [int(p) for p in found]
    return kids + [grand for kid in kids for grand in _children(kid)]


async def _write(kernel: Kernel, content: str, *, namespace: str = "default") -> float:
    record = MemoryRecord.draft(
        MemoryType.EPISODE,
        content,
        source_agent=WRITER.agent_id,
        namespace=namespace,
        event_time=datetime.now(UTC),
    )
    started = time.perf_counter()
    await kernel.gate.evaluate(
        GateRequest(GateAction.CREATE, record, WRITER, GateDecisionType.EXTERNAL)
    )
    return (time.perf_counter() - started) * 1000


#: Job intervals (minutes) that keep the workers busy in the "jobs running" phase.
BUSY = {
    "ENGRAM_DECAY_REFRESH_MINUTES": "0.05",
    "ENGRAM_PII_RESCAN_MINUTES": "0.05",
    "ENGRAM_REEMBED_MINUTES": "0.05",
    "ENGRAM_CONSOLIDATION_LIGHT_MINUTES": "0.1",
}


def _no_scheduled_passes() -> dict[str, str]:
    """Settings that keep the scheduled consolidation passes from falling due while triggers
    are measured. A light pass due on the hour (the default) that runs beside a topic's writes
    consolidates the topic itself, and the event pass it should have started never comes.
    An interval twice the time since the epoch puts the light pass's last due instant at the
    epoch and its next decades away; the deep pass moves to the hour opposite the current one
    (the caller marks both as run now, so neither is due at start)."""
    now = datetime.now(UTC)
    since_epoch = now.timestamp() / 60
    return {
        "ENGRAM_CONSOLIDATION_LIGHT_MINUTES": f"{2 * since_epoch:.0f}",
        "ENGRAM_CONSOLIDATION_HOUR": str((now.hour + 12) % 24),
    }


async def _start_workers(
    server: EmbeddedPostgres,
    args: argparse.Namespace,
    *,
    plain: bool = False,
    extra: dict[str, str] | None = None,
) -> list[Any]:
    """``--workers`` kernel processes: ``engram worker`` (with its scheduler) or, ``plain``,
    kernels that only open and wait (the control of the idle measurement)."""
    env = {
        **os.environ,
        "ENGRAM_DATABASE_URL": server.url(user="engram_runtime", database=DATABASE),
        "ENGRAM_MIGRATE_ON_START": "false",
        "ENGRAM_LOG_LEVEL": "warning",
        "ENGRAM_LOG_FORMAT": "json",
        "ENGRAM_SCHEDULER_POLL_SECONDS": str(args.poll_seconds),
        "ENGRAM_CONSOLIDATION_WATCH_SECONDS": str(args.watch_seconds),
        "ENGRAM_CONSOLIDATION_EVENT_THRESHOLD": "5",
        **(extra or {}),
    }
    engram = Path(sys.executable).with_name("engram")
    command = (
        [sys.executable, "-m", "benchmarks.scheduler_bench", "--idle-kernel"]
        if plain
        else [str(engram), "worker"]
    )
    return [
        await asyncio.create_subprocess_exec(
            *command,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        for _ in range(args.workers)
    ]


async def _stop(workers: list[Any]) -> None:
    for worker in workers:
        if worker.returncode is None:
            worker.terminate()
    await asyncio.gather(*(w.wait() for w in workers))


async def _wait_registered(admin: asyncpg.Connection, jobs: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done = await admin.fetchval("SELECT count(*) FROM engram.jobs WHERE last_due IS NOT NULL")
        if done >= jobs:
            return
        await asyncio.sleep(0.5)
    raise RuntimeError("the workers did not register their jobs within 120 s")


async def _settle(admin: asyncpg.Connection, quiet: float = 20.0) -> None:
    """Wait until no job runs and none has started for ``quiet`` seconds (the first watch
    checks after start-up may run an event pass over the seeded records)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        busy = await admin.fetchval(
            "SELECT count(*) FROM engram.job_runs WHERE outcome = 'running' "
            "OR started_at > now() - make_interval(secs => $1)",
            quiet,
        )
        if not busy:
            return
        await asyncio.sleep(1.0)


async def _idle(admin: asyncpg.Connection, workers: list[Any], seconds: float) -> dict[str, Any]:
    await asyncio.sleep(5)  # let start-up settle
    statements = "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1"
    before_cpu = [_cpu_seconds(w.pid) for w in workers]
    before_tx = await admin.fetchval(statements, DATABASE)
    await asyncio.sleep(seconds)
    after_cpu = [_cpu_seconds(w.pid) for w in workers]
    after_tx = await admin.fetchval(statements, DATABASE)
    used = [a - b for a, b in zip(after_cpu, before_cpu, strict=True)]
    return {
        "seconds": seconds,
        "cpu_percent_of_one_core_per_kernel": [round(100 * u / seconds, 3) for u in used],
        "cpu_percent_total": round(100 * sum(used) / seconds, 3),
        # Includes this benchmark's own idle kernel (its read-count flush and pool).
        "database_transactions_per_second": round((after_tx - before_tx) / seconds, 2),
    }


async def _triggers(kernel: Kernel, admin: asyncpg.Connection, n: int) -> dict[str, Any]:
    delays: list[float] = []
    early = 0
    for round_no in range(n):
        namespace = f"trigger-{round_no}"
        # A run counts from the first write of its topic on: a watch check may see the topic
        # complete before this process reads the clock after the fifth write returns.
        began = datetime.now(UTC)
        for template in TOPIC:
            await _write(kernel, template.format(n=round_no), namespace=namespace)
        written = datetime.now(UTC)
        deadline = time.monotonic() + 120
        started = None
        while time.monotonic() < deadline and started is None:
            started = await admin.fetchval(
                "SELECT min(started_at) FROM engram.job_runs "
                "WHERE job = 'consolidation_event' AND started_at >= $1",
                began,
            )
            await asyncio.sleep(0.05)
        if started is None:
            raise RuntimeError(
                "no consolidation_event run within 120 s of a topic; event checks since: "
                + json.dumps(await _event_checks(admin, began))
            )
        early += started < written
        delays.append(max(0.0, (started - written).total_seconds() * 1000))
        await _wait_finished(admin)
    return {
        "trigger_to_start_ms": percentiles(delays),
        # runs whose start came before this process saw the fifth write return (counted as 0)
        "started_before_the_write_returned": early,
    }


async def _event_checks(admin: asyncpg.Connection, since: datetime) -> dict[str, Any]:
    """What the event trigger's job row and the runs since ``since`` say (for a failure)."""
    job = await admin.fetchrow(
        "SELECT last_due, cursor, running, outcome FROM engram.jobs "
        "WHERE name = 'consolidation_event'"
    )
    runs = await admin.fetch(
        "SELECT job, outcome, started_at, detail->>'because' AS because FROM engram.job_runs "
        "WHERE started_at >= $1 ORDER BY started_at",
        since,
    )
    return {
        "job": {k: str(v) for k, v in dict(job or {}).items()},
        "runs": [{k: str(v) for k, v in dict(row).items()} for row in runs],
    }


async def _wait_finished(admin: asyncpg.Connection) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if not await admin.fetchval("SELECT count(*) FROM engram.jobs WHERE running"):
            return
        await asyncio.sleep(0.1)


async def _probe(kernel: Kernel, n: int, rng: random.Random, corpus: list[str]) -> list[float]:
    return [await _write(kernel, rng.choice(corpus) + f" (probe {i})") for i in range(n)]


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    corpus = texts(args.records, args.seed)
    async with scratch_server("engram-scheduler-bench-") as server:
        admin = await asyncpg.connect(server.admin_url(DATABASE))
        settings = runtime_settings(server, db_pool_max_size=20)
        async with open_kernel(settings=settings) as kernel:
            # Idle overhead on an empty store (nothing for any job to do): the kernels with
            # their schedulers, then the same kernels without (the control).
            workers = await _start_workers(server, args)
            try:
                await _wait_registered(admin, len(kernel.scheduler.jobs))
                idle = await _idle(admin, workers, args.idle_seconds)
            finally:
                await _stop(workers)
            workers = await _start_workers(server, args, plain=True)
            try:
                await asyncio.sleep(args.start_seconds)
                control = await _idle(admin, workers, args.idle_seconds)
            finally:
                await _stop(workers)
            idle["without_scheduler"] = control
            idle["scheduler_cpu_percent_per_kernel"] = round(
                (idle["cpu_percent_total"] - control["cpu_percent_total"]) / args.workers, 3
            )
            for text in corpus:
                await _write(kernel, text)
            await kernel.events.settled(timeout_seconds=900)  # resolutions the seeding queued
            # Writes without background jobs: no scheduler runs anywhere.
            alone = await _probe(kernel, args.probe, rng, corpus)
            # None of them is due at start either: a new hour would make the deep pass due, and
            # the advisor's training, which runs at half past that hour.
            await admin.execute(
                "UPDATE engram.jobs SET last_due = now() "
                "WHERE name IN ('consolidation_light', 'consolidation_deep', 'advisor_train')"
            )
            workers = await _start_workers(server, args, extra=_no_scheduled_passes())
            try:
                await _wait_registered(admin, len(kernel.scheduler.jobs))
                await _settle(admin)
                triggers = await _triggers(kernel, admin, args.triggers)
                await _stop(workers)
                # Busy: every self-healing job and the light pass due every few seconds, and
                # a new detector version, so that pii_rescan reads every record again.
                await admin.execute("UPDATE engram.memories SET screened_with = 'regex@0'")
                await admin.execute("UPDATE engram.jobs SET last_due = NULL")
                fast = argparse.Namespace(**{**vars(args), "poll_seconds": 0.5})
                workers = await _start_workers(server, fast, extra=BUSY)
                await _wait_registered(admin, len(kernel.scheduler.jobs))
                await asyncio.sleep(args.busy_warmup)
                runs_before = await admin.fetchval("SELECT count(*) FROM engram.job_runs")
                beside = await _probe(kernel, args.probe, rng, corpus)
                jobs_ran = (
                    await admin.fetchval("SELECT count(*) FROM engram.job_runs") - runs_before
                )
                reasons = [
                    row["because"]
                    for row in await admin.fetch(
                        "SELECT detail->>'because' AS because FROM engram.job_runs "
                        "WHERE job = 'consolidation_event' ORDER BY id"
                    )
                ]
                outcomes = {
                    f"{row['job']}:{row['outcome']}": row["n"]
                    for row in await admin.fetch(
                        "SELECT job, outcome, count(*) AS n FROM engram.job_runs "
                        "GROUP BY job, outcome ORDER BY job, outcome"
                    )
                }
            finally:
                await _stop(workers)
                await admin.close()
    return {
        "benchmark": "scheduler_bench",
        "parameters": {
            "workers": args.workers,
            "records": args.records,
            "poll_seconds": args.poll_seconds,
            "watch_seconds": args.watch_seconds,
            "triggers": args.triggers,
            "probe_writes": args.probe,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        },
        "idle": idle,
        "triggers": triggers,
        "writes_ms": {
            "jobs_idle": percentiles(alone),
            "jobs_running": percentiles(beside),
            "jobs_run_meanwhile": jobs_ran,
        },
        "job_runs_in_all": outcomes,
        "event_runs_because": reasons,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--records", type=int, default=2000, help="records seeded first")
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--poll-seconds", type=float, default=5.0)
    parser.add_argument("--watch-seconds", type=float, default=5.0)
    parser.add_argument("--triggers", type=int, default=10)
    parser.add_argument("--probe", type=int, default=200)
    parser.add_argument("--busy-warmup", type=float, default=10.0)
    parser.add_argument("--start-seconds", type=float, default=15.0, help="kernel start-up")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--idle-kernel", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.idle_kernel:
        uvloop.run(_idle_kernel())
        return
    report(measure(args))


async def _idle_kernel() -> None:
    """The ``--idle-kernel`` mode: a kernel from the environment, no scheduler, until SIGTERM."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with open_kernel(settings=EngramSettings()):
        await stop.wait()


if __name__ == "__main__":
    main()
