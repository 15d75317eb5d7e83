"""Several kernel processes on one database (ADR-019): each job runs once per due time whichever
kernel claims it, a SIGKILLed holder's job is taken over by another kernel for the same due
time, and an agent's write rate is one budget however its writes are spread over servers.

The workers are real processes (``tests/e2e/worker_proc.py``: the ``engram worker`` loop) on a
clock the test moves through a file; the servers are ``engram serve`` processes. Nothing is
patched: PostgreSQL, the model and the processes are real.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import asyncpg
import httpx
import pytest

from benchmarks.agent_text import texts
from engram.autonomy.schedule import Daily, Every, Schedule
from engram.config import EngramSettings
from tests.conftest import REPO, ScratchDatabase
from tests.e2e.conftest import Served, close, start_serve
from tests.e2e.test_serve import ENGRAM, _env, _free_port

pytestmark = pytest.mark.slow
T = TypeVar("T")

WORKERS = 3
#: Where the shared clock starts: every job is seen for the first time there (only marked).
START = datetime(2026, 11, 25, 2, 30, tzinfo=UTC)
#: Steps that cross the deep pass (03:00), the hourly jobs, retention (04:30) and reembed.
STEPS = [
    datetime(2026, 11, 25, 3, 0, 5, tzinfo=UTC),
    datetime(2026, 11, 25, 4, 0, 5, tzinfo=UTC),
    datetime(2026, 11, 25, 4, 30, 5, tzinfo=UTC),
    datetime(2026, 11, 25, 5, 0, 5, tzinfo=UTC),
]
WATCHED = {"consolidation_event", "consolidation_pressure", "advisor_train_pressure"}
HOURLY = Every(timedelta(hours=1))


def schedules() -> dict[str, Schedule]:
    """Every job a worker registers, with its schedule under the default settings (the
    workers' environment sets none of those)."""
    settings = EngramSettings.model_construct()  # the defaults, whatever this environment says
    minutes = timedelta(minutes=1)
    watch = Every(timedelta(seconds=settings.consolidation_watch_seconds))
    return {
        "consolidation_deep": Daily(settings.consolidation_hour),
        "consolidation_light": Every(minutes * settings.consolidation_light_minutes),
        "consolidation_event": watch,
        "consolidation_pressure": watch,
        "reembed": Every(minutes * settings.reembed_minutes),
        "pii_rescan": Every(minutes * settings.pii_rescan_minutes),
        "decay_refresh": Every(minutes * settings.decay_refresh_minutes),
        "retention": Daily(4, 30),
        "advisor_train": Daily(settings.consolidation_hour, 30),
        "advisor_train_pressure": Every(minutes * 5),
        "probe": HOURLY,
        "slow": HOURLY,
    }


# --- worker processes ---------------------------------------------------------------------


@dataclass
class Workers:
    """Worker processes sharing one clock file, and where they log."""

    root: Path
    env: dict[str, str]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def clock(self) -> Path:
        return self.root / "clock"

    @property
    def flag(self) -> Path:
        return self.root / "slow.flag"

    @property
    def ready_dir(self) -> Path:
        return self.root / "ready"

    def set_clock(self, instant: datetime) -> None:
        partial = self.root / "clock.tmp"
        partial.write_text(instant.isoformat(), encoding="utf-8")
        partial.replace(self.clock)

    def start(self, count: int) -> None:
        for n in range(count):
            log = (self.root / f"worker-{n}.log").open("wb")
            try:
                self.processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "tests.e2e.worker_proc"],
                        env=self.env,
                        cwd=REPO,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # its group includes its model worker
                    )
                )
            finally:
                log.close()

    def holders(self) -> dict[int, str]:
        """pid -> holder of every worker whose scheduler serves."""
        return {
            int(path.name): path.read_text(encoding="utf-8")
            for path in self.ready_dir.iterdir()
            if path.suffix != ".tmp"
        }

    def assert_alive(self, *, but: frozenset[int] = frozenset()) -> None:
        for process in self.processes:
            if process.pid not in but:
                assert process.poll() is None, f"worker {process.pid} exited\n{self.logs()}"

    def logs(self, tail: int = 40) -> str:
        parts = []
        for path in sorted(self.root.glob("worker-*.log")):
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            parts.append(f"--- {path.name}\n" + "\n".join(lines[-tail:]))
        return "\n".join(parts)

    def stop(self) -> None:
        """SIGTERM every worker's group, then SIGKILL whatever is left after 15 s."""
        for process in self.processes:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for process in self.processes:
            with suppress(subprocess.TimeoutExpired):
                process.wait(max(0.1, deadline - time.monotonic()))
        for process in self.processes:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # the group: leftover model workers too
            if process.poll() is None:
                process.wait(10)


@contextmanager
def workers(tmp_path: Path, model_dir: Path, database: ScratchDatabase) -> Iterator[Workers]:
    """Three workers on the test's database, the clock at :data:`START`, the flag absent;
    stopped (and their groups killed) on the way out, before the database is dropped."""
    root = tmp_path / "workers"
    (root / "ready").mkdir(parents=True)
    env = _env(
        tmp_path / "engram-data",
        model_dir,
        ENGRAM_DATABASE_URL=database.runtime_url,
        ENGRAM_MIGRATE_ON_START="false",
        ENGRAM_SCHEDULER_POLL_SECONDS="0.2",
        ENGRAM_LOG_LEVEL="info",
        WORKER_CLOCK_FILE=str(root / "clock"),
        WORKER_SLOW_FLAG=str(root / "slow.flag"),
        WORKER_READY_DIR=str(root / "ready"),
    )
    group = Workers(root, env)
    group.set_clock(START)
    try:
        yield group
    finally:
        group.stop()


async def wait_until(
    what: str,
    check: Callable[[], Awaitable[T | None]],
    group: Workers,
    *,
    within: float = 60,
    but: frozenset[int] = frozenset(),
) -> T:
    """Poll ``await check()`` every 50 ms until it is truthy; fail after ``within`` seconds
    (or as soon as a worker dies that should not)."""
    deadline = time.monotonic() + within
    while True:
        found = await check()
        if found:
            return found
        group.assert_alive(but=but)
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n{group.logs()}"
        await asyncio.sleep(0.05)


@asynccontextmanager
async def admin(database: ScratchDatabase) -> AsyncIterator[asyncpg.Connection]:
    """A superuser connection to the test's database."""
    conn = await asyncpg.connect(database.admin_url)
    try:
        yield conn
    finally:
        await conn.close()


async def job_rows(conn: asyncpg.Connection) -> dict[str, asyncpg.Record]:
    """The rows of engram.jobs by name."""
    rows = await conn.fetch("SELECT name, last_due, running, holder, outcome FROM engram.jobs")
    return {row["name"]: row for row in rows}


async def start_workers(group: Workers, conn: asyncpg.Connection) -> dict[int, str]:
    """Start the workers; wait until all serve and every job is marked at :data:`START`."""
    group.start(WORKERS)
    expected = schedules()

    async def ready() -> dict[int, str] | None:
        holders = group.holders()
        if len(holders) < WORKERS:
            return None
        rows = await job_rows(conn)
        marked = all(
            name in rows and rows[name]["last_due"] == schedule.latest_due(START)
            for name, schedule in expected.items()
        )
        return holders if marked else None

    holders: dict[int, str] = await wait_until("the workers to start", ready, group, within=120)
    assert set(expected) == set(await job_rows(conn))
    return holders


# --- 1. once per due time -----------------------------------------------------------------


async def test_three_kernels_run_every_job_once_per_due_time(
    tmp_path: Path, model_dir: Path, database: ScratchDatabase
) -> None:
    """Three workers, the clock moved over four steps: every job that fell due ran exactly once
    per due time (one 'succeeded' attempt 1, whoever ran it); the watched jobs, whose condition
    never holds on an empty store, were checked at each step and never ran."""
    began = time.monotonic()
    expected = schedules()
    with workers(tmp_path, model_dir, database) as group:
        async with admin(database) as conn:
            holders = await start_workers(group, conn)
            started = time.monotonic()
            for step in STEPS:
                group.set_clock(step)

                async def caught_up(step: datetime = step) -> bool:
                    rows = await job_rows(conn)
                    return all(
                        rows[name]["last_due"] == schedule.latest_due(step)
                        and not rows[name]["running"]
                        for name, schedule in expected.items()
                    )

                await wait_until(f"every job due at {step:%H:%M:%S}", caught_up, group)
            stepped = time.monotonic() - started
            runs = await conn.fetch(
                "SELECT job, due_at, attempt, outcome, holder, manual, detail "
                "FROM engram.job_runs ORDER BY id"
            )
            group.assert_alive()

    # The schedules expected here are the catalogue's, as `engram jobs list` describes them.
    listed = await asyncio.to_thread(
        subprocess.run,
        [*ENGRAM, "jobs", "list", "--json"],
        env=group.env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert 0 == listed.returncode, listed.stderr.decode()
    described = {
        job["name"]: job["schedule"] for job in map(json.loads, listed.stdout.splitlines())
    }
    assert {name: expected[name].describe() for name in described} == described
    assert set(expected) - set(described) == {"probe", "slow"}

    by_job: dict[str, list[asyncpg.Record]] = {name: [] for name in expected}
    for run in runs:
        by_job[run["job"]].append(run)
    for name, schedule in expected.items():
        got = by_job[name]
        if name in WATCHED:
            assert [] == got, f"{name} ran although its condition never held"
            continue
        first = schedule.latest_due(START)
        wanted = {schedule.latest_due(step) for step in STEPS} - {first}
        assert wanted, name
        dues = [run["due_at"] for run in got]
        assert sorted(wanted) == sorted(dues), f"{name}: due times run {dues}"
        for run in got:
            assert (1, "succeeded", False) == (run["attempt"], run["outcome"], run["manual"]), (
                name,
                dict(run),
            )
            assert run["holder"] in holders.values(), run["holder"]
    probe_pids = {json.loads(run["detail"])["pid"] for run in by_job["probe"]}
    assert probe_pids <= set(holders)
    used = {run["holder"] for run in runs}
    print(
        f"\n{len(runs)} runs over {len(STEPS)} steps by {len(used)} of {WORKERS} holders "
        f"({', '.join(sorted(used))}); steps took {stepped:.1f} s, "
        f"test {time.monotonic() - began:.1f} s"
    )
    assert len(used) >= 1


# --- 2. takeover after SIGKILL ------------------------------------------------------------


async def test_killing_the_holder_lets_another_kernel_take_over(
    tmp_path: Path, model_dir: Path, database: ScratchDatabase
) -> None:
    """The worker running ``slow`` is SIGKILLed mid-run: its run is recorded as abandoned and
    another worker runs the same due time again (attempt 2) within seconds."""
    began = time.monotonic()
    step = STEPS[0]
    due = HOURLY.latest_due(step)
    with workers(tmp_path, model_dir, database) as group:
        group.flag.touch()
        async with admin(database) as conn:
            holders = await start_workers(group, conn)
            group.set_clock(step)

            async def running() -> str | None:
                row = (await job_rows(conn))["slow"]
                if row["running"] and row["last_due"] == due:
                    return str(row["holder"])
                return None

            holder = await wait_until("slow to start", running, group)
            victim = int(holder.rsplit(":", 2)[1])
            assert holders[victim] == holder
            os.kill(victim, signal.SIGKILL)
            killed = time.monotonic()
            group.flag.unlink()

            async def taken_over() -> asyncpg.Record | None:
                row: asyncpg.Record | None = await conn.fetchrow(
                    "SELECT holder, started_at FROM engram.job_runs "
                    "WHERE job = 'slow' AND due_at = $1 AND attempt = 2",
                    due,
                )
                return row

            await wait_until(
                "another kernel to take slow over", taken_over, group, but=frozenset({victim})
            )
            takeover = time.monotonic() - killed

            async def finished() -> list[asyncpg.Record] | None:
                rows: list[asyncpg.Record] = await conn.fetch(
                    "SELECT attempt, outcome, holder, due_at, detail FROM engram.job_runs "
                    "WHERE job = 'slow' ORDER BY attempt"
                )
                return rows if rows and rows[-1]["outcome"] != "running" else None

            slow = await wait_until(
                "the second attempt to end", finished, group, but=frozenset({victim})
            )
            state = (await job_rows(conn))["slow"]
            group.assert_alive(but=frozenset({victim}))

    assert [(1, "abandoned", holder, due)] == [
        (r["attempt"], r["outcome"], r["holder"], r["due_at"]) for r in slow[:1]
    ]
    assert 2 == len(slow), [dict(r) for r in slow]
    second = slow[1]
    assert (2, "succeeded", due) == (second["attempt"], second["outcome"], second["due_at"])
    assert second["holder"] != holder
    assert second["holder"] in holders.values()
    assert json.loads(second["detail"])["pid"] != victim
    assert (due, False, "succeeded") == (state["last_due"], state["running"], state["outcome"])
    print(
        f"\ntakeover {takeover:.2f} s after SIGKILL of {holder}; "
        f"test {time.monotonic() - began:.1f} s"
    )
    assert takeover < 30


# --- 3. one rate budget across servers ----------------------------------------------------

RATE = 30.0  # writes per minute: a burst of 6
BURST = 6
WRITES = 30


async def test_the_rate_limit_holds_across_kernel_processes(
    tmp_path: Path, model_dir: Path, database: ScratchDatabase
) -> None:
    """Three `engram serve` processes on one database, one agent limited to 30 writes a minute
    (burst 6): 30 writes spread round-robin over the three are accepted only as far as the one
    shared bucket allows (per-process buckets would take about 18), every server answers 429
    with Retry-After, and each refusal is audited as rejected."""
    began = time.monotonic()

    def env_for(n: int, **extra: str) -> dict[str, str]:
        return _env(
            tmp_path / f"engram-data-{n}",
            model_dir,
            ENGRAM_DATABASE_URL=database.runtime_url,
            ENGRAM_MIGRATE_ON_START="false",
            ENGRAM_SCHEDULER="false",
            **extra,
        )

    added = await asyncio.to_thread(
        subprocess.run,
        [
            *ENGRAM,
            "agents",
            "add",
            "limited",
            "--trust",
            "standard",
            "--writes-per-minute",
            str(RATE),
            "--json",
        ],
        env=env_for(0),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert 0 == added.returncode, added.stderr.decode()
    made = json.loads(added.stdout)
    token, agent_id = made["token"], made["agent"]["name"]  # the Gate's agent id

    servers: list[Served] = []
    try:
        envs = [env_for(n, ENGRAM_PORT=str(_free_port())) for n in range(3)]
        launched = await asyncio.gather(
            *(asyncio.to_thread(start_serve, env) for env in envs), return_exceptions=True
        )
        servers.extend(one for one in launched if isinstance(one, Served))
        for one in launched:
            if isinstance(one, BaseException):
                raise one
        async with httpx.AsyncClient(timeout=5) as probe:
            for server in servers:
                ready = await probe.get(f"{server.base}/readyz")
                assert 200 == ready.status_code, server.output()

        answers: list[tuple[int, int, str | None]] = []
        contents = texts(WRITES, 19)  # distinct records: no answer is a duplicate or conflict
        gate = asyncio.Semaphore(6)
        auth = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(headers=auth, timeout=30) as client:

            async def write(n: int) -> None:
                server = n % len(servers)
                body = {"type": "belief", "content": contents[n]}
                async with gate:
                    response = await client.post(f"{servers[server].base}/v1/memories", json=body)
                answers.append((server, response.status_code, response.headers.get("retry-after")))

            sent = time.monotonic()
            await asyncio.gather(*(write(n) for n in range(WRITES)))
            elapsed = time.monotonic() - sent
    finally:
        await asyncio.gather(*(asyncio.to_thread(close, server) for server in servers))

    accepted = [a for a in answers if a[1] == 201]
    limited = [a for a in answers if a[1] == 429]
    assert len(accepted) + len(limited) == WRITES, answers  # nothing else (no conflict)
    assert all(retry is not None and int(retry) >= 1 for _, _, retry in limited), limited
    bound = BURST + elapsed * RATE / 60 + 1
    assert len(accepted) <= bound, (len(accepted), elapsed)
    assert len({server for server, _, _ in limited}) > 1, limited

    async with admin(database) as conn:
        audited = await conn.fetch(
            "SELECT decision, action, reason FROM engram.librarian_audit WHERE agent_id = $1",
            agent_id,
        )
    counts: dict[str, int] = {}
    for row in audited:
        counts[row["decision"]] = counts.get(row["decision"], 0) + 1
        assert "CREATE" == row["action"], dict(row)
        if row["decision"] == "rejected":
            assert "writes per minute" in row["reason"], dict(row)
    assert len(limited) == counts.get("rejected", 0), counts
    assert len(accepted) == counts.get("approved", 0), counts
    print(
        f"\n{len(accepted)} accepted, {len(limited)} rate-limited of {WRITES} in {elapsed:.2f} s "
        f"(shared bound {bound:.1f}); 429s by server "
        f"{sorted({s: sum(1 for x in limited if x[0] == s) for s in range(3)}.items())}; "
        f"audit {counts}; test {time.monotonic() - began:.1f} s"
    )
