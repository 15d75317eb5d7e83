"""Hostile pass Y: the consolidation committer that starts batches while a level is still
planned, with each access level's deadline, and the webhook sink's one HTTP client (the
last session's code), attacked with real faults.

Every test here failed on the code it was written against (each says what failed); what held
is in ``test_hostile_pass_y_held.py``. Real embedded PostgreSQL, the real embedding model,
real loopback servers (an outside summariser, webhook receivers); no mocks."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg
import pytest

from engram import Kernel
from engram.errors import DatabaseError, WebhookUnavailable
from engram.infra.webhook import WebhookSink
from engram.memory.types import AccessLevel, MemoryStatus
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DEEP, fail_summaries
from tests.integration.pass_y_helpers import (
    Escalated,
    Hook,
    Summariser,
    hook,
    lane_held,
    llm_engine,
    statuses,
    summariser,
    topics,
    waiting,
)
from tests.integration.race_helpers import broken_invariants
from tests.integration.scheduler_helpers import Clock, scheduler
from tests.integration.test_triggers import kernel_jobs


async def test_a_mangled_summary_answer_mid_level_does_not_end_the_pass(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Three topics, a batch each; the first batch waits inside its transaction for the
    batches' lane while the outside model answers the third topic's request with a JSON
    document nested 100,000 deep. Rule: whatever the outside summariser answers, the planner
    keeps the extractive text (ADR-018) and the pass goes on: every topic is consolidated.
    Failed before: the parser's RecursionError, not an HTTP or value error, escaped the
    generator and the summariser, ended the planning, cancelled the batch in flight and
    raised out of the pass (every pass, while the endpoint answered so; the levels after the
    open one were never reached). Fixed in ``infra/llm.py``."""
    written = await topics(kernel, 3)
    admin = await asyncpg.connect(database.admin_url)
    try:
        with summariser(Summariser(special=3, behaviour="nested")) as model:
            engine = llm_engine(kernel, model.url, batch_size=3)
            async with lane_held(database.admin_url):
                running = asyncio.create_task(engine.run(DEEP))
                await model.reached()
                await waiting(admin, 1)
            report = await running
    finally:
        await admin.close()
    flat = [record_id for topic in written for record_id in topic]
    assert set(flat) == set(report.consumed)
    assert {MemoryStatus.CONSOLIDATED} == set(await statuses(kernel, flat))
    assert [] == await broken_invariants(kernel)


async def test_an_outside_summariser_dripping_its_answer_does_not_hold_the_pass(
    kernel: Kernel,
) -> None:
    """One topic; the outside model (timeout 1 s) sends its answer one byte every 0.3 s, 13 s
    in all, and every read comes well within the timeout. Rule: each outside call is bounded
    as a whole by its timeout (as the webhook sink's are), so a pass of ``max_seconds`` 2
    ends within a few seconds, with the extractive text; a dripping endpoint held the pass,
    and the consolidation lock and every more closed level behind it, for the whole drip."""
    (written,) = await topics(kernel, 1)
    with summariser(Summariser(special=1, behaviour="drip", drip_seconds=0.3)) as model:
        engine = llm_engine(kernel, model.url, timeout=1.0, max_seconds=2.0)
        began = asyncio.get_running_loop().time()
        try:
            report = await asyncio.wait_for(engine.run(DEEP), 6.0)
        finally:
            model.release.set()
        took = asyncio.get_running_loop().time() - began
    assert took < 4.0, took
    assert set(written) == set(report.consumed)


async def test_a_receivers_cookies_do_not_follow_into_later_deliveries() -> None:
    """The receiver sets a cookie of a new name in each answer. Rule: only an answer's
    status is read (``infra/webhook.py``), and every delivery is the same request whatever
    earlier answers said; nothing the receiver answers is kept by the kernel. Failed before:
    the sink's one client kept a cookie jar, so the fifth request carried four cookies, and
    a receiver (or anything on its path) could make the kernel's memory and every later
    request grow without bound, until the receiver refused the oversized requests (a 4xx,
    which gives each escalation up). Fixed in ``infra/webhook.py`` (a jar that keeps none)."""
    with hook(Hook(headers={"Set-Cookie": "s{n}=v{n}; Path=/"})) as receiver:
        sink = WebhookSink(receiver.url, pause_seconds=0.0)
        try:
            for n in range(5):
                await sink.deliver(Escalated(key=f"k{n}"))
        finally:
            await sink.aclose()
    assert [None] * 5 == [request.get("cookie") for request in receiver.requests]


async def test_a_delivery_cut_by_the_sinks_close_is_deferred_not_refused() -> None:
    """A delivery is in flight (the receiver holds its answer) when its sink is closed.
    Rule: a delivery that did not get through for a reason of the kernel's own is an
    infrastructure failure (``WebhookUnavailable``: the relay sends the row again later),
    never the receiver's refusal, after which the relay gives the escalation up for good.
    Failed before: httpx's ``RuntimeError`` (the client is closed) escaped the sink, and the
    relay's catch-all took it for a refusal. Fixed in ``infra/webhook.py``."""
    with hook(Hook(slow=1)) as receiver:
        sink = WebhookSink(receiver.url, pause_seconds=0.0, initial_wait_seconds=0.05)
        sending = asyncio.create_task(sink.deliver(Escalated(key="k")))
        assert await asyncio.to_thread(receiver.arrived.wait, 10)
        await sink.aclose()
        receiver.release.set()
        with pytest.raises(WebhookUnavailable):
            await sending
        await sink.aclose()


@pytest.mark.usefixtures("schedulers")
async def test_whether_a_pass_fails_does_not_depend_on_a_closed_level(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Every summary at the agent level fails to insert (a trigger raising in the batch's
    transaction, a real error the adapter does not retry). The nightly job runs twice, from
    the scheduler, over the same agent topic: first with nothing at the sensitive level,
    then with a sensitive topic that commits. Rule: what a job does about an open level's
    failure may not depend on records its readers may not read (ADR-019's amendments).
    Failed before: the engine raised when every batch of the pass failed (``engine._run``),
    so the first run was ``failed`` and the job backed off, exponentially, which delays every
    level's next pass, and the second succeeded. Fixed (ADR-019, second amendment of
    2026-11-29): a job's pass reports its failed batches (``failed_levels``, counted in
    ``engram_consolidation_batches_total``) and never raises for them, and the event and
    pressure jobs back a failing level off on its own (``test_consolidation_backoff.py``).
    An operator's run still fails when every batch failed (its reader sees every level):
    the engine called as ``engram consolidate`` calls it raises in the first case only."""
    await topics(kernel, 1)
    await fail_summaries(database.admin_url, AccessLevel.AGENT)
    clock = Clock(datetime.now(UTC))
    runner = scheduler(kernel, kernel_jobs(kernel, "consolidation_deep"), clock)
    assert [] == await runner.tick()  # first sighting: marked, not run
    outcomes, consumed = [], []
    for closed in (0, 1):
        if closed:
            await topics(kernel, 1, AccessLevel.SENSITIVE, first=1)
        clock.advance(days=1)
        assert ["consolidation_deep"] == await runner.tick()
        [run] = await runner.wait_idle()
        state = await runner.book.get("consolidation_deep")
        assert state is not None
        outcomes.append(
            (run.outcome, run.detail.get("failed_batches"), state.failures, state.retry_at)
        )
        consumed.append(run.detail.get("consumed"))
    assert outcomes[0] == outcomes[1], outcomes
    assert ("succeeded", 1, 0, None) == outcomes[0]
    assert [0, 3] == consumed  # the sensitive topic, committed in the second run

    # the operator's path (``engram consolidate``, ``engram jobs run``): the agent topic is
    # all that is left, and a pass whose every batch failed still raises
    with pytest.raises(DatabaseError):
        await kernel.consolidation.run(DEEP)
