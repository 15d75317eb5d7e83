"""Hostile pass Y, what held: the consolidation committer that starts batches while a level
is still planned (cancelled, its backends killed, two passes at once, sources changed under
a planned topic, the per-level deadlines, progress and dry runs) and the webhook sink's one
HTTP client (concurrent first deliveries, receivers that drop kept-alive connections,
redirects, a relay closed mid-send).

Real embedded PostgreSQL, the real embedding model, real loopback servers; no mocks. A batch
is held inside its transaction by a real lock on the batches' audit lane, a plan mid-level by
an outside summariser that has not answered yet."""

from __future__ import annotations

import asyncio
from uuid import UUID

import asyncpg

from engram import Kernel
from engram.memory.gate.requests import GateRequest
from engram.memory.types import AccessLevel, GateAction, GateDecision, MemoryStatus
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DEEP, engine_with, head_of
from tests.integration.gate_helpers import BOSS, EXTERNAL
from tests.integration.pass_y_helpers import (
    Summariser,
    lane_held,
    llm_engine,
    lock_waiting,
    statuses,
    summariser,
    topics,
    waiting,
)
from tests.integration.race_helpers import broken_invariants


def _batch_tasks() -> list[asyncio.Task[object]]:
    return [
        t for t in asyncio.all_tasks() if not t.done() and "Committer._one" in repr(t.get_coro())
    ]


async def test_a_pass_cancelled_mid_level_leaves_no_batch_half_done(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Three topics, a batch each. The first batch has started and waits inside its
    transaction for the batches' lane; the third topic's summary is still being asked of the
    outside model. The pass is cancelled there. Rule: a cancelled pass writes nothing more
    and leaves nothing behind (its batch rolled back, no batch task still running, no session
    waiting), and the next pass consolidates every topic."""
    written = await topics(kernel, 3)
    admin = await asyncpg.connect(database.admin_url)
    try:
        with summariser(Summariser(special=3)) as model:
            engine = llm_engine(kernel, model.url, batch_size=3)
            async with lane_held(admin):
                running = asyncio.create_task(engine.run(DEEP))
                await model.reached()
                await waiting(admin, 1)  # the first batch, in its transaction
                assert 1 == len(_batch_tasks())
                running.cancel()
                done = await asyncio.gather(running, return_exceptions=True)
                assert isinstance(done[0], asyncio.CancelledError)
                assert [] == _batch_tasks()
        for _ in range(100):
            if 0 == await lock_waiting(admin):
                break
            await asyncio.sleep(0.02)
        assert 0 == await lock_waiting(admin)
    finally:
        await admin.close()
    flat = [record_id for topic in written for record_id in topic]
    assert {MemoryStatus.ACTIVE} == set(await statuses(kernel, flat))
    assert 0 == await kernel.db.fetchval("SELECT count(*) FROM consolidation_batches")
    assert [] == await broken_invariants(kernel)
    report = await engine_with(kernel, batch_size=3).run(DEEP)
    assert set(flat) == set(report.consumed)


async def _changed(kernel: Kernel, record_id: UUID, action: GateAction, **fields: object) -> None:
    """The trusted agent's ``action`` on ``record_id``'s head (``fields`` changed)."""
    head = await head_of(kernel, record_id)
    proposal = head.model_copy(update={"source_agent": BOSS.agent_id, **fields})
    request = GateRequest(action, proposal, BOSS, EXTERNAL, expected_version=head.version)
    result = await kernel.gate.evaluate(request)
    assert GateDecision.APPROVED is result.decision, result.reason


async def test_sources_changed_between_planning_and_their_batch_are_left_alone(
    kernel: Kernel,
) -> None:
    """Three topics are loaded; while the outside model is asked for the first summary, an
    agent updates a source of one topic, raises a source of another to sensitive and forgets
    a source of the third. The pass then goes on and starts their batches. Rule: a batch never
    writes over a source that moved on since it was planned (``source_changed``, or refused
    for the forgotten one), and above all no summary at the agent level holds a claim raised
    to sensitive meanwhile."""
    first, second, third = await topics(kernel, 3)
    with summariser(Summariser(special=1)) as model:
        engine = llm_engine(kernel, model.url, batch_size=3)
        running = asyncio.create_task(engine.run(DEEP))
        await model.reached()
        await _changed(kernel, first[0], GateAction.UPDATE, content="Billing deploys now pass.")
        await _changed(kernel, second[0], GateAction.UPDATE, access_level=AccessLevel.SENSITIVE)
        await _changed(kernel, third[0], GateAction.FORGET)
        model.release.set()
        report = await running
    assert [] == report.consumed
    # the forgotten source's topic is refused by Layer 1 before its versions are compared
    left = report.skipped
    assert 9 == left.get("source_changed", 0) + left.get("rejected", 0), left
    assert 1 == left.get("singleton"), left  # the raised claim, read at the sensitive level
    assert 0 == await kernel.db.fetchval(
        "SELECT count(*) FROM memories WHERE consolidation_path = 'slow'"
    )
    raised = await head_of(kernel, second[0])
    assert (AccessLevel.SENSITIVE, MemoryStatus.ACTIVE) == (raised.access_level, raised.status)
    assert MemoryStatus.FORGOTTEN is (await head_of(kernel, third[0])).status
    assert "Billing deploys now pass." == (await head_of(kernel, first[0])).content
    assert [] == await broken_invariants(kernel)


async def test_two_passes_at_once_consume_each_source_once(kernel: Kernel) -> None:
    """Two engines run a deep pass over the same four topics at the same moment, without the
    jobs' lock (an operator's run beside a worker of another kernel on the same database),
    their batches of one topic each interleaving. Rule: each source is consumed by exactly
    one summary; the other pass's batch finds it moved on and skips it."""
    written = await topics(kernel, 4)
    one, two = engine_with(kernel, batch_size=3), engine_with(kernel, batch_size=3)
    first, second = await asyncio.gather(one.run(DEEP), two.run(DEEP))
    flat = [record_id for topic in written for record_id in topic]
    assert sorted(map(str, flat)) == sorted(map(str, [*first.consumed, *second.consumed]))
    assert 4 == len(first.created) + len(second.created)
    assert 4 == await kernel.db.fetchval(
        "SELECT count(*) FROM memories WHERE consolidation_path = 'slow'"
    )
    assert {MemoryStatus.CONSOLIDATED} == set(await statuses(kernel, flat))
    assert [] == await broken_invariants(kernel)
