"""`engram worker` as the multi-kernel tests run it: the same :func:`run_worker`, on a clock the
test moves through a file, with two extra jobs.

Run as ``python -m tests.e2e.worker_proc`` from the repository root, with the ``ENGRAM_*``
settings of an external database in the environment and:

- ``WORKER_CLOCK_FILE``: a file holding one ISO 8601 UTC instant, the time every worker sees
  (the test rewrites it, atomically, to move time on);
- ``WORKER_SLOW_FLAG``: while this file exists, the ``slow`` job sleeps (in real time);
- ``WORKER_READY_DIR``: once its scheduler serves, the worker writes its holder name to
  ``<dir>/<pid>``.

The extra jobs, each due every hour: ``probe`` returns at once, ``slow`` waits for its flag file
to go away; both return ``{"pid": <this process>}``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engram.autonomy.schedule import Every
from engram.autonomy.scheduler import Job, JobContext, Scheduler
from engram.config import EngramSettings
from engram.kernel import Kernel
from engram.observability.logging import configure_logging
from engram.protocols.cli.jobs import run_worker

#: The ``slow`` job gives up waiting for its flag after this long (a safety net only).
SLOW_LIMIT_SECONDS = 300.0
HOURLY = Every(timedelta(hours=1))


class FileClock:
    """The instant written in a file (UTC); the last good reading while the file is being
    replaced or holds something unreadable."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._last = self._read() or datetime(1970, 1, 1, tzinfo=UTC)

    def _read(self) -> datetime | None:
        try:
            text = self._path.read_text(encoding="utf-8").strip()
            instant = datetime.fromisoformat(text)
        except (OSError, ValueError):
            return None
        if instant.tzinfo is None:
            return None
        return instant.astimezone(UTC)

    def __call__(self) -> datetime:
        instant = self._read()
        if instant is not None:
            self._last = instant
        return self._last


async def probe(context: JobContext) -> Mapping[str, Any]:
    """Returns at once with the pid that ran it."""
    del context
    return {"pid": os.getpid()}


def slow_job(flag: Path) -> Job:
    """``slow``: sleeps while ``flag`` exists."""

    async def run(context: JobContext) -> Mapping[str, Any]:
        del context
        for _ in range(int(SLOW_LIMIT_SECONDS / 0.05)):
            if not await asyncio.to_thread(flag.exists):
                break
            await asyncio.sleep(0.05)
        return {"pid": os.getpid()}

    return Job("slow", HOURLY, run, "sleeps while the test's flag file exists")


def extra_jobs(flag: Path) -> list[Job]:
    """The two jobs the tests add to the standard ones."""
    return [Job("probe", HOURLY, probe, "returns at once"), slow_job(flag)]


def main() -> None:
    """Run the worker until SIGTERM (see the module docstring)."""
    settings = EngramSettings()
    configure_logging(settings.log_level, settings.log_format)
    clock = FileClock(Path(os.environ["WORKER_CLOCK_FILE"]))
    ready_dir = Path(os.environ["WORKER_READY_DIR"])

    def started(kernel: Kernel, scheduler: Scheduler) -> None:
        del kernel
        mine = ready_dir / str(os.getpid())
        partial = mine.with_suffix(".tmp")
        partial.write_text(scheduler.holder, encoding="utf-8")
        partial.replace(mine)

    asyncio.run(
        run_worker(
            settings,
            clock=clock,
            extra_jobs=extra_jobs(Path(os.environ["WORKER_SLOW_FLAG"])),
            started=started,
        )
    )


if __name__ == "__main__":
    main()
