"""Hostile pass N: consolidation watched and read per access level, attacked with records the
caller may not read. Each test here failed on the code it was written against; see the
pass N notes in ADR-019. Real embedded PostgreSQL and the real embedding model, no mocks
(a clock that moves with the work stands in for planning time, see ``WorkClock``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engram import Kernel
from engram.memory.consolidation import ConsolidationTrigger
from engram.memory.consolidation.model import SkipReason
from engram.memory.types import AccessLevel, MemoryStatus
from tests.integration.consolidation_helpers import DEEP, INCIDENT, engine_with, head_of
from tests.integration.gate_helpers import WRITER
from tests.integration.pass_n_helpers import WorkClock, checks, jobs_over, reads
from tests.integration.scheduler_helpers import Clock
from tests.integration.test_triggers import TOPIC, UNRELATED, episode, write
from tests.integration.twin_helpers import Store, differences, twin_a, twin_b

__all__ = ["twin_a", "twin_b"]
pytestmark = pytest.mark.usefixtures("schedulers")

#: Sensitive notes unlike each other and unlike the writer's incident: topics of one.
NOTES = [f"{text} Reference note {n}." for n, text in enumerate(UNRELATED * 3)]
#: Accounts of the fifth TOPIC line closer to it than the other four TOPIC lines are.
ECHOES = [
    "Again the orders_daily ETL overran its morning deadline overnight, said the night shift.",
    "Again the orders_daily ETL overran its morning deadline overnight, per the pager log.",
    "Again the orders_daily ETL overran its morning deadline during the night.",
    "The orders_daily ETL again overran its morning deadline overnight.",
    "Overnight, again, the orders_daily ETL overran the morning deadline.",
    "Again overnight the orders_daily ETL job overran its morning deadline.",
    "Again the orders_daily ETL overran its deadline in the morning, overnight run.",
    "Again the orders_daily ETL run overran its morning deadline overnight.",
]


async def _deep_pass_out_of_time(kernel: Kernel, *, hidden: bool) -> list[Any]:
    """The writer's incident (three agent-level episodes), and in store B twelve sensitive
    notes of the trusted agent; a deep pass with time for two topics; the writer's reads."""
    mine = [
        await write(kernel, episode(t, n, caller=WRITER), WRITER) for n, t in enumerate(INCIDENT)
    ]
    if hidden:
        for n, text in enumerate(NOTES):
            await write(kernel, episode(text, 10 + n, access_level=AccessLevel.SENSITIVE))
    await kernel.events.settled()
    engine = engine_with(kernel, clock=WorkClock(), max_seconds=2.5)
    await engine.run(DEEP)
    return await reads(kernel, WRITER, mine, "checkout-api incident")


async def test_hidden_topics_do_not_use_up_the_time_of_a_callers_level(
    twin_a: Store, twin_b: Store
) -> None:
    """A deep pass plans every level before it commits any: in store B the time spent
    planning twelve sensitive topics ran the pass past its limit before the writer's
    incident (planned first, the agent level being more open) was committed, and the
    writer's three episodes stayed active while in store A they were merged."""
    a = await _deep_pass_out_of_time(twin_a.kernel, hidden=False)
    b = await _deep_pass_out_of_time(twin_b.kernel, hidden=True)
    assert ["consolidated"] * 3 == [status for status, _ in a[:3]]
    assert [] == differences([a], [b])


async def test_a_level_out_of_time_stays_due_for_the_event_trigger(kernel: Kernel) -> None:
    """Threshold three. The event job's pass over the writer's three related episodes runs
    out of time before it commits them; its level must stay due, so the next check (with
    time enough) consolidates them. The level's mark moved to the check's due time as if
    the pass had been done, and the topic waited for the nightly deep pass."""
    mine = [
        await write(kernel, episode(t, n, caller=WRITER), WRITER) for n, t in enumerate(TOPIC[:3])
    ]
    await kernel.events.settled()
    hurried = engine_with(kernel, clock=WorkClock(), max_seconds=0.5, event_threshold=3)
    clock = Clock(datetime.now(UTC))
    assert [[], ["consolidation_event"]] == await checks(
        kernel, jobs_over(kernel, hurried, "consolidation_event"), 2, clock
    )
    for record_id in mine:
        assert MemoryStatus.ACTIVE is (await head_of(kernel, record_id)).status
    patient = engine_with(kernel, event_threshold=3)
    assert [["consolidation_event"]] == await checks(
        kernel, jobs_over(kernel, patient, "consolidation_event"), 1, clock
    )
    for record_id in mine:
        assert MemoryStatus.CONSOLIDATED is (await head_of(kernel, record_id)).status


async def test_a_level_out_of_time_stays_due_for_the_pressure_trigger(kernel: Kernel) -> None:
    """Fast-path limit two. The pressure job's pass over the writer's three related episodes
    runs out of time; it consumed nothing, and the job took that for a level it cannot
    relieve and waited for the level to grow by a topic's worth before trying again."""
    mine = [
        await write(kernel, episode(t, n, caller=WRITER), WRITER) for n, t in enumerate(TOPIC[:3])
    ]
    await kernel.events.settled()
    work = WorkClock()
    hurried = engine_with(kernel, clock=work, max_seconds=0.5, fast_path_limit=2)
    jobs = jobs_over(kernel, hurried, "consolidation_pressure")
    clock = Clock(datetime.now(UTC))
    assert [[], ["consolidation_pressure"]] == await checks(kernel, jobs, 2, clock)
    for record_id in mine:
        assert MemoryStatus.ACTIVE is (await head_of(kernel, record_id)).status
    work.step = 0.0  # the same job, time enough now
    assert [["consolidation_pressure"]] == await checks(kernel, jobs, 1, clock)
    for record_id in mine:
        assert MemoryStatus.CONSOLIDATED is (await head_of(kernel, record_id)).status


async def _crowded(kernel: Kernel, *, hidden: bool) -> list[Any]:
    """The trusted agent writes five agent-level accounts of a late job (in store B after
    eight sensitive accounts closer to the fifth than the others are); the event job runs
    over three checks; the writer reads the five."""
    if hidden:
        for n, text in enumerate(ECHOES):
            await write(kernel, episode(text, 20 + n, access_level=AccessLevel.SENSITIVE))
    shared = [await write(kernel, episode(text, n)) for n, text in enumerate(TOPIC)]
    await kernel.events.settled()
    engine = engine_with(kernel, event_threshold=5)
    await checks(kernel, jobs_over(kernel, engine, "consolidation_event"), 3)
    return await reads(kernel, WRITER, shared, "orders_daily ETL late")


async def test_hidden_neighbours_do_not_take_the_places_of_a_records_own(
    twin_a: Store, twin_b: Store
) -> None:
    """The Gate links a new record to its eight nearest neighbours among every level its
    writer reads, then keeps those of the record's own level or below: in store B the
    trusted agent's sensitive accounts took all eight places, the fifth agent-level account
    got no relates_to edge and no routing, the agent level's topic never grew to five, and
    the writer read five active records where store A had consolidated them."""
    a = await _crowded(twin_a.kernel, hidden=False)
    b = await _crowded(twin_b.kernel, hidden=True)
    assert ["consolidated"] * 5 == [status for status, _ in a[:5]]
    assert [] == differences([a], [b])


async def test_a_triggered_pass_commits_a_callers_level_before_planning_a_hidden_one(
    kernel: Kernel,
) -> None:
    """Through the event trigger: the agent level and the sensitive level are both due; with
    the clock moving per topic, the agent level's topic is committed before the sensitive
    level's twelve notes and six accounts are planned, and its mark moves; the sensitive
    level runs out of time while planning (what it planned in time is committed, ADR-019's
    amendment of 2026-11-29) and stays unfinished."""
    mine = [
        await write(kernel, episode(t, n, caller=WRITER), WRITER) for n, t in enumerate(TOPIC[:3])
    ]
    for n, text in enumerate(NOTES + ECHOES[:6]):
        await write(kernel, episode(text, 10 + n, access_level=AccessLevel.SENSITIVE))
    await kernel.events.settled()
    engine = engine_with(kernel, clock=WorkClock(), max_seconds=6.0, event_threshold=3)
    due = await engine.watch.event_due(None)
    assert due is not None
    assert (AccessLevel.AGENT, AccessLevel.SENSITIVE) == due.levels
    report = await engine.run(ConsolidationTrigger.EVENT_DRIVEN, levels=due.levels)
    assert set(mine) <= set(report.consumed)
    for record_id in set(report.consumed) - set(mine):
        assert AccessLevel.SENSITIVE is (await head_of(kernel, record_id)).access_level
    assert SkipReason.TIMED_OUT.value in report.skipped
    assert (AccessLevel.SENSITIVE,) == report.unfinished_levels
