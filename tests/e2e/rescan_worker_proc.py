"""`engram worker` with one more job, ``pii_rescan_codename``: the catalogue's PII rescan
(:class:`engram.autonomy.healing.PiiRescan`, with the kernel's Gate and consolidation release),
reading with a detector that also finds the project codename of the self-healing tests and
that calls itself the Gate's own detector version, as the real rescan does in production.

Run as ``python -m tests.e2e.rescan_worker_proc`` with the environment of
``tests/e2e/worker_proc.py`` (``WORKER_CLOCK_FILE``, ``WORKER_READY_DIR``; ``WORKER_SLOW_FLAG``
is not used). The job is due every hour on the file clock.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engram.autonomy.healing import PiiRescan, Screener
from engram.autonomy.scheduler import Job, JobContext, Scheduler
from engram.config import EngramSettings
from engram.kernel import Kernel
from engram.memory.gate import pii
from engram.observability.logging import configure_logging
from engram.protocols.cli.jobs import run_worker
from tests.e2e.worker_proc import HOURLY, FileClock
from tests.integration.test_self_healing import codename_screener

JOB = "pii_rescan_codename"


def same_version_screener() -> Screener:
    """The codename detector under the Gate's detector version: a version the rescan writes
    is then marked read by the Gate's own screening, as in production."""
    codename = codename_screener()
    return Screener(pii.DETECTOR_VERSION, codename.label, codename.kinds)


def main() -> None:
    """Run the worker until SIGTERM (see the module docstring)."""
    settings = EngramSettings()
    configure_logging(settings.log_level, settings.log_format)
    clock = FileClock(Path(os.environ["WORKER_CLOCK_FILE"]))
    ready_dir = Path(os.environ["WORKER_READY_DIR"])
    opened: list[Kernel] = []

    async def rescan(context: JobContext) -> Mapping[str, Any]:
        del context
        kernel = opened[0]
        job = PiiRescan(
            kernel.gate,
            kernel.db,
            kernel.metrics,
            screener=same_version_screener(),
            release=kernel.consolidation.release,
        )
        return (await job.run()).summary()

    def started(kernel: Kernel, scheduler: Scheduler) -> None:
        opened.append(kernel)
        mine = ready_dir / str(os.getpid())
        partial = mine.with_suffix(".tmp")
        partial.write_text(scheduler.holder, encoding="utf-8")
        partial.replace(mine)

    job = Job(JOB, HOURLY, rescan, "the PII rescan with the codename detector")
    asyncio.run(run_worker(settings, clock=clock, extra_jobs=[job], started=started))


if __name__ == "__main__":
    main()
