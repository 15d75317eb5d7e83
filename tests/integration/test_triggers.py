"""The consolidation triggers on the real database and model: the relates_to edges writes
leave between close neighbours, the event and pressure conditions the watch reads from them,
and the consolidation jobs the scheduler runs on those conditions (ADR-019)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg
import pytest

from engram import Kernel, open_kernel
from engram.autonomy.schedule import Every
from engram.autonomy.scheduler import Job, JobContext, Scheduler, SchedulerSettings
from engram.config import EngramSettings
from engram.errors import JobBusy
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.consolidation import ConsolidationTrigger
from engram.memory.consolidation.watch import ConsolidationWatch, largest_group
from engram.memory.gate.requests import WriteOutcome
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateDecision,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
)
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DAY, INCIDENT, head_of
from tests.integration.gate_helpers import BOSS, WRITER, create
from tests.integration.scheduler_helpers import Clock, scheduler

#: One observation told five ways (one topic). No values differ between them, so Layer 2 finds
#: no conflict to resolve among them (a resolution would write new versions meanwhile).
TOPIC = [
    "The nightly orders_daily ETL finished late again, well past its deadline.",
    "orders_daily ETL was late again this morning and only finished after the deadline.",
    "Once more the nightly orders_daily ETL missed its deadline.",
    "The orders_daily nightly ETL ran late again today.",
    "Again the orders_daily ETL overran its morning deadline overnight.",
]
UNRELATED = [
    "Booked a table for six at Osteria Lupo for Friday at 19:30 for the team dinner.",
    "The third-floor printer was replaced with a colour laser model on Tuesday.",
    "Marta gave a lightning talk about sourdough starters at the Thursday social.",
    "The parking garage gate code changes at the start of every quarter.",
]


def episode(content: str, n: int = 0, caller: CallerIdentity = BOSS, **fields: Any) -> MemoryRecord:
    """An episode proposal by ``caller``."""
    return MemoryRecord.draft(
        MemoryType.EPISODE,
        content,
        source_agent=caller.agent_id,
        event_time=DAY + timedelta(hours=n),
        **fields,
    )


async def write(kernel: Kernel, record: MemoryRecord, caller: CallerIdentity = BOSS) -> UUID:
    """Write ``record`` as ``caller``; it must be created."""
    result = await kernel.gate.evaluate(create(record, caller))
    assert (result.decision, result.outcome) == (GateDecision.APPROVED, WriteOutcome.CREATED), (
        result.reason
    )
    assert result.record_id is not None
    return result.record_id


async def seed(kernel: Kernel, texts: Sequence[str], **fields: Any) -> list[UUID]:
    """Write each text as an episode by the trusted agent; their ids."""
    return [await write(kernel, episode(text, n, **fields)) for n, text in enumerate(texts)]


async def related_edges(database: ScratchDatabase) -> list[tuple[UUID, UUID, float]]:
    """Every relates_to edge, as (source record, target record, weight), read as the admin."""
    admin = await asyncpg.connect(database.admin_url)
    try:
        rows = await admin.fetch(
            "SELECT s.record_id AS a, t.record_id AS b, e.weight "
            "FROM engram.memory_edges e "
            "JOIN engram.memories s ON s.id = e.source_id "
            "JOIN engram.memories t ON t.id = e.target_id "
            "WHERE e.kind = 'relates_to'"
        )
    finally:
        await admin.close()
    return [(r["a"], r["b"], float(r["weight"])) for r in rows]


def touching(edges: list[tuple[UUID, UUID, float]], record_id: UUID) -> list[UUID]:
    """The records an edge joins to ``record_id``."""
    return [b if a == record_id else a for a, b, _ in edges if record_id in (a, b)]


pytestmark = pytest.mark.usefixtures("schedulers")


def kernel_jobs(kernel: Kernel, *names: str) -> list[Job]:
    """The kernel's own jobs of those names."""
    jobs = [job for job in kernel.scheduler.jobs if job.name in names]
    assert sorted(job.name for job in jobs) == sorted(names)
    return jobs


async def job_cursor(kernel: Kernel, name: str) -> datetime | None:
    """The cursor stored for job ``name``."""
    value = await kernel.db.fetchval("SELECT cursor FROM jobs WHERE name = $1", name)
    assert value is None or isinstance(value, datetime)
    return value


# --- relates_to edges ---------------------------------------------------------------------------


async def test_close_neighbours_are_linked_and_nothing_else(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Five paraphrases of one observation end up one connected group of relates_to edges
    (weight = similarity >= 0.70, from the newer record to the older); unrelated records and
    a paraphrase in another namespace get no edge at all."""
    topic = await seed(kernel, TOPIC)
    others = await seed(kernel, UNRELATED)
    elsewhere = await write(kernel, episode(TOPIC[0], namespace="ops"))

    edges = await related_edges(database)

    # every pair of the five is close (>= 0.70): ten edges, each from the newer to the older
    order = {record_id: n for n, record_id in enumerate(topic)}
    assert sorted((order[a], order[b]) for a, b, _ in edges) == [
        (i, j) for i in range(len(topic)) for j in range(i)
    ]
    assert largest_group([(a, b) for a, b, _ in edges]) == len(topic)
    for record_id in (*others, elsewhere):
        assert [] == touching(edges, record_id)
    # weight = the cosine similarity of the two texts, as the model says
    vectors = await kernel.embeddings.embed_batch(TOPIC)
    for a, b, weight in edges:
        cosine = sum(x * y for x, y in zip(vectors[order[a]], vectors[order[b]], strict=True))
        assert 0.70 <= weight == pytest.approx(cosine, abs=1e-3)


async def test_a_record_the_writer_may_not_read_is_never_linked(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A trusted agent's sensitive record with the very same text is absent for a standard
    writer: its write is a new record (no NOOP onto the hidden one), no edge joins the two,
    and nothing the writer gets back names the hidden record."""
    text = TOPIC[0]
    hidden = await write(kernel, episode(text, access_level=AccessLevel.SENSITIVE), BOSS)
    result = await kernel.gate.evaluate(create(episode(text, caller=WRITER), WRITER))
    assert (result.decision, result.outcome) == (GateDecision.APPROVED, WriteOutcome.CREATED)
    assert result.record_id is not None
    assert result.record_id != hidden
    mine = result.record_id
    paraphrase = await write(kernel, episode(TOPIC[1], 1, caller=WRITER), WRITER)

    edges = await related_edges(database)

    assert [] == touching(edges, hidden)
    assert [mine] == touching(edges, paraphrase)
    assert str(hidden) not in repr(result)
    hidden_rows = await kernel.db.fetch(
        "SELECT version, repetitions FROM memories WHERE record_id = $1", hidden
    )
    assert [(1, 1)] == [
        (r["version"], r["repetitions"]) for r in hidden_rows
    ]  # neither reinforced nor changed
    # nor does it count for the writer's topic
    watch = ConsolidationWatch(
        kernel.db, event_threshold=3, fast_path_limit=100, decay_threshold=0.5
    )
    assert await watch.event(None) is None


# --- the event trigger --------------------------------------------------------------------------


async def test_a_grown_topic_triggers_one_event_driven_pass(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Two related records are no topic yet; five are. The 'consolidation_event' job, driven
    by the scheduler, runs an event-driven pass that consolidates them; its cursor moves past
    them, so the next check finds nothing and runs nothing."""
    watch = kernel.consolidation.watch
    assert watch.event_threshold == 5
    topic = await seed(kernel, TOPIC[:2])
    await seed(kernel, UNRELATED[:1])
    assert len(await related_edges(database)) == 1
    assert await watch.event(None) is None
    topic += [await write(kernel, episode(t, n + 2)) for n, t in enumerate(TOPIC[2:])]
    reason = await watch.event(None)
    assert reason == "a topic of 5 related records grew since the last pass"
    await kernel.events.settled()  # conflict resolutions among them are done before the pass

    clock = Clock(datetime.now(UTC))
    runner = scheduler(kernel, kernel_jobs(kernel, "consolidation_event"), clock)
    assert [] == await runner.tick()  # first sighting: marked, not run
    assert [] == await kernel.consolidation.batches()
    clock.advance(seconds=kernel.settings.consolidation_watch_seconds)
    assert ["consolidation_event"] == await runner.tick()
    [outcome] = await runner.wait_idle()

    assert (outcome.outcome, outcome.detail["batches"], outcome.detail["consumed"]) == (
        "succeeded",
        1,
        5,
    )
    [batch] = await kernel.consolidation.batches()
    assert batch.trigger is ConsolidationTrigger.EVENT_DRIVEN
    [item] = batch.items
    assert set(item.sources) == set(topic)
    for record_id in topic:
        assert (await head_of(kernel, record_id)).status is MemoryStatus.CONSOLIDATED
    made = await head_of(kernel, item.record_id)
    assert [] == touching(await related_edges(database), made.record_id)  # not an external write
    cursor = await job_cursor(kernel, "consolidation_event")
    assert cursor == outcome.due
    assert await watch.event(cursor) is None

    clock.advance(seconds=kernel.settings.consolidation_watch_seconds)
    assert [] == await runner.tick()  # checked, nothing to do
    assert 1 == len(await kernel.consolidation.batches())
    runs = await runner.book.runs("consolidation_event")
    assert ["succeeded"] == [run.outcome for run in runs]


async def test_routing_by_layer2_counts_as_an_event(kernel: Kernel) -> None:
    """With a threshold above the topic's size, the watch still reports the topic once Layer
    2 routed a record of it to consolidation (four related records before it)."""
    watch = ConsolidationWatch(
        kernel.db, event_threshold=50, fast_path_limit=100, decay_threshold=0.5
    )
    await seed(kernel, TOPIC[:4])
    await kernel.events.settled()
    assert await watch.event(None) is None  # three related records before each: not routed
    before = datetime.now(UTC)
    await write(kernel, episode(TOPIC[4], 4))
    await kernel.events.settled()
    routed = await kernel.db.fetchval(
        "SELECT count(*) FROM librarian_audit "
        "WHERE (layer2_decision::jsonb ->> 'route_to_consolidation')::boolean"
    )
    assert routed == 1  # the fifth: four related records before it
    expected = "Layer 2 routed 1 records to consolidation since the last pass"
    assert await watch.event(None) == expected
    assert await watch.event(before) == expected
    assert await watch.event(datetime.now(UTC)) is None


# --- the pressure trigger -----------------------------------------------------------------------


async def test_pressure_over_the_fast_path_limit_triggers_a_pass(
    kernel: Kernel, database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """The watch reports pressure once the active fast path holds more than its limit; a
    kernel with a small limit runs a pressure-driven pass from its 'consolidation_pressure'
    job, and the default kernel's job finds no pressure."""
    watch = ConsolidationWatch(kernel.db, event_threshold=5, fast_path_limit=3, decay_threshold=0.5)
    incident = [await write(kernel, episode(t, n)) for n, t in enumerate(INCIDENT)]
    assert await watch.pressure() is None
    lonely = await write(kernel, episode(UNRELATED[0], 9))
    await kernel.events.settled()
    assert await watch.pressure() == (
        "active fast-path records over the limit of 3 per access level: 4 at agent"
    )
    assert await kernel.consolidation.watch.pressure() is None  # the default limit

    settings = EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        retry_initial_wait_seconds=0.01,
        fast_path_limit=3,
    )
    async with open_kernel(settings=settings, embeddings=embedder) as small:
        clock = Clock(datetime.now(UTC))
        runner = Scheduler(
            small.db,
            kernel_jobs(small, "consolidation_pressure"),
            metrics=small.metrics,
            clock=clock,
            settings=SchedulerSettings(poll_seconds=0.05, stop_grace_seconds=5.0),
        )
        try:
            assert [] == await runner.tick()
            clock.advance(seconds=settings.consolidation_watch_seconds)
            assert ["consolidation_pressure"] == await runner.tick()
            [outcome] = await runner.wait_idle()
            assert outcome.outcome == "succeeded"
            assert outcome.detail["candidates"] == 4
            assert outcome.detail["batches"] >= 1
            batches = await small.consolidation.batches()
            assert {batch.trigger for batch in batches} == {ConsolidationTrigger.PRESSURE_DRIVEN}
            merged = {s for batch in batches for item in batch.items for s in item.sources}
            assert set(incident) <= merged
            assert await small.consolidation.watch.pressure() is None
            assert (await head_of(small, incident[0])).status is MemoryStatus.CONSOLIDATED
            assert (await head_of(small, lonely)).status is MemoryStatus.ACTIVE  # no topic
            clock.advance(seconds=settings.consolidation_watch_seconds)
            assert [] == await runner.tick()  # the pressure is gone
        finally:
            await runner.stop()

    default = scheduler(
        kernel, kernel_jobs(kernel, "consolidation_pressure"), Clock(datetime.now(UTC))
    )
    forced = await default.run_now("consolidation_pressure")  # manual: runs without pressure
    assert (forced.outcome, forced.detail["batches"]) == ("succeeded", 0)


# --- one lock for every consolidation job -------------------------------------------------------


async def test_consolidation_jobs_share_one_lock(kernel: Kernel) -> None:
    """While any job holding the 'consolidation' lock runs (here another scheduler's), none
    of the kernel's consolidation jobs may start; once it ends they run again."""
    await seed(kernel, INCIDENT)
    await kernel.events.settled()
    names = (
        "consolidation_deep",
        "consolidation_light",
        "consolidation_event",
        "consolidation_pressure",
    )
    jobs = kernel_jobs(kernel, *names)
    assert {job.lock_key for job in jobs} == {"consolidation"}
    assert all(
        job.lock_key != "consolidation" for job in kernel.scheduler.jobs if job.name not in names
    )
    release = asyncio.Event()
    started = asyncio.Event()

    async def hold(context: JobContext) -> Mapping[str, Any]:
        del context
        started.set()
        await release.wait()
        return {"held": True}

    clock = Clock(datetime.now(UTC))
    other = scheduler(
        kernel,
        [Job("blocker", Every(timedelta(days=1)), hold, "test", lock="consolidation")],
        clock,
    )
    mine = scheduler(kernel, jobs, clock)
    holding = asyncio.create_task(other.run_now("blocker"))
    await asyncio.wait_for(started.wait(), 10)
    try:
        for name in names:
            with pytest.raises(JobBusy, match=other.holder):
                await mine.run_now(name)
        assert [] == await kernel.consolidation.batches()
    finally:
        release.set()
        held = await holding
    assert held.outcome == "succeeded"

    deep = await mine.run_now("consolidation_deep")
    assert (deep.outcome, deep.detail["batches"], deep.detail["consumed"]) == ("succeeded", 1, 3)
    # and within one scheduler: while its job of that lock runs, the others are refused
    release.clear()
    started.clear()
    blocker = Job("blocker", Every(timedelta(days=1)), hold, "test", lock="consolidation")
    both = scheduler(kernel, [*jobs, blocker], clock)
    blocked = asyncio.create_task(both.run_now("blocker"))
    await asyncio.wait_for(started.wait(), 10)
    try:
        for name in names:
            with pytest.raises(JobBusy, match=f"blocker on {both.holder}"):
                await both.run_now(name)
    finally:
        release.set()
        await blocked
    light = await mine.run_now("consolidation_light")
    assert (light.outcome, light.detail["batches"]) == ("succeeded", 0)
