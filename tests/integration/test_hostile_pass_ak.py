"""Hostile pass AK: what a caller may not read must not shape its answer, on the least-travelled
read surfaces. Each test here failed on the code it was written against. Real embedded
PostgreSQL and the real embedding model, no mocks.

The search and temporal read paths held (``test_hostile_pass_ak_held.py``). What leaked were
the internal writers that change what a caller reads after the fact, each judging by records
or versions the caller may not read: consolidation leaving sources consumed into a summary
raised above them (ADR-018), the PII rescan passing a finding from a hidden version
(ADR-019), the re-embed job's order (ADR-019), a record's standing in a conflict
resolution taken from a hidden version (ADR-010), and a version's importance (the start of
the decay score readers see) measured against a hidden head it replaced (ADR-008).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import asyncpg

from engram import Kernel, open_kernel
from engram.autonomy.healing import PiiRescan, reembed_missing
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.types import AccessLevel, MemoryRecord, MemoryStatus, MemoryType, TrustLevel
from engram.protocols.inprocess import AgentSession
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DAY, DEEP, INCIDENT, head_of
from tests.integration.gate_helpers import BOSS, WRITER, belief, create, update
from tests.integration.test_hostile_pass_ag import _given_up, impatient_kernel
from tests.integration.twin_helpers import Store, differences, normalised, twin_a, twin_b

__all__ = ["impatient_kernel", "twin_a", "twin_b"]

FAST = 100_000.0
QUERY = "checkout-api latency incident"


async def _found(store: Store, name: str, **options: Any) -> list[str]:
    """The contents ``name`` finds for the incident, best first."""
    caller = store.principals[name].caller
    found = await store.kernel.retrieval.search(caller, QUERY, min_score=0.3, **options)
    return [hit.record.content for hit in found.hits]


async def test_a_summary_raised_above_its_sources_leaves_their_facts_readable_at_their_level(
    twin_a: Store,
) -> None:
    """The writer's three episodes of an incident are consolidated into one agent-level
    summary. A trusted agent then raises the summary to ``sensitive``. The writer may not read
    it any more, and its episodes stayed ``consolidated``: its searches and listings found
    nothing of its own incident, because of a record it may not read. The sources its readers
    may no longer read the summary of go back to ``active``; the trusted agent keeps its
    summary."""
    store = twin_a
    await store.agent("boss", TrustLevel.TRUSTED, writes_per_minute=FAST)
    await store.agent("writer", TrustLevel.STANDARD, writes_per_minute=FAST)
    writer = AgentSession(store.kernel, store.principals["writer"].caller)
    episodes = []
    for n, text in enumerate(INCIDENT):
        when = (DAY + timedelta(days=n)).isoformat()
        result = await writer.remember({"type": "episode", "content": text, "event_time": when})
        assert result.record_id is not None, result.reason
        episodes.append(result.record_id)
    await store.kernel.events.settled()
    report = await store.kernel.consolidation.run(DEEP)
    [batch] = report.batches
    [item] = batch.items
    assert set(item.sources) == set(episodes)
    summary = await head_of(store.kernel, item.record_id)
    assert await _found(store, "writer") == [summary.content]

    raised = await store.client.patch(
        f"/v1/memories/{summary.record_id}",
        json={"access_level": "sensitive", "event_time": summary.event_time.isoformat()},
        headers={**store.headers["boss"], "If-Match": f'"{summary.version}"'},
    )
    assert raised.status_code == 200, raised.text
    await store.kernel.events.settled()

    assert sorted(await _found(store, "writer")) == sorted(INCIDENT)
    page = await store.kernel.temporal.page(caller=store.principals["writer"].caller)
    assert sorted(r.content for r in page) == sorted(INCIDENT)
    for record_id in episodes:
        assert (await head_of(store.kernel, record_id)).status is MemoryStatus.ACTIVE
    # the trusted agent's summary stands as it wrote it
    kept = await head_of(store.kernel, summary.record_id)
    assert kept.status is MemoryStatus.ACTIVE
    assert kept.access_level.value == "sensitive"
    assert summary.content in await _found(store, "boss")


async def _episodes(kernel: Kernel) -> list[UUID]:
    """The standard writer's incident, at agent level."""
    ids = []
    for n, text in enumerate(INCIDENT):
        when = DAY + timedelta(days=n)
        proposal = create(
            MemoryRecord.draft(
                MemoryType.EPISODE, text, source_agent=WRITER.agent_id, event_time=when
            ),
            WRITER,
        )
        result = await kernel.gate.evaluate(proposal)
        assert result.record_id is not None, result.reason
        ids.append(result.record_id)
    await kernel.events.settled()
    return ids


async def test_a_give_back_the_outbox_gave_up_on_is_finished_by_the_sweep(
    impatient_kernel: Kernel, database: ScratchDatabase
) -> None:
    """The trusted agent raises the summary while its event cannot be handled (SELECT on
    consolidation_batches revoked for real) until the outbox gives it up: the writer's
    episodes stay consolidated. The sweep of the next scheduled pass gives them back, once."""
    kernel = impatient_kernel
    episodes = await _episodes(kernel)
    (made,) = (await kernel.consolidation.run(DEEP)).created
    summary = await head_of(kernel, made)
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute("REVOKE SELECT ON engram.consolidation_batches FROM engram_runtime")
        raised = await kernel.gate.evaluate(
            update(
                made,
                summary.content,
                summary.version,
                BOSS,
                memory_type=MemoryType.EPISODE,
                event_time=summary.event_time,
                access_level=AccessLevel.SENSITIVE,
            )
        )
        assert raised.record_id == made, raised.reason
        await _given_up(kernel, made, "memory.updated")
    finally:
        await admin.execute("GRANT SELECT ON engram.consolidation_batches TO engram_runtime")
        await admin.close()
    assert (await head_of(kernel, episodes[0])).status is MemoryStatus.CONSOLIDATED  # the gap

    swept = await kernel.consolidation.sweep_releases()

    assert (1, 0) == (swept.released, swept.failed)
    for record_id in episodes:
        assert (await head_of(kernel, record_id)).status is MemoryStatus.ACTIVE
    assert (await head_of(kernel, made)).access_level is AccessLevel.SENSITIVE
    again = await kernel.consolidation.sweep_releases()
    assert 0 == again.released + again.failed
    # consolidated again at their level, under the raised summary: nothing left to give back
    assert (await kernel.consolidation.run(DEEP)).created
    assert (await head_of(kernel, episodes[0])).status is MemoryStatus.CONSOLIDATED
    assert 0 == (await kernel.consolidation.sweep_releases()).found


RUNBOOK = "The ledger runbook lives on the team wiki."
OWNED = (
    "The ledger runbook lives on the team wiki; its owner is Dana Whitfield, "
    "dana.whitfield@example.com, +1 415 555 0134."
)


async def test_a_rescan_raises_no_record_for_personal_data_in_a_version_its_readers_never_had(
    kernel: Kernel,
) -> None:
    """The writer's runbook note X, and its on-call note Y citing X as evidence, both agent
    level. A trusted agent then writes a version of X naming its owner's e-mail and phone:
    the Gate quarantines that version at ``sensitive`` and X is hidden from the writer, while
    Y, which cites X's clean first version, stays readable. After a detector upgrade the PII
    rescan passed X's finding on to every record derived from any version of X, and raised Y:
    the writer lost its own record because of text it never could read. Only records derived
    from a version carrying personal data inherit the finding."""
    x = await kernel.gate.evaluate(create(belief(RUNBOOK, source_agent=WRITER.agent_id), WRITER))
    assert x.record_id is not None, x.reason
    y = await kernel.gate.evaluate(
        create(
            belief(
                "The ledger on-call reads the runbook before paging anyone.",
                source_agent=WRITER.agent_id,
                evidence_links=[x.record_id],
            ),
            WRITER,
        )
    )
    assert y.record_id is not None, y.reason
    owned = await kernel.gate.evaluate(
        update(x.record_id, OWNED, 1, BOSS, access_level=AccessLevel.SENSITIVE)
    )
    assert owned.modified_record is not None, owned.reason
    assert "pii" in owned.modified_record.metadata  # quarantined by the Gate
    await kernel.events.settled()
    assert await kernel.temporal.current(y.record_id, caller=WRITER) is not None
    # every version was screened by the detector before an upgrade
    await kernel.db.execute("UPDATE memories SET screened_with = 'regex@0'")

    await PiiRescan(kernel.gate, kernel.db, kernel.metrics).run()

    kept = await head_of(kernel, y.record_id)
    assert kept.access_level is AccessLevel.AGENT
    assert "pii" not in kept.metadata
    seen = await kernel.temporal.current(y.record_id, caller=WRITER)
    assert seen is not None
    assert seen.evidence_links == ()  # X is hidden from the writer


#: Written by the trusted agent while the model is down, before the writer's own.
HIDDEN_WHILE_DOWN = [
    "The payroll export runs at 02:00 from the finance cluster.",
    "The payroll export is signed with the finance team's key.",
    "The payroll export keeps seven years of history.",
]
OWN_WHILE_DOWN = [
    "The ledger service runs on PostgreSQL 16 in the Frankfurt region.",
    "The ledger team answers questions in the ops channel.",
    "The ledger nightly backup is kept for thirty days.",
]


async def test_records_the_writer_may_not_read_do_not_hold_back_the_embedding_of_its_own(
    stalled_kernel: Kernel, database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """While the embedding model is down, the trusted agent stores three sensitive records,
    then the writer three agent-level ones: all are stored without an embedding, so search
    does not find them. The re-embed job took the oldest first, so the records the writer may
    not read used up the batch and its own stayed unfound for another run (five minutes by
    default, or many with a long outage). A record now waits only for those at its level or
    below, all of them readable by its readers: the most open levels are embedded first."""
    for text in HIDDEN_WHILE_DOWN:
        hidden = belief(text, source_agent=BOSS.agent_id, access_level=AccessLevel.SENSITIVE)
        result = await stalled_kernel.gate.evaluate(create(hidden, BOSS))
        assert result.degraded, result.reason
    for text in OWN_WHILE_DOWN:
        result = await stalled_kernel.gate.evaluate(
            create(belief(text, source_agent=WRITER.agent_id), WRITER)
        )
        assert result.degraded, result.reason
    settings = EngramSettings(database_url=database.runtime_url, migrate_on_start=False)
    async with open_kernel(settings=settings, embeddings=embedder) as healthy:
        report = await reembed_missing(healthy.gate, healthy.db, batch=len(OWN_WHILE_DOWN))
        assert report.repaired == len(OWN_WHILE_DOWN)
        found = await healthy.retrieval.search(WRITER, "ledger", limit=10)
        assert sorted(hit.record.content for hit in found.hits) == sorted(OWN_WHILE_DOWN)


DEPLOY = "The deploy target for the web app is v2.0."
DEPLOY_NEWER = "The deploy target for the web app is v2.1."
MARCH = "2025-03-01T09:00:00+00:00"


async def _deploy_target(store: Store, *, interlude: bool) -> list[Any]:
    """The writer's deploy target, then the trusted agent's tag on it (store B: after a
    version of another content at ``sensitive``, the tag comes with the writer's content back
    at agent level), then the writer's newer value; the writer's answers."""
    await store.agent("boss", TrustLevel.TRUSTED, writes_per_minute=FAST)
    await store.agent("writer", TrustLevel.STANDARD, writes_per_minute=FAST)
    writer, boss = store.headers["writer"], store.headers["boss"]
    body = {"type": "belief", "content": DEPLOY, "event_time": MARCH}
    created = await store.client.post("/v1/memories", json=body, headers=writer)
    record_id = created.json()["record_id"]
    tagged = {"metadata": {"tags": ["web"]}, "event_time": MARCH}
    patches = [tagged]
    if interlude:
        hidden = {"content": "The deploy target for the web app is v9.9.", "event_time": MARCH}
        patches = [{**hidden, "access_level": "sensitive"}, {**tagged, "content": DEPLOY}]
        patches[1]["access_level"] = "agent"
    for number, patch in enumerate(patches, start=1):
        headers = {**boss, "If-Match": f'"{number}"'}
        response = await store.client.patch(
            f"/v1/memories/{record_id}", json=patch, headers=headers
        )
        assert response.status_code == 200, response.text
    await store.kernel.events.settled()
    body = {"type": "belief", "content": DEPLOY_NEWER, "event_time": "2025-04-10T09:00:00+00:00"}
    newer = await store.client.post("/v1/memories", json=body, headers=writer)
    await store.kernel.events.settled()
    out: list[Any] = [newer.status_code, newer.json()]
    for read in (record_id, newer.json()["record_id"]):
        chain = await store.client.get(f"/v1/memories/{read}/versions", headers=writer)
        out.append(chain.json())
    return out


async def test_a_content_change_hidden_from_a_records_readers_lends_it_no_standing(
    twin_a: Store, twin_b: Store
) -> None:
    """The standard writer's deploy target; the trusted agent tags it (a change of metadata,
    which lends no standing). In store B the trusted agent first wrote a version of another
    content at ``sensitive``, then the writer's content back at agent level with the tag: the
    writer sees the same two versions in both stores. Its newer value then superseded its
    record in store A, and in store B was refused as a standard agent's claim against a
    trusted agent's content (its own record challenged instead): the standing came from the
    version the writer may not read. A record's standing and content now come from the
    versions every reader of its head may read."""
    a = normalised(await _deploy_target(twin_a, interlude=False))
    b = normalised(await _deploy_target(twin_b, interlude=True))
    assert not differences(a, b)
    assert a[0] == 201
    assert a[2]["versions"][-1]["event_time_end"] is not None  # superseded: validity ended


async def _tagged_decay(store: Store, *, interlude: bool) -> float:
    """The decay score the writer reads of its deploy target, tagged by the trusted agent
    (store B: after a version of another content at ``sensitive``), once decay is refreshed."""
    await store.agent("boss", TrustLevel.TRUSTED, writes_per_minute=FAST)
    await store.agent("writer", TrustLevel.STANDARD, writes_per_minute=FAST)
    body = {"type": "belief", "content": DEPLOY, "event_time": MARCH}
    created = await store.client.post("/v1/memories", json=body, headers=store.headers["writer"])
    record_id = created.json()["record_id"]
    tagged = {"content": DEPLOY, "metadata": {"tags": ["web"]}, "event_time": MARCH}
    patches = [tagged]
    if interlude:
        hidden = {"content": "The deploy target for the web app is v9.9.", "event_time": MARCH}
        patches = [{**hidden, "access_level": "sensitive"}, {**tagged, "access_level": "agent"}]
    for number, patch in enumerate(patches, start=1):
        headers = {**store.headers["boss"], "If-Match": f'"{number}"'}
        response = await store.client.patch(
            f"/v1/memories/{record_id}", json=patch, headers=headers
        )
        assert response.status_code == 200, response.text
    await store.kernel.temporal.refresh_decay()
    read = await store.client.get(f"/v1/memories/{record_id}", headers=store.headers["writer"])
    return round(float(read.json()["decay_score"]), 2)


async def test_a_version_hidden_from_a_records_readers_does_not_move_its_decay(
    twin_a: Store, twin_b: Store
) -> None:
    """The same two versions for the writer in both stores (its deploy target, then the
    trusted agent's tag on it). Layer 2's importance, which the decay score every reader sees
    starts from, counts novelty against the nearest record at the version's level, its own
    record's head included: in store A that head held the same content (novelty 0), in store
    B the head was the hidden version of another content, left out as above the tag's level
    (novelty from the other records): the writer read 0.50 in A and 0.70 in B. A version's
    novelty is now measured against the other records only: what it replaces of its own
    record is no part of how new it is."""
    assert await _tagged_decay(twin_a, interlude=False) == await _tagged_decay(
        twin_b, interlude=True
    )
