"""``engram worker`` and ``engram jobs list|run`` (ADR-019).

``engram worker`` is a kernel with no HTTP server: it runs the background jobs until it is
stopped (SIGTERM or Ctrl-C). Run as many as you like beside ``engram serve`` processes on one
database: each job runs on one of them at a time.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engram import __version__
from engram.config import EngramSettings
from engram.errors import EngramError
from engram.observability.logging import configure_logging
from engram.protocols.cli.output import (
    error_exit,
    existing_settings,
    fail,
    print_json,
    print_table,
    when,
    with_kernel,
)

if TYPE_CHECKING:
    from engram.autonomy.scheduler import Job, JobStatus, RunOutcome, Scheduler
    from engram.kernel import Kernel

app = typer.Typer(help="Background jobs: list them, run one now.", no_args_is_help=True)


async def run_worker(
    settings: EngramSettings,
    *,
    clock: Callable[[], datetime] | None = None,
    extra_jobs: Sequence[Job] = (),
    stop: asyncio.Event | None = None,
    started: Callable[[Kernel, Scheduler], None] | None = None,
) -> None:
    """Open a kernel and run its jobs until ``stop`` is set (or SIGTERM / SIGINT arrive).
    ``clock`` and ``extra_jobs`` are for tests that drive time themselves."""
    # The whole kernel and its jobs: the other admin commands do not import them.
    from engram.autonomy.scheduler import Scheduler  # noqa: PLC0415
    from engram.kernel import open_kernel  # noqa: PLC0415

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with open_kernel(settings=settings) as kernel:
        scheduler = kernel.scheduler
        if clock is not None or extra_jobs:
            scheduler = Scheduler(
                kernel.db,
                [*scheduler.jobs, *extra_jobs],
                metrics=kernel.metrics,
                settings=scheduler.settings,
                **({"clock": clock} if clock is not None else {}),
            )
        async with scheduler.serving():
            if started is not None:
                started(kernel, scheduler)
            await stop.wait()


def worker() -> None:
    """Run the background jobs without an HTTP server, until stopped."""
    settings = existing_settings()
    configure_logging(settings.log_level, settings.log_format)
    typer.echo(f"engram {__version__}: worker running the background jobs", err=True)
    try:
        asyncio.run(run_worker(settings))
    except EngramError as exc:
        raise error_exit(exc) from exc
    except KeyboardInterrupt:
        pass
    typer.echo("engram: worker stopped", err=True)


def _status_json(status: JobStatus) -> dict[str, Any]:
    state = status.state
    return {
        "name": status.name,
        "description": status.description,
        "schedule": status.schedule,
        "next_due": status.next_due,
        "running": bool(state and state.running),
        "holder": state.holder if state else None,
        "last_due": state.last_due if state else None,
        "last_started": state.started_at if state else None,
        "last_finished": state.finished_at if state else None,
        "last_outcome": state.outcome if state else None,
        "last_detail": state.detail if state else None,
        "last_duration_ms": state.duration_ms if state else None,
        "failures": state.failures if state else 0,
        "retry_at": state.retry_at if state else None,
        "runs": state.runs if state else 0,
    }


@app.command("list")
def jobs_list(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
) -> None:
    """Every job: schedule, last run and outcome, duration, next due time, holder."""

    async def work(kernel: Kernel) -> list[JobStatus]:
        return await kernel.scheduler.statuses()

    statuses = with_kernel(work, model=False)
    rows = [_status_json(status) for status in statuses]
    if as_json:
        for row in rows:
            print_json(row)
        return
    print_table(
        None,
        ["job", "schedule", "last run", "outcome", "ms", "next due", "holder", "detail"],
        [
            [
                row["name"],
                row["schedule"],
                when(row["last_started"]),
                "running" if row["running"] else row["last_outcome"] or "never run",
                "" if row["last_duration_ms"] is None else f"{row['last_duration_ms']:.0f}",
                when(row["next_due"]),
                row["holder"] or "",
                (row["last_detail"] or "")[:60],
            ]
            for row in rows
        ],
    )


@app.command("run")
def jobs_run(
    name: Annotated[str, typer.Argument(help="A job name from `engram jobs list`.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
) -> None:
    """Run one job now, whatever its schedule (refused while another kernel runs it)."""

    async def work(kernel: Kernel) -> RunOutcome:
        try:
            return await kernel.scheduler.run_now(name)
        finally:
            await kernel.scheduler.stop()

    outcome = with_kernel(work)
    if as_json:
        print_json(
            {
                "job": outcome.job,
                "outcome": outcome.outcome,
                "duration_ms": round(outcome.duration_ms, 1),
                "detail": dict(outcome.detail),
            }
        )
    else:
        detail = ", ".join(f"{key}={value}" for key, value in outcome.detail.items())
        typer.echo(f"{outcome.job}: {outcome.outcome} in {outcome.duration_ms:.0f} ms  {detail}")
    if outcome.outcome != "succeeded":
        raise fail(f"job {name} {outcome.outcome}", 1)
