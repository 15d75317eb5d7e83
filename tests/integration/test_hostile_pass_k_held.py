"""Hostile pass K, what held: updates and forgets retried under their request ids while
their backends are killed (``pg_terminate_backend``) write once; the version store and the
audit log hold every invariant afterwards."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace
from typing import Any
from uuid import UUID

import asyncpg

from benchmarks.agent_text import texts
from engram import Kernel
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.types import GateAction, GateDecision, MemoryRecord, MemoryStatus, TrustLevel
from tests.conftest import ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.consolidation_helpers import DEEP, INCIDENT, head_of
from tests.integration.gate_helpers import BOSS, EXTERNAL, belief, create, update
from tests.integration.lost_ack import CREATE_AT_ONCE, UPDATE_AT_ONCE, with_lost_ack
from tests.integration.race_helpers import broken_invariants, jittered, typed
from tests.integration.test_hostile_pass_h import _seed_thread
from tests.integration.test_hostile_pass_k import CALLER
from tests.integration.test_http_api import Api

RECORDS = 24
#: Unrelated texts (no two of them conflict), one per record.
TEXTS = texts(RECORDS, 11)
api = http_api.api


async def _kill_busy_backends(admin: asyncpg.Connection, database: str, times: int) -> int:
    """Terminate one busy backend of the runtime role ``times`` times, 40 ms apart (one at
    a time, so that the breaker stays closed and the other writes go on)."""
    killed = 0
    for _ in range(times):
        await asyncio.sleep(0.04)
        killed += await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM ("
            " SELECT pid FROM pg_stat_activity WHERE datname = $1 AND usename = 'engram_runtime'"
            " AND state <> 'idle' ORDER BY random() LIMIT 1) AS busy",
            database,
        )
    return killed


def _requests(records: list[UUID], heads: dict[UUID, int]) -> list[GateRequest]:
    """An UPDATE of every even record, a FORGET of every odd one, each with its request id."""
    made = []
    for n, record_id in enumerate(records):
        if n % 2 == 0:
            request = update(
                record_id, f"{TEXTS[n]} Reviewed again in week {n + 1}.", heads[record_id], CALLER
            )
            made.append(replace(request, request_id=f"change-{n}"))
        else:
            target = belief("", record_id=record_id, source_agent=CALLER.agent_id)
            made.append(
                GateRequest.forget(
                    target,
                    CALLER,
                    EXTERNAL,
                    expected_version=heads[record_id],
                    request_id=f"change-{n}",
                )
            )
    return made


async def test_updates_and_forgets_retried_after_killed_backends_write_once(
    quick_breaker_kernel: Kernel, database: ScratchDatabase
) -> None:
    """Backends are killed while updates and forgets commit; whatever each attempt answered,
    its retry under the same request id is approved, and every record ends with exactly one
    change: two versions for an update, one forgotten version for a forget, one audit row
    per change, and a log that verifies and rebuilds the store."""
    kernel = quick_breaker_kernel
    records = []
    for n in range(RECORDS):
        made = await kernel.gate.evaluate(create(belief(TEXTS[n]), CALLER))
        assert made.record_id is not None, made.reason
        records.append(made.record_id)
    await kernel.events.settled()
    heads = dict.fromkeys(records, 1)
    admin = await asyncpg.connect(database.admin_url)
    try:
        changes = [kernel.gate.evaluate(r) for r in _requests(records, heads)]
        first, killed = await asyncio.gather(
            asyncio.gather(*changes, return_exceptions=True),
            _kill_busy_backends(admin, database.name, 4),
        )
    finally:
        await admin.close()
    await asyncio.sleep(0.3)  # the kills may have opened the breaker: let it probe again
    assert killed >= 2, "the kills came after the writes"
    failed = [r for r in first if isinstance(r, BaseException)]
    assert all(type(r).__module__.startswith("engram") for r in failed), failed
    again: list[GateResult] = [await kernel.gate.evaluate(r) for r in _requests(records, heads)]
    assert [r.reason for r in again if r.decision is not GateDecision.APPROVED] == []
    for n, result in enumerate(first):
        if isinstance(result, GateResult):
            assert result.decision is GateDecision.APPROVED, (n, result.reason)
            assert result.decision_id == again[n].decision_id, n
    await kernel.events.settled()
    versions = {
        row["record_id"]: (row["versions"], row["status"])
        for row in await kernel.db.fetch(
            "SELECT record_id, count(*) AS versions, "
            "(array_agg(status ORDER BY version DESC))[1] AS status "
            "FROM memories GROUP BY record_id"
        )
    }
    expected = {
        r: (2, MemoryStatus.ACTIVE.value) if n % 2 == 0 else (1, MemoryStatus.FORGOTTEN.value)
        for n, r in enumerate(records)
    }
    assert versions == expected
    changed = await kernel.db.fetchval(
        "SELECT count(*) FROM librarian_audit WHERE action IN ('UPDATE', 'FORGET') "
        "AND decision = 'approved'"
    )
    assert changed == RECORDS
    assert await broken_invariants(kernel) == []


async def test_sixteen_patches_with_one_if_match_make_one_version_and_fifteen_409s(
    api: Api,
) -> None:
    """Per round, 16 PATCHes of one record with the same If-Match (each with its own
    Idempotency-Key; in the last round half of them DELETEs): exactly one wins, the others
    are typed 409s naming the version the winner made (404s when a DELETE won: the record is
    gone), each key's retry answers as its first attempt did, and the chain is 1..n with one
    head and a log that verifies."""
    alice = await api.agent("alice", TrustLevel.STANDARD, writes_per_minute=100_000)
    made = await api.write({"type": "belief", "content": TEXTS[0]}, alice)
    assert made.status_code == 201, made.text
    path = f"/v1/memories/{made.json()['record_id']}"
    for round_no in range(3):
        version = round_no + 1
        pinned = {**alice, "If-Match": f'"{version}"'}

        def attempt(n: int, round_no: int = round_no, pinned: dict[str, str] = pinned) -> Any:
            keyed = {**pinned, "Idempotency-Key": f"race-{round_no}-{n}"}
            if round_no == 2 and n % 2:
                return api.client.delete(path, headers=keyed)
            body = {"content": f"{TEXTS[0]} Checked in round {round_no} by writer {n}."}
            return api.client.patch(path, json=body, headers=keyed)

        answers = await asyncio.gather(*(attempt(n) for n in range(16)))
        assert typed(answers) == []
        won = [a for a in answers if a.status_code == 200]
        assert len(won) == 1, [a.text[:200] for a in answers]
        lost = 404 if won[0].json()["outcome"] == "forgotten" else 409
        assert sorted(a.status_code for a in answers) == [200] + [lost] * 15
        if lost == 409:
            losers = {a.json()["current_version"] for a in answers if a.status_code == 409}
            assert losers == {version + 1}
        again = await asyncio.gather(*(attempt(n) for n in range(16)))
        assert [a.status_code for a in again] == [a.status_code for a in answers]
    await api.kernel.events.settled()
    chain = await api.kernel.db.fetch(
        "SELECT version, status FROM memories WHERE record_id = $1 ORDER BY version",
        UUID(made.json()["record_id"]),
    )
    assert [row["version"] for row in chain] in ([1, 2, 3], [1, 2, 3, 4])
    assert await broken_invariants(api.kernel) == []


async def test_a_forget_an_update_and_a_pass_over_one_thread_at_once_keep_every_invariant(
    kernel: Kernel,
) -> None:
    """Per round, a thread of three events in a namespace of its own; an agent forgets the
    first, corrects the second, and a deep pass runs, all at once with random delays. An agent
    write that loses to the pass is a version conflict (a forget is then sent again); whatever
    wins, no source is consolidated without a live summary, no forgotten fact is in one, an
    approved correction stands, and the log verifies and rebuilds the store."""
    rng = random.Random(2611)  # noqa: S311 - interleavings, not secrets
    for n in range(12):
        ids = await _seed_thread(kernel, f"three-way-{n}")
        corrected = f"{INCIDENT[1]} Confirmed by the on-call lead in round {n}."

        async def forget(record_id: UUID = ids[0]) -> object:
            head = await head_of(kernel, record_id)
            return await kernel.gate.evaluate(
                GateRequest.forget(head, BOSS, EXTERNAL, expected_version=head.version)
            )

        async def change(record_id: UUID = ids[1], text: str = corrected) -> object:
            head = await head_of(kernel, record_id)
            proposal = MemoryRecord.draft(
                head.type,
                text,
                record_id=record_id,
                source_agent=BOSS.agent_id,
                event_time=head.event_time,
                namespace=head.namespace,
            )
            return await kernel.gate.evaluate(
                GateRequest(
                    GateAction.UPDATE, proposal, BOSS, EXTERNAL, expected_version=head.version
                )
            )

        async def consolidate() -> object:
            return await kernel.consolidation.run(DEEP)

        forgotten, changed, _ = await jittered(rng, [forget, change, consolidate], spread=0.2)
        await kernel.events.settled()
        assert isinstance(forgotten, GateResult)
        assert isinstance(changed, GateResult)
        # Each agent write read its head before the others ran: one the pass consumed first
        # is a version conflict (the agent reads again and retries), never anything else.
        outcomes = {forgotten.decision, changed.decision}
        assert outcomes <= {GateDecision.APPROVED, GateDecision.CONFLICT}, n
        if changed.decision is GateDecision.APPROVED:
            assert (await head_of(kernel, ids[1])).content == corrected
        if forgotten.decision is not GateDecision.APPROVED:
            retried = await forget()
            assert isinstance(retried, GateResult)
            assert retried.decision is GateDecision.APPROVED, (n, retried.reason)
            await kernel.events.settled()
        leaked = await kernel.db.fetch(
            "SELECT h.record_id FROM memories h JOIN memory_edges e ON e.target_id IN ("
            " SELECT id FROM memories WHERE record_id = h.record_id) AND e.kind = 'derived_from' "
            "JOIN memories s ON s.id = e.source_id AND s.record_id = $1 "
            "WHERE h.superseded_by IS NULL AND h.status <> 'forgotten'",
            ids[0],
        )
        assert leaked == [], (n, "a live summary still cites the forgotten event")
        assert await broken_invariants(kernel) == [], n


# --- COMMITs whose acknowledgement was lost ----------------------------------------------------


async def test_writes_whose_commit_acknowledgement_is_lost_are_written_once(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A CREATE, an UPDATE and a FORGET each commit, and the connection is terminated before
    the kernel hears so; the kernel's retry finds its decision in the log and answers it:
    each is approved once, with one version and one audit row, and the log verifies."""
    created = await with_lost_ack(
        database.admin_url,
        kernel.gate.evaluate(create(belief(TEXTS[0]), CALLER)),
        CREATE_AT_ONCE,  # a new record is written in one statement
    )
    assert created.decision is GateDecision.APPROVED, created.reason
    assert created.record_id is not None
    await kernel.events.settled()
    changed = await with_lost_ack(
        database.admin_url,
        kernel.gate.evaluate(update(created.record_id, f"{TEXTS[0]} Checked.", 1, CALLER)),
        UPDATE_AT_ONCE,  # so is the next version of the head it was planned against
    )
    assert (changed.decision, changed.version) == (GateDecision.APPROVED, 2), changed.reason
    await kernel.events.settled()
    target = belief("", record_id=created.record_id, source_agent=CALLER.agent_id)
    forgotten = await with_lost_ack(
        database.admin_url,
        kernel.gate.evaluate(GateRequest.forget(target, CALLER, EXTERNAL, expected_version=2)),
        "COMMIT",
    )
    assert forgotten.decision is GateDecision.APPROVED, forgotten.reason
    await kernel.events.settled()
    rows = await kernel.db.fetch(
        "SELECT action, count(*) AS n FROM librarian_audit WHERE record_id = $1 "
        "AND decision_type = 'external' GROUP BY action ORDER BY action",
        created.record_id,
    )
    assert [(r["action"], r["n"]) for r in rows] == [("CREATE", 1), ("FORGET", 1), ("UPDATE", 1)]
    assert (
        await kernel.db.fetchval(
            "SELECT count(*) FROM memories WHERE record_id = $1", created.record_id
        )
        == 2
    )
    assert await broken_invariants(kernel) == []


async def test_a_release_whose_commit_acknowledgement_is_lost_is_done_once(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """An admin's quarantine release commits and its acknowledgement is lost: the retry finds
    its RELEASE row and answers the released record; one row, and the log verifies."""
    admin = await kernel.agents.add("root", TrustLevel.TRUSTED, admin=True)
    flagged = await kernel.gate.evaluate(
        create(belief("The rota lead is reachable at rota.lead@example.org."), CALLER)
    )
    assert flagged.modified_record is not None
    assert flagged.modified_record.access_level.value == "sensitive"
    await kernel.events.settled()
    caller = (await kernel.agents.authenticate(admin[1])).caller
    released, _ = await with_lost_ack(
        database.admin_url,
        kernel.quarantine.release(flagged.record_id, admin=caller, reason="a published rota"),
        "COMMIT",
    )
    assert released.access_level.value == "agent"
    assert (
        await kernel.db.fetchval("SELECT count(*) FROM librarian_audit WHERE action = 'RELEASE'")
        == 1
    )
    assert await broken_invariants(kernel) == []


async def test_a_pass_and_a_rollback_whose_commit_acknowledgements_are_lost_happen_once(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A deep pass commits its batch and a rollback of that batch commits, each with its
    acknowledgement lost: the retries find their decisions in the log, one batch is
    recorded and rolled back once, the sources are active again, and the log verifies."""
    ids = await _seed_thread(kernel, "lost-ack")
    report = await with_lost_ack(database.admin_url, kernel.consolidation.run(DEEP), "COMMIT")
    (batch,) = report.batches
    assert set(report.consumed) == set(ids)
    await kernel.events.settled()
    assert await kernel.db.fetchval("SELECT count(*) FROM consolidation_batches") == 1
    undone = await with_lost_ack(
        database.admin_url, kernel.consolidation.rollback(batch.batch_id), "COMMIT"
    )
    assert set(undone.restored) == set(ids)
    await kernel.events.settled()
    assert [(await head_of(kernel, i)).status for i in ids] == [MemoryStatus.ACTIVE] * 3
    assert await broken_invariants(kernel) == []
