"""Hostile pass H: races between paths on the same records, run concurrently over separate
connections, repeated with random delays so that the windows between them are hit.

Every test here failed when it was written: each one is a confirmed problem."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable
from datetime import timedelta
from uuid import UUID

import asyncpg
from httpx import Response

from engram import Kernel
from engram.errors import ConsolidationConflict
from engram.memory.audit.entry import BATCH_LANE
from engram.memory.consolidation.model import BatchReport, ConsolidationReport
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.types import GateAction, MemoryRecord, MemoryStatus, MemoryType, TrustLevel
from tests.conftest import ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.consolidation_helpers import DAY, DEEP, INCIDENT, head_of
from tests.integration.gate_helpers import BOSS, EXTERNAL, lock_waiters
from tests.integration.race_helpers import broken_invariants, jittered, typed
from tests.integration.test_http_api import Api

api = http_api.api
FAST = 100_000

ROUNDS = 24


#: The incident thread with its root cause told as the state it left ("is capped at 20"):
#: a later record that changes that state supersedes it. Told as an account of the incident
#: ("was capped at 20 in v4.3.0") it stays true after the change (`conflict-gbdt@6`), and
#: the supersession race below would never start.
STATE_THREAD = [
    *INCIDENT[:2],
    "Root cause of the checkout-api incident: the connection pool is capped at 20 since v4.3.0.",
]


async def _seed_thread(
    kernel: Kernel, namespace: str, thread: list[str] | None = None
) -> list[UUID]:
    """The incident thread in a namespace of its own, its conflict resolutions done."""
    ids = []
    for n, text in enumerate(thread or INCIDENT):
        record = MemoryRecord.draft(
            MemoryType.EPISODE,
            text,
            source_agent=BOSS.agent_id,
            event_time=DAY + timedelta(days=n),
            namespace=namespace,
        )
        result = await kernel.gate.evaluate(GateRequest(GateAction.CREATE, record, BOSS, EXTERNAL))
        assert result.record_id is not None, result.reason
        ids.append(result.record_id)
    await kernel.events.settled()
    return ids


async def _consolidated(kernel: Kernel, ids: list[UUID]) -> tuple[BatchReport, UUID]:
    """A deep pass; the batch and the summary that consumed ``ids``."""
    report = await kernel.consolidation.run(DEEP)
    [(batch, summary)] = [
        (b, item.record_id)
        for b in report.batches
        for item in b.items
        if set(item.sources) & set(ids)
    ]
    return batch, summary


async def _forget(kernel: Kernel, record_id: UUID) -> GateResult:
    """The agent's FORGET of the version it reads now."""
    head = await head_of(kernel, record_id)
    return await kernel.gate.evaluate(
        GateRequest.forget(head, BOSS, EXTERNAL, expected_version=head.version)
    )


# --- 1. an admin's rollback against an agent's forget ----------------------------------------


async def test_a_rollback_racing_an_agents_forget_plans_again_instead_of_failing(
    kernel: Kernel,
) -> None:
    """The admin rolls a batch back while the agent forgets one of its sources (or the summary
    itself). The forget is in place: the record keeps its version and becomes ``forgotten``,
    and the release the forget starts forgets the summary in place too. The rollback planned
    before that then has its FORGET of the summary refused by the Gate's schema check
    ("record … is forgotten"), not answered as a version conflict, and the rollback took the
    refusal for a final answer: ConsolidationConflict "the Gate refused the rollback", the
    sources left ``consolidated`` when the summary was the agent's, although planning again
    (as its docstring promises for a record that moved) would have restored them."""
    rng = random.Random(20261127)  # noqa: S311 - interleavings, not secrets
    failures = []
    for n in range(ROUNDS):
        ids = await _seed_thread(kernel, f"rollback-{n}")
        batch, summary = await _consolidated(kernel, ids)
        target = summary if n % 2 else ids[1]

        async def rollback(batch_id: UUID = batch.batch_id) -> object:
            try:
                return await kernel.consolidation.rollback(batch_id)
            except ConsolidationConflict as exc:
                return exc

        async def forget(record_id: UUID = target) -> object:
            return await _forget(kernel, record_id)

        rolled, _ = await jittered(rng, [rollback, forget])
        await kernel.events.settled()
        if isinstance(rolled, ConsolidationConflict):
            failures.append(f"round {n}: {rolled}")
        broken = await broken_invariants(kernel)
        assert not broken, (n, broken)
        for source in ids:
            if source != target:
                status = (await head_of(kernel, source)).status
                assert status is MemoryStatus.ACTIVE or failures, (n, source, status)
    assert failures == []


# --- 2. the same content written twice at once -----------------------------------------------


async def test_the_same_content_written_by_two_agents_at_once_is_stored_once(api: Api) -> None:
    """Two agents (and the first agent's retry under one Idempotency-Key) send the same belief
    at once. Sent one after the other, the second is answered ``reinforced`` and one record
    holds the content; sent together, each writer looked for the exact duplicate before
    either had committed, found none, and stored its own record (up to four live heads of
    one content). A CREATE now holds its content's lock from the look-up to the commit
    (gate.serial), so the later writers find the first. (The Idempotency-Key race itself
    holds: one decision answers both attempts.)"""
    rng = random.Random(4)  # noqa: S311 - interleavings, not secrets
    alice = await api.agent("alice", TrustLevel.STANDARD, writes_per_minute=FAST)
    bob = await api.agent("bob", TrustLevel.STANDARD, writes_per_minute=FAST)
    stored = []
    for n in range(8):
        body = {"type": "belief", "content": f"The {n}th shard keeps its sessions in Redis 7."}
        key = {"Idempotency-Key": f"same-{n}"}
        answers = await jittered(
            rng,
            [
                lambda body=body: api.write(body, alice),
                lambda body=body: api.write(body, bob),
                lambda body=body, key=key: api.write(body, {**alice, **key}),
                lambda body=body, key=key: api.write(body, {**alice, **key}),
            ],
        )
        assert typed(answers) == []
        assert answers[2].json()["decision_id"] == answers[3].json()["decision_id"]
        await api.kernel.events.settled()
        heads = await api.kernel.db.fetchval(
            "SELECT count(*) FROM memories WHERE content = $1 AND superseded_by IS NULL",
            body["content"],
        )
        stored.append(heads)
    assert await broken_invariants(api.kernel) == []
    assert stored == [1] * len(stored), f"live heads of one content per round: {stored}"


# --- 3. an agent's update or second forget against its forget --------------------------------


async def test_a_write_that_loses_to_a_forget_is_answered_not_found(api: Api) -> None:
    """The agent sends two DELETEs of one record and a PATCH with its retry (one
    Idempotency-Key) at once, each with the ETag it read. Sent one after the other,
    whatever comes after the first DELETE is a 404 (the documented answer for a forgotten
    record). Sent together, the loser got whichever refusal the race reached: 404 when the
    adapter's read already saw the record forgotten, 422 ``gate-rejected`` "schema: record
    … is forgotten" (the client's input called invalid) when the Gate's read did, or 409
    "expected version 1, current version is 1" (a conflict naming the very version the
    client sent) when only the locked write did; and a retry could get 404 where its first
    attempt got the recorded 409, or the other way round."""
    rng = random.Random(11)  # noqa: S311 - interleavings, not secrets
    alice = await api.agent("alice", TrustLevel.STANDARD, writes_per_minute=FAST)
    pinned = {**alice, "If-Match": '"1"'}
    for n in range(ROUNDS):
        created = await api.write(
            {"type": "belief", "content": f"Build runner {n} uses 16 GB of memory."}, alice
        )
        assert created.status_code == 201, created.text
        path = f"/v1/memories/{created.json()['record_id']}"
        keyed = {**pinned, "Idempotency-Key": f"check-{n}"}

        def patch(path: str = path, keyed: dict[str, str] = keyed) -> Awaitable[Response]:
            return api.client.patch(path, json={"metadata": {"checked": True}}, headers=keyed)

        answers = await jittered(
            rng,
            [
                lambda path=path: api.client.delete(path, headers=pinned),
                lambda path=path: api.client.delete(path, headers=pinned),
                patch,
                patch,
            ],
        )
        assert typed(answers) == []
        said = [a.json().get("detail") or a.json()["reason"] for a in answers]
        deletes, patches = answers[:2], answers[2:]
        if patches[0].status_code == 200:  # the DELETEs are stale: version 2 is current
            assert [p.json()["decision_id"] for p in patches] == [
                patches[1].json()["decision_id"]
            ] * 2
            assert [(d.status_code, d.json()["current_version"]) for d in deletes] == [
                (409, 2),
                (409, 2),
            ], (n, said)
        else:  # forgotten: what follows is about a record that is not there
            assert sorted(a.status_code for a in answers) == [200, 404, 404, 404], (n, said)
    assert await broken_invariants(api.kernel) == []


# --- 4. a supersession resolved on a source a batch consumed meanwhile ------------------------

NEWER_POOL = (
    "The checkout-api connection pool is no longer capped at 20: since v4.3.1 it is capped at 80."
)


API_FACTS = [
    "The public API authenticates requests with JWT bearer tokens.",
    "The public API rate-limits each client to 100 requests per minute.",
    "The public API is served from eu-west-1 behind CloudFront.",
]


async def _written_while_a_batch_commits(
    kernel: Kernel, database: ScratchDatabase, record: MemoryRecord
) -> tuple[set[str], ConsolidationReport]:
    """Write ``record`` while a deep pass is inside its transaction (held by a lock on the
    batch lane of the audit log, the way a long batch holds it: its versions are written but
    not visible), and let the pass commit once a resolution of the write waits for a head
    the batch holds. Returns the conflict classes the write found and the pass's report."""
    admin = await asyncpg.connect(database.admin_url)
    try:
        held = admin.transaction()
        await held.start()
        await admin.execute(
            "SELECT 1 FROM engram.audit_chain_heads WHERE lane = $1 FOR UPDATE", BATCH_LANE
        )
        passing = asyncio.create_task(kernel.consolidation.run(DEEP))
        await lock_waiters(admin, 1)  # the batch wrote its versions and waits for its lane
        written = await kernel.gate.evaluate(GateRequest(GateAction.CREATE, record, BOSS, EXTERNAL))
        assert written.layer2_decision is not None, written.reason
        found = {c.classification.value for c in written.layer2_decision.conflicts}
        await lock_waiters(admin, 2)  # ... and a resolution waits for a source's head
        await held.rollback()
        return found, await passing
    finally:
        await admin.close()


def _summaries(report: ConsolidationReport) -> list[UUID]:
    """The consolidated records a pass made."""
    return [item.record_id for batch in report.batches for item in batch.items]


async def _escalated(kernel: Kernel) -> list[dict[str, object]]:
    """The payloads of the escalations in the admin queue."""
    return [dict(row["payload"]) for row in await kernel.admin_queue.pending()]


async def test_a_supersession_resolved_after_a_batch_keeps_the_source_consolidated(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """An agent writes a newer statement of the incident while a deep pass commits the thread:
    Layer 2 reads the sources as the active heads they still are (the batch has not
    committed) and finds supersessions; their resolution, delivered by the outbox, waits for
    the batch's locks, meets the consolidated version, plans again against it and restated
    it with its validity ended, and with status ``active``: every source was visible again
    while the summary telling the same facts stayed live (the same text twice in every
    result list). Now the source keeps ``consolidated`` (its validity ended) and the summary,
    which tells the paging and the rollback too, is not ended with them: the supersession is
    escalated to a person, naming the summary. The pass is held inside its transaction by a
    lock on the batch lane of the audit log (so its writes are not yet visible), the way a
    long batch holds it."""
    ids = await _seed_thread(kernel, "pool", STATE_THREAD)
    newer = MemoryRecord.draft(
        MemoryType.EPISODE,
        NEWER_POOL,
        source_agent=BOSS.agent_id,
        event_time=DAY + timedelta(days=5),
        namespace="pool",
    )
    found, report = await _written_while_a_batch_commits(kernel, database, newer)
    assert "supersession" in found, found
    await kernel.events.settled()
    [summary] = _summaries(report)
    statuses = [(await head_of(kernel, source)).status for source in ids]
    assert statuses == [MemoryStatus.CONSOLIDATED] * len(ids)
    assert (await head_of(kernel, ids[2])).event_time_end == DAY + timedelta(days=5)
    kept = await head_of(kernel, summary)
    assert (MemoryStatus.ACTIVE, None) == (kept.status, kept.event_time_end)
    escalated = await _escalated(kernel)
    assert [(str(summary), str(ids[2]), "supersession")] == [
        (e["existing_record_id"], e["consumed_record_id"], e["classification"]) for e in escalated
    ]
    assert await broken_invariants(kernel) == []


async def _api_beliefs(kernel: Kernel) -> list[UUID]:
    """The three beliefs about the public API, each sure (0.9), as one trusted agent's."""
    ids = []
    for text in API_FACTS:
        record = MemoryRecord.draft(
            MemoryType.BELIEF, text, source_agent=BOSS.agent_id, source_confidence=0.9
        )
        result = await kernel.gate.evaluate(GateRequest(GateAction.CREATE, record, BOSS, EXTERNAL))
        assert result.record_id is not None, result.reason
        ids.append(result.record_id)
    await kernel.events.settled()
    return ids


COOKIES = "The public API authenticates requests with session cookies."


async def test_a_contradiction_resolved_after_a_batch_leaves_no_source_beside_its_summary(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """As above, with a contradiction: three beliefs about the public API are merged while a
    trusted agent writes, with less confidence, that it authenticates with session cookies.
    The resolution restated the JWT belief as ``challenged`` after the batch consumed it:
    the source was readable again beside the live summary that still states the JWT fact.
    Now the source stays ``consolidated``; the summary, which also states the rate limit and
    the region nobody disputes, is not challenged with them: the contradiction is escalated
    to a person, naming the summary, and the agent's own claim is challenged."""
    ids = await _api_beliefs(kernel)
    cookies = MemoryRecord.draft(
        MemoryType.BELIEF, COOKIES, source_agent=BOSS.agent_id, source_confidence=0.5
    )
    found, report = await _written_while_a_batch_commits(kernel, database, cookies)
    assert "contradiction" in found, found
    await kernel.events.settled()
    [summary] = _summaries(report)
    statuses = [(await head_of(kernel, source)).status for source in ids]
    assert statuses == [MemoryStatus.CONSOLIDATED] * len(ids)
    assert MemoryStatus.ACTIVE == (await head_of(kernel, summary)).status
    assert MemoryStatus.CHALLENGED == (await head_of(kernel, cookies.record_id)).status
    escalated = await _escalated(kernel)
    assert [(str(summary), str(ids[0]), str(cookies.record_id))] == [
        (e["existing_record_id"], e["consumed_record_id"], e["record_id"]) for e in escalated
    ]
    assert await broken_invariants(kernel) == []
