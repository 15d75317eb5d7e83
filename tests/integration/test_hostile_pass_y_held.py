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
import gc
import time
from uuid import UUID

import asyncpg
import httpx
import pytest

from engram import Kernel
from engram.infra.webhook import WebhookSink
from engram.memory.gate.requests import GateRequest
from engram.memory.types import AccessLevel, GateAction, GateDecision, MemoryStatus
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DEEP, engine_with, head_of
from tests.integration.gate_helpers import BOSS, EXTERNAL
from tests.integration.pass_y_helpers import (
    Escalated,
    Hook,
    Summariser,
    dropping_hook,
    hook,
    lane_held,
    llm_engine,
    lock_waiting,
    statuses,
    summariser,
    topics,
    waiting,
)
from tests.integration.race_helpers import broken_invariants
from tests.integration.test_hostile_pass_o import FLOOD
from tests.integration.test_triggers import episode, write


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
            async with lane_held(database.admin_url):
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


def _clients() -> int:
    gc.collect()
    return sum(isinstance(o, httpx.AsyncClient) for o in gc.get_objects())


async def test_concurrent_first_deliveries_make_one_client_and_a_closed_sink_makes_another() -> (
    None
):
    """Eight deliveries reach a new sink at the same moment, then the sink is closed and one
    more is sent. Rule: a sink makes one HTTP client for its deliveries however they arrive
    (its lock), and a delivery after the close makes a fresh one rather than failing."""
    with hook(Hook()) as receiver:
        sink = WebhookSink(receiver.url, pause_seconds=0.0)
        before = _clients()
        await asyncio.gather(*(sink.deliver(Escalated(key=f"k{n}")) for n in range(8)))
        assert before + 1 == _clients()
        first = sink._client
        await sink.aclose()
        assert first is not None
        assert first.is_closed
        await sink.deliver(Escalated(key="after"))
        assert sink._client is not None
        assert sink._client is not first
        await sink.aclose()
    assert 9 == len(receiver.requests)


@pytest.mark.parametrize("reset", [False, True], ids=["fin", "rst"])
async def test_a_receiver_dropping_kept_alive_connections_gets_each_delivery_once(
    reset: bool,
) -> None:
    """The receiver answers over HTTP/1.1 without ``Connection: close`` and then drops the
    connection (FIN, or RST), so the sink's pooled connection is dead by the next delivery.
    Rule: each delivery still reaches it exactly once, on a new connection, without a failed
    attempt (no retry wait: the five deliveries take well under the sink's 1 s first wait)."""
    with dropping_hook(reset) as (url, answered):
        sink = WebhookSink(url, pause_seconds=0.0)
        began = time.monotonic()
        try:
            for n in range(5):
                await sink.deliver(Escalated(key=f"k{n}"))
                await asyncio.sleep(0.05)
        finally:
            await sink.aclose()
        took = time.monotonic() - began
    assert 5 == len(answered)
    assert took < 1.0, took


async def test_a_redirect_is_not_followed_and_carries_nothing_elsewhere() -> None:
    """The webhook URL carries credentials (``user:secret@``); the receiver answers each
    delivery with a 307 to another server. Rule: a redirect is a refusal (not followed, not
    retried), so the other server never sees a request, a body or the credentials, and the
    receiver sees one request per delivery, each with its own credentials only."""
    with hook(Hook()) as elsewhere, hook(Hook(status=307)) as receiver:
        receiver.headers["Location"] = elsewhere.url
        url = receiver.url.replace("http://", "http://user:secret@")
        sink = WebhookSink(url, pause_seconds=0.0, initial_wait_seconds=0.01)
        try:
            for n in range(2):
                with pytest.raises(httpx.HTTPStatusError):
                    await sink.deliver(Escalated(key=f"k{n}"))
        finally:
            await sink.aclose()
    assert [] == elsewhere.requests
    assert 2 == len(receiver.requests)
    assert {"Basic dXNlcjpzZWNyZXQ="} == {r["authorization"] for r in receiver.requests}


async def test_a_batch_whose_backend_is_killed_beside_another_lands_once(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Two topics, a batch each, both started; one waits inside its transaction for the
    batches' lane, the other behind it; the waiting one's backend is terminated
    (``pg_terminate_backend``). Rule:
    the killed batch's transaction is gone whole and run again by the adapter, the other is
    untouched; both land exactly once and the report counts each source once."""
    written = await topics(kernel, 2)
    admin = await asyncpg.connect(database.admin_url)
    try:
        async with lane_held(database.admin_url):
            running = asyncio.create_task(engine_with(kernel, batch_size=3).run(DEEP))
            await waiting(admin, 1)  # the other waits for the lane in the kernel meanwhile
            assert 2 == len(_batch_tasks())
            pid = await admin.fetchval(
                "SELECT min(pid) FROM pg_stat_activity "
                "WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
            await waiting(admin, 1)  # a batch's attempt waits again
        report = await running
    finally:
        await admin.close()
    flat = [record_id for topic in written for record_id in topic]
    assert sorted(map(str, flat)) == sorted(map(str, report.consumed))
    assert (2, 0) == (len(report.created), report.failed_batches)
    assert 2 == await kernel.db.fetchval("SELECT count(*) FROM consolidation_batches")
    assert [] == await broken_invariants(kernel)
    assert (await kernel.audit.verify()).ok


async def test_progress_and_dry_run_agree_with_the_pass(kernel: Kernel) -> None:
    """Two topics at the agent level and one at the sensitive level, batches of one topic.
    Rule: a dry run writes nothing and plans what the pass then commits; the progress the
    pass reports (batches finishing in any order, the total growing as topics are planned)
    never goes back, never shows more done than known, and ends at every topic done."""
    agent = await topics(kernel, 2)
    (sensitive,) = [
        [
            await write(kernel, episode(text, 50 + n, access_level=AccessLevel.SENSITIVE))
            for n, text in enumerate(FLOOD[5])
        ]
    ]
    await kernel.events.settled()
    engine = engine_with(kernel, batch_size=3)
    dry = await engine.run(DEEP, dry_run=True)
    flat = [record_id for topic in [*agent, sensitive] for record_id in topic]
    assert {MemoryStatus.ACTIVE} == set(await statuses(kernel, flat))
    seen: list[tuple[int, int]] = []
    report = await engine.run(DEEP, progress=lambda done, total: seen.append((done, total)))
    planned = {frozenset(s.record_id for s in c.sources) for c in dry.planned}
    assert planned == {frozenset(s.record_id for s in c.sources) for c in report.planned}
    assert 3 == len(planned)
    assert (dry.candidates, dry.skipped) == (report.candidates, report.skipped)
    assert sorted(map(str, flat)) == sorted(map(str, report.consumed))
    assert all(done <= total for done, total in seen), seen
    assert [d for d, _ in seen] == sorted(d for d, _ in seen), seen
    assert [t for _, t in seen] == sorted(t for _, t in seen), seen
    assert (3, 3) == seen[-1]
