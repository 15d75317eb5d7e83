"""Hostile pass K: real faults on the paths other than a plain CREATE (updates, forgets,
releases, rollbacks, outbox deliveries): backends killed with ``pg_terminate_backend``,
processes killed with SIGKILL. Every test here failed when it was written; what held is in
``test_hostile_pass_k_held.py``."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from uuid import UUID

import asyncpg
import pytest

from engram import Kernel
from engram.autonomy.schedule import Daily
from engram.autonomy.scheduler import Job
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.rl.grpo import GRPOConfig
from engram.memory.rl.runs import train_candidate
from engram.memory.types import GateAction, GateDecision, MemoryRecord, MemoryStatus, TrustLevel
from tests.conftest import ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.consolidation_helpers import DEEP, head_of
from tests.integration.gate_helpers import (
    BOSS,
    EXTERNAL,
    STANDARD,
    belief,
    create,
    holding_head,
    lock_waiters,
)
from tests.integration.lost_ack import with_lost_ack
from tests.integration.race_helpers import broken_invariants
from tests.integration.scheduler_helpers import Clock, scheduler
from tests.integration.test_hostile_pass_h import _seed_thread
from tests.integration.test_http_api import Api
from tests.integration.test_scheduler import START, Recorder

api = http_api.api
CALLER = replace(STANDARD, writes_per_minute=1_000_000, trust_level=TrustLevel.TRUSTED)


# --- the outbox: a delivery whose own transaction dies ----------------------------------------

MARCH = datetime(2025, 3, 1, 9, tzinfo=UTC)
APRIL = datetime(2025, 4, 10, 9, tzinfo=UTC)
PAIRS = [
    ("The deploy target for the web app is v2.0.", "The deploy target for the web app is v2.1."),
    (
        "The payments service runs 3 replicas in production.",
        "The payments service now runs 5 replicas in production.",
    ),
]


async def _drain_backend(admin: asyncpg.Connection) -> int:
    """The pid of the outbox drain's backend, idle in its transaction while it delivers."""
    for _ in range(500):
        pid = await admin.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE usename = 'engram_runtime' "
            "AND datname = current_database() AND state = 'idle in transaction' "
            "AND query LIKE '%FROM outbox AS o%'"
        )
        if pid is not None:
            return int(pid)
        await asyncio.sleep(0.01)
    rows = await admin.fetch(
        "SELECT pid, state, wait_event_type, left(query, 120) AS q FROM pg_stat_activity "
        "WHERE datname = current_database()"
    )
    raise AssertionError(f"no outbox drain holds a transaction: {[dict(r) for r in rows]}")


async def test_events_of_a_drain_killed_mid_delivery_are_delivered_without_new_writes(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Two supersessions are written while the outbox delivers the first one's resolution
    (held by a lock on the older record's head), and the drain's backend is terminated
    meanwhile. The documented promise (docs/operations.md, Escalations): an event whose
    delivery fails for an infrastructure reason is tried again after 1, 2, 4 ... s with or
    without new writes. The drain logged ``outbox.drain_failed`` and stopped: the second
    resolution was never carried out, and the older fact of the second pair stayed current,
    until some later commit happened to start a drain."""
    olds = []
    for old, _ in PAIRS:
        made = await kernel.gate.evaluate(create(belief(old, event_time=MARCH), CALLER))
        assert made.record_id is not None, made.reason
        olds.append(made.record_id)
    await kernel.events.settled()
    async with holding_head(database.admin_url, olds[0]) as lock:
        watch = lock.watch
        first = await kernel.gate.evaluate(create(belief(PAIRS[0][1], event_time=APRIL), CALLER))
        assert first.decision is GateDecision.APPROVED, first.reason
        drain = await _drain_backend(watch)
        await lock_waiters(watch, 1)  # the first resolution waits for the held head
        second = await kernel.gate.evaluate(create(belief(PAIRS[1][1], event_time=APRIL), CALLER))
        assert second.decision is GateDecision.APPROVED, second.reason
        assert second.layer2_decision is not None
        found = [(c.classification.value, c.reason) for c in second.layer2_decision.conflicts]
        assert [kind for kind, _ in found] == ["supersession"], found
        assert await watch.fetchval("SELECT pg_terminate_backend($1)", drain)
        await lock.release()

    async def superseded() -> bool:
        heads = [await kernel.temporal.current(r) for r in olds]
        return all(h is not None and h.event_time_end == APRIL for h in heads)

    async def pending() -> int:
        left: int = await kernel.db.fetchval(
            "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL"
        )
        return left

    # 8 s: the retries come after 1, 2 and 4 s. The resolutions' own writes publish events
    # too, delivered a moment after them: both must be done.
    for _ in range(80):
        if await superseded() and await pending() == 0:
            break
        await asyncio.sleep(0.1)
    assert (await superseded(), await pending()) == (True, 0)
    await kernel.events.settled()
    assert await broken_invariants(kernel) == []


# --- a release delivered again after the next pass ---------------------------------------------


async def _update(kernel: Kernel, record_id: UUID, content: str) -> GateResult:
    """The trusted agent's UPDATE of ``record_id`` (its current version) to ``content``."""
    head = await head_of(kernel, record_id)
    changed = MemoryRecord.draft(
        head.type,
        content,
        record_id=record_id,
        source_agent=BOSS.agent_id,
        event_time=head.event_time,
        namespace=head.namespace,
    )
    return await kernel.gate.evaluate(
        GateRequest(GateAction.UPDATE, changed, BOSS, EXTERNAL, expected_version=head.version)
    )


CORRECTED = "Paged at 02:10 for checkout-api: p99 latency above 2 s, paged Dana (corrected)."


async def test_a_release_delivered_again_after_the_next_pass_keeps_that_pass_summary(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """An agent corrects a consolidated source; the outbox delivers ``memory.updated`` and
    the release takes the summary back, but the drain's backend is terminated before it marks
    the event delivered (the release itself is held by a lock on the summary's head until
    then). The next pass consolidates the corrected source with the others into a new
    summary; then the event is delivered again (at least once, as documented). The second
    delivery released "every item that consumed the record": it forgot the new summary,
    which was made from the corrected version and owed nothing to the change, and put its
    sources back on the fast path."""
    ids = await _seed_thread(kernel, "redelivered")
    first_pass = await kernel.consolidation.run(DEEP)
    (summary,) = first_pass.created
    async with holding_head(database.admin_url, summary) as lock:
        admin, watch = lock.admin, lock.watch
        corrected = await _update(kernel, ids[0], CORRECTED)
        assert corrected.decision is GateDecision.APPROVED, corrected.reason
        drain = await _drain_backend(watch)
        await lock_waiters(watch, 1)  # the release waits for the summary's head
        assert await watch.fetchval("SELECT pg_terminate_backend($1)", drain)
        await lock.release()
        for _ in range(200):  # the release goes on and commits
            if (await head_of(kernel, summary)).status is MemoryStatus.FORGOTTEN:
                break
            await asyncio.sleep(0.02)
        assert (await head_of(kernel, summary)).status is MemoryStatus.FORGOTTEN
        # The event is still pending; a drain of another kernel would deliver it whenever.
        # Keep it out of this kernel's drains until the next pass has committed.
        held = admin.transaction()
        await held.start()
        pending = await admin.fetch(
            "SELECT id FROM engram.outbox WHERE event_type = 'memory.updated' "
            "AND aggregate_id = $1 AND dispatched_at IS NULL FOR UPDATE",
            ids[0],
        )
        assert pending, "the drain marked the event delivered before it was killed"
        second_pass = await kernel.consolidation.run(DEEP)
        (remade,) = second_pass.created
        assert set(second_pass.consumed) == set(ids)
        await held.rollback()
    await kernel.events.settled()
    assert (await head_of(kernel, remade)).status is MemoryStatus.ACTIVE
    assert [(await head_of(kernel, i)).status for i in ids] == [MemoryStatus.CONSOLIDATED] * 3
    assert await broken_invariants(kernel) == []


# --- a rating retried under its Idempotency-Key -------------------------------------------------


async def test_feedback_retried_under_one_idempotency_key_is_stored_once(api: Api) -> None:
    """A client whose answer to POST /v1/feedback was lost (the server killed after the
    commit, a dropped connection) sends it again under the same Idempotency-Key, which
    docs/api.md says POST accepts: "a retry with the same key by the same agent ... writes
    nothing". The key was ignored on this route: the retry stored a second rating, and the
    reward the learned advisor trains on counted the record's usefulness twice. The retry
    now answers with the first rating, marked replayed."""
    alice = await api.agent("alice", TrustLevel.STANDARD, writes_per_minute=100_000)
    made = await api.write({"type": "belief", "content": PAIRS[0][0]}, alice)
    assert made.status_code == 201, made.text
    record_id = made.json()["record_id"]
    keyed = {**alice, "Idempotency-Key": "rating-1"}
    answers = []
    for _ in range(2):
        rated = await api.client.post(
            "/v1/feedback", json={"record_id": record_id, "useful": True}, headers=keyed
        )
        assert rated.status_code == 200, rated.text
        answers.append(rated.json())
    assert [a.pop("replayed") for a in answers] == [False, True]
    assert answers[0] == answers[1]
    stored = await api.kernel.db.fetchval(
        "SELECT count(*) FROM memory_feedback WHERE record_id = $1", UUID(record_id)
    )
    assert stored == 1


# --- a statement cancelled under a request -----------------------------------------------------


async def test_a_write_whose_statement_is_cancelled_is_a_typed_503_not_a_500(
    api: Api, database: ScratchDatabase
) -> None:
    """An operator cancels (``pg_cancel_backend``) the statement of a PATCH that waits for a
    lock on the record's head: the request was answered 500 ``internal`` (SQLSTATE 57014,
    query_canceled, fell through to DatabaseError), an untyped outage that tells the client
    neither to retry nor why. Nothing was written; the same PATCH goes through afterwards."""
    alice = await api.agent("alice", TrustLevel.STANDARD, writes_per_minute=100_000)
    made = await api.write({"type": "belief", "content": PAIRS[0][0]}, alice)
    assert made.status_code == 201, made.text
    record_id = made.json()["record_id"]
    path = f"/v1/memories/{record_id}"
    pinned = {**alice, "If-Match": '"1"', "Idempotency-Key": "cancelled-once"}
    async with holding_head(database.admin_url, UUID(record_id)) as lock:
        watch = lock.watch
        patch = asyncio.ensure_future(
            api.client.patch(path, json={"metadata": {"checked": True}}, headers=pinned)
        )
        await lock_waiters(watch, 1)
        cancelled = await watch.fetchval(
            "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock' "
            "AND usename = 'engram_runtime'"
        )
        assert cancelled == 1
        answer = await patch
        await lock.release()
    assert answer.status_code == 503, answer.text
    assert answer.json()["type"] == "urn:engram:problem:unavailable"
    again = await api.client.patch(path, json={"metadata": {"checked": True}}, headers=pinned)
    assert again.status_code == 200, again.text
    assert again.json()["version"] == 2
    assert await broken_invariants(api.kernel) == []


# --- statements whose commit acknowledgement is lost --------------------------------------------


async def test_a_reveal_whose_commit_acknowledgement_is_lost_is_audited_once_and_answered(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """An admin asks to see quarantined content: the REVEAL row commits, and the connection is
    terminated before the kernel hears so. The kernel's retry appended the same decision
    again and met its own first row: a UniqueViolation, answered 409 ``conflict`` over REST,
    so the admin was refused although the reveal was audited. The retry now finds its row
    and answers as the first attempt would have."""
    _, token = await kernel.agents.add("root", TrustLevel.TRUSTED, admin=True)
    caller = (await kernel.agents.authenticate(token)).caller
    decision = await with_lost_ack(
        database.admin_url,
        kernel.quarantine.reveal(admin=caller, shown="quarantine list", reason="an audit"),
        "COMMIT",
    )
    rows = await kernel.db.fetch("SELECT decision_id FROM librarian_audit WHERE action = 'REVEAL'")
    assert [r["decision_id"] for r in rows] == [decision]
    assert (await kernel.audit.verify()).ok


async def test_a_rating_whose_commit_acknowledgement_is_lost_is_stored_once(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """One call of ``feedback``: the INSERT commits and the connection is terminated before
    the kernel hears so; the database adapter retries the statement (a lost connection is
    retried) and stored a second rating, though no client retried anything. The key the
    kernel draws for the call now makes the retry find its own row."""
    made = await kernel.gate.evaluate(create(belief(PAIRS[0][0]), CALLER))
    assert made.record_id is not None, made.reason
    await kernel.events.settled()
    await with_lost_ack(
        database.admin_url,
        kernel.retrieval.feedback(CALLER, made.record_id, useful=True),
        "INSERT INTO memory_feedback",
    )
    stored = await kernel.db.fetchval(
        "SELECT count(*) FROM memory_feedback WHERE record_id = $1", made.record_id
    )
    assert stored == 1


async def test_an_agent_added_whose_commit_acknowledgement_is_lost_gets_its_token(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """`engram agents add` (and the admin agent of a first serve): the INSERT commits and the
    connection is terminated before the kernel hears so. The adapter's retry met the row it
    had just written and answered "an agent named ... already exists": the agent was there,
    its token shown to nobody (a first serve stopped on it and never announced an admin).
    The retry now recognises its own row by the token's digest and returns the token."""
    agent, token = await with_lost_ack(
        database.admin_url,
        kernel.agents.add("ops", TrustLevel.TRUSTED, admin=True),
        "INSERT INTO agents",
    )
    assert agent.name == "ops"
    assert (await kernel.agents.authenticate(token)).caller.agent_id == "ops"
    assert await kernel.agents.count() == 1


async def test_an_advisor_rollback_whose_commit_acknowledgement_is_lost_goes_back_one_model(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """rl@1 then rl@2 promoted; `engram advisor rollback` commits (rl@2 out, rl@1 back) and
    the connection is terminated before the kernel hears so. The retry ran the rollback
    again on what the first attempt left: rl@1 retired too, and the heuristic advised every
    kernel (two steps back for one command, and the answer said "the heuristic")."""
    for text in PAIRS[0] + PAIRS[1]:
        made = await kernel.gate.evaluate(create(belief(text), CALLER))
        assert made.record_id is not None, made.reason
        await kernel.retrieval.feedback(CALLER, made.record_id, useful=True)
    models = kernel.advisor_models
    quick = GRPOConfig(epochs=1, imitation_steps=5)
    for version in ("rl@1", "rl@2"):
        trained = await train_candidate(
            kernel.db, until=datetime.now(UTC), min_decisions=1, config=quick
        )
        assert trained.model is not None
        assert trained.model.version == version
        await models.record_evaluation(version, {"wins": True, "reasons": []})
        await models.promote(version)
    back = await with_lost_ack(database.admin_url, models.rollback(), "COMMIT")
    assert back is not None
    assert back.version == "rl@1"
    active = await models.active()
    assert active is not None
    assert active.version == "rl@1"


@pytest.mark.usefixtures("schedulers")
async def test_a_job_claim_whose_commit_acknowledgement_is_lost_runs_the_job_once(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A scheduler claims a due job (one statement records the run and marks the job running)
    and the acknowledgement is lost. The retry met its own run row (UNIQUE job, due,
    attempt): the tick failed, the next poll found the job "running" under a lock nobody
    held, recorded that run as abandoned (counted in engram_job_runs_total{outcome=
    "abandoned"}) and ran the job as attempt 2. The retry now recognises its own run."""
    body = Recorder()
    clock = Clock(START)
    runner = scheduler(kernel, [Job("nightly", Daily(3), body, "test")], clock)
    assert await runner.tick() == []  # first sighting: marked, not run
    clock.advance(seconds=40)
    started = await with_lost_ack(database.admin_url, runner.tick(), "INSERT INTO job_runs")
    assert started == ["nightly"]
    await runner.wait_idle()
    clock.advance(seconds=40)
    assert await runner.tick() == []
    await runner.wait_idle()
    runs = await runner.book.runs("nightly")
    assert [(run.attempt, run.outcome) for run in runs] == [(1, "succeeded")]
    assert len(body.dues) == 1
