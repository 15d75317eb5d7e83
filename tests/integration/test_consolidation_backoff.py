"""A level whose consolidation batches fail, on the real database and model (ADR-019, second
amendment of 2026-11-29): a job's pass reports the failure instead of failing, the event and
pressure jobs leave that level out of their checks for a while (longer each time, until a
batch of it commits) while every other level goes on being consolidated, and each batch is
counted by level in ``engram_consolidation_batches_total``, the operator's signal. The
failures are real: a trigger makes every summary of one level fail to insert."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from engram import Kernel, open_kernel
from engram.autonomy.jobs import RunOutcome
from engram.autonomy.scheduler import Scheduler
from engram.config import EngramSettings
from engram.errors import DatabaseError
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.types import AccessLevel, MemoryStatus
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DEEP, INCIDENT, fail_summaries, head_of
from tests.integration.gate_helpers import WRITER
from tests.integration.pass_y_helpers import topics
from tests.integration.scheduler_helpers import Clock, scheduler
from tests.integration.test_consolidation_levels import THIRD
from tests.integration.test_triggers import TOPIC, episode, kernel_jobs, write

pytestmark = pytest.mark.usefixtures("schedulers")

AGENT, SENSITIVE = AccessLevel.AGENT, AccessLevel.SENSITIVE
#: The jobs' back-off (``ENGRAM_JOB_BACKOFF_SECONDS``), which a failing level's follows:
#: 45 s, then 90 s (the ceiling here). Checks come every 30 s.
BASE, CEILING = 45.0, 90.0


def _settings(database: ScratchDatabase, **more: Any) -> EngramSettings:
    return EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        retry_initial_wait_seconds=0.01,
        job_backoff_seconds=BASE,
        job_backoff_max_seconds=CEILING,
        **more,
    )


async def _check(runner: Scheduler, clock: Clock, seconds: float) -> RunOutcome | None:
    """Move the clock on and let the scheduler look: the run it started, if any."""
    clock.advance(seconds=seconds)
    if not await runner.tick():
        return None
    [outcome] = await runner.wait_idle()
    assert "error" not in outcome.detail, outcome.detail
    return outcome


async def _first_failure(runner: Scheduler, clock: Clock, every: float) -> None:
    """The job's first sighting (marked, not run), then its first run: it reads the
    sensitive level only, whose one batch fails, and succeeds all the same."""
    assert [] == await runner.tick()
    first = await _check(runner, clock, every)
    assert first is not None
    assert (first.outcome, first.detail["levels"], first.detail["failed_batches"]) == (
        "succeeded",
        ["sensitive"],
        1,
    )


async def _recovered(runner: Scheduler, clock: Clock, seconds: float) -> None:
    """The event job's check ``seconds`` on consolidates the sensitive topic, and the job
    itself never failed (no scheduler back-off of every level)."""
    last = await _check(runner, clock, seconds)
    assert last is not None
    assert (last.detail["levels"], last.detail["consumed"]) == (["sensitive"], 3)
    state = await runner.book.get("consolidation_event")
    assert state is not None
    assert (state.failures, state.retry_at) == (0, None)


def _batches(kernel: Kernel, trigger: str, level: AccessLevel, outcome: str) -> float:
    value = kernel.metrics.registry.get_sample_value(
        "engram_consolidation_batches_total",
        {"trigger": trigger, "access_level": level.value, "outcome": outcome},
    )
    assert value is not None
    return value


async def test_the_event_job_backs_a_failing_level_off_alone(
    kernel: Kernel, database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """Threshold three. Every sensitive summary fails. The event job's first pass reads the
    sensitive topic and fails it: the run succeeds, and the sensitive level is left out of
    the checks for 45 s, so the next check (30 s on) runs the writer's agent topic, grown
    meanwhile, alone. At 60 s the sensitive level is due again and fails again: it is left
    out for 90 s (the checks at +30 s and +60 s run nothing, where without the back-off
    each would run it), and once summaries insert again its topic is consolidated. No run
    failed, so the scheduler never backed the job (and every level with it) off."""
    settings = _settings(database, consolidation_event_threshold=3)
    async with open_kernel(settings=settings, embeddings=embedder) as small:
        mine = [
            await write(small, episode(t, n, caller=WRITER), WRITER)
            for n, t in enumerate(TOPIC[:2])
        ]
        hidden = [
            await write(small, episode(t, n + 2, access_level=SENSITIVE))
            for n, t in enumerate(TOPIC[2:])
        ]
        await small.events.settled()
        await fail_summaries(database.admin_url, SENSITIVE)
        clock = Clock(datetime.now(UTC))
        runner = scheduler(small, kernel_jobs(small, "consolidation_event"), clock)
        every = settings.consolidation_watch_seconds
        try:
            await _first_failure(runner, clock, every)
            mine.append(await write(small, episode(THIRD, 5, caller=WRITER), WRITER))
            await small.events.settled()
            second = await _check(runner, clock, every)  # the sensitive level is backed off
            assert second is not None
            assert (second.detail["levels"], second.detail["consumed"]) == (["agent"], 3)
            third = await _check(runner, clock, every)  # 60 s after the first failure
            assert third is not None
            assert (third.detail["levels"], third.detail["failed_batches"]) == (["sensitive"], 1)
            assert None is await _check(runner, clock, every)
            assert None is await _check(runner, clock, every)
            await fail_summaries(database.admin_url, SENSITIVE, fail=False)
            await _recovered(runner, clock, 2 * every)  # past the second back-off
        finally:
            await runner.stop()
        runs = await runner.book.runs("consolidation_event")
        assert {"succeeded"} == {run.outcome for run in runs}
        for record_id in mine + hidden:
            assert (await head_of(small, record_id)).status is MemoryStatus.CONSOLIDATED
        counted = [
            _batches(small, "event_driven", level, outcome)
            for level in (SENSITIVE, AGENT)
            for outcome in ("failed", "committed")
        ]
        assert [2, 1, 0, 1] == counted


async def test_the_pressure_job_backs_a_failing_level_off_alone(
    kernel: Kernel, database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """A fast-path limit of two. Every sensitive summary fails. The pressure job's pass over
    the sensitive level fails it; the writer's agent level then goes over the limit, and
    the next check relieves it alone while the sensitive level is backed off; 60 s after
    the failure the sensitive level is tried again."""
    settings = _settings(database, fast_path_limit=2)
    async with open_kernel(settings=settings, embeddings=embedder) as small:
        for n, text in enumerate(INCIDENT):
            await write(small, episode(text, n, access_level=SENSITIVE))
        await small.events.settled()
        await fail_summaries(database.admin_url, SENSITIVE)
        clock = Clock(datetime.now(UTC))
        runner = scheduler(small, kernel_jobs(small, "consolidation_pressure"), clock)
        every = settings.consolidation_watch_seconds
        try:
            await _first_failure(runner, clock, every)
            for n, text in enumerate(TOPIC[:3]):
                await write(small, episode(text, n, caller=WRITER), WRITER)
            await small.events.settled()
            second = await _check(runner, clock, every)
            assert second is not None
            assert (second.detail["levels"], second.detail["consumed"]) == (["agent"], 3)
            third = await _check(runner, clock, every)
            assert third is not None
            assert (third.detail["levels"], third.detail["failed_batches"]) == (["sensitive"], 1)
            assert None is await _check(runner, clock, every)
        finally:
            await runner.stop()
        assert [2, 0] == [
            _batches(small, "pressure_driven", SENSITIVE, outcome)
            for outcome in ("failed", "committed")
        ]


async def test_batches_are_counted_by_level_whoever_runs_the_pass(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Every agent summary fails; a sensitive topic commits. A job's pass (``raise_failed``
    false) reports the failure and counts one failed agent batch and one committed sensitive
    batch; an operator's pass over what is left (the agent topic) raises, as ``engram
    consolidate`` reports it, and counts its failed batch too. Nothing else is counted."""
    await topics(kernel, 1)
    await topics(kernel, 1, SENSITIVE, first=1)
    await fail_summaries(database.admin_url, AGENT)
    report = await kernel.consolidation.run(DEEP, raise_failed=False)
    assert (report.failed_levels, report.failed_batches, len(report.consumed)) == ((AGENT,), 1, 3)
    with pytest.raises(DatabaseError):
        await kernel.consolidation.run(DEEP)
    counted = {
        (level, outcome): _batches(kernel, "scheduled_deep", level, outcome)
        for level in AccessLevel
        for outcome in ("failed", "committed")
    }
    assert {(AGENT, "failed"): 2, (SENSITIVE, "committed"): 1} == {
        key: value for key, value in counted.items() if value
    }


async def _edges_readable(admin_url: str, *, after_a_batch: bool) -> None:
    """Once a consolidation batch has been recorded, take the runtime role's right to read
    ``memory_edges`` (``after_a_batch``), or give it back: a real error the adapter does not
    retry, raised by the next level's planning, which reads the edges between its records."""
    admin = await asyncpg.connect(admin_url)
    try:
        if not after_a_batch:
            await admin.execute(
                "DROP TRIGGER IF EXISTS edges_denied ON engram.consolidation_batches"
            )
            await admin.execute("GRANT SELECT ON engram.memory_edges TO engram_runtime")
            return
        await admin.execute(
            "CREATE OR REPLACE FUNCTION engram.deny_edges() RETURNS trigger LANGUAGE plpgsql "
            "SECURITY DEFINER AS $$ BEGIN "
            "REVOKE SELECT ON engram.memory_edges FROM engram_runtime; RETURN NULL; END $$"
        )
        await admin.execute(
            "CREATE TRIGGER edges_denied AFTER INSERT ON engram.consolidation_batches "
            "FOR EACH ROW EXECUTE FUNCTION engram.deny_edges()"
        )
    finally:
        await admin.close()


async def test_a_level_whose_planning_fails_is_backed_off_alone(
    kernel: Kernel, database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """Threshold three; an agent topic and a sensitive one are due. The agent level is
    planned and committed first; its batch takes the kernel's right to read the records'
    edges, so planning the sensitive level raises. The run succeeds all the same (it failed,
    and the scheduler backed the job and every level off, before ADR-019's amendment of
    2026-11-29, third): the sensitive level is reported failed, counted ``unplanned`` and left
    out of the checks for 45 s; once the edges are readable again, the check 60 s after
    the failure consolidates it."""
    settings = _settings(database, consolidation_event_threshold=3)
    async with open_kernel(settings=settings, embeddings=embedder) as small:
        mine = [
            await write(small, episode(t, n, caller=WRITER), WRITER)
            for n, t in enumerate([*TOPIC[:2], THIRD])
        ]
        hidden = [
            await write(small, episode(t, n + 3, access_level=SENSITIVE))
            for n, t in enumerate(TOPIC[2:])
        ]
        await small.events.settled()
        await _edges_readable(database.admin_url, after_a_batch=True)
        clock = Clock(datetime.now(UTC))
        runner = scheduler(small, kernel_jobs(small, "consolidation_event"), clock)
        every = settings.consolidation_watch_seconds
        try:
            assert [] == await runner.tick()  # first sighting: marked, not run
            first = await _check(runner, clock, every)
            assert first is not None
            assert (
                first.outcome,
                first.detail["levels"],
                first.detail["failed_levels"],
                first.detail["consumed"],
            ) == ("succeeded", ["agent", "sensitive"], ["sensitive"], 3)
            await _edges_readable(database.admin_url, after_a_batch=False)
            assert None is await _check(runner, clock, every)  # backed off for 45 s
            await _recovered(runner, clock, every)
        finally:
            await runner.stop()
            await _edges_readable(database.admin_url, after_a_batch=False)
        for record_id in mine + hidden:
            assert (await head_of(small, record_id)).status is MemoryStatus.CONSOLIDATED
        assert [1, 1, 1, 0] == [
            _batches(small, "event_driven", level, outcome)
            for level, outcome in (
                (AGENT, "committed"),
                (SENSITIVE, "unplanned"),
                (SENSITIVE, "committed"),
                (SENSITIVE, "failed"),
            )
        ]
