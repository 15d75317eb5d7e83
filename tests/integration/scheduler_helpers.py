"""What the scheduler tests share: a clock the test moves, schedulers stopped after the test
(``pytestmark = pytest.mark.usefixtures("schedulers")``), and the app lifespan runner."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from fastapi import FastAPI

from engram import Kernel
from engram.autonomy.scheduler import Job, Scheduler, SchedulerSettings

#: Schedulers made by :func:`scheduler`, stopped by the ``schedulers`` fixture (conftest).
MADE: list[Scheduler] = []


class Clock:
    """A UTC clock the test moves by hand (a scheduler's injected clock)."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def scheduler(kernel: Kernel, jobs: Sequence[Job], clock: Clock, **settings: Any) -> Scheduler:
    """A scheduler over ``kernel``'s database on ``clock``, stopped after the test."""
    settings.setdefault("stop_grace_seconds", 5.0)
    made = Scheduler(
        kernel.db,
        list(jobs),
        metrics=kernel.metrics,
        clock=clock,
        settings=SchedulerSettings(poll_seconds=0.05, **settings),
    )
    MADE.append(made)
    return made


async def stop_made() -> None:
    """Stop every scheduler a test made (its lock session released)."""
    while MADE:
        await MADE.pop().stop()


@contextlib.asynccontextmanager
async def running(app: FastAPI) -> AsyncIterator[None]:
    """Run the app's lifespan in a task of its own (its task groups must exit where they
    were entered), for as long as the block lasts."""
    started, stop = asyncio.Event(), asyncio.Event()

    async def lifespan() -> None:
        async with app.router.lifespan_context(app):
            started.set()
            await stop.wait()

    task = asyncio.create_task(lifespan())
    waiting = asyncio.create_task(started.wait())
    await asyncio.wait([task, waiting], return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        waiting.cancel()
        await task  # raises what the startup raised
    try:
        yield
    finally:
        stop.set()
        await task
