"""The consolidation engine against the embedded database and the real model (ADR-018)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg
import pytest

from engram import Kernel
from engram.errors import ConsolidationConflict, NotFound, PermissionDenied, Quarantine
from engram.memory.consolidation import (
    ConsolidationAction,
    ConsolidationTrigger,
    SkipReason,
)
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    ConsolidationPath,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    TrustLevel,
)
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import (
    DAY,
    DEEP,
    INCIDENT,
    LATE_ETL,
    engine_with,
    head_of,
)
from tests.integration.gate_helpers import BOSS, EXTERNAL, OTHER

ROTATION = [
    (
        "Rotated the Stripe key: generated a new key in the Stripe dashboard, stored it with "
        "vault kv put secret/payments/stripe, restarted payments-worker, checked /healthz, "
        "revoked the old key."
    ),
    (
        "Stripe key rotation again: new key from the Stripe dashboard, vault kv put "
        "secret/payments/stripe, restarted payments-worker, /healthz returned 200, old key "
        "revoked."
    ),
    (
        "Quarterly Stripe key rotation: generated the key in the Stripe dashboard, vault kv "
        "put secret/payments/stripe, rolling restart of payments-worker, checked /healthz, "
        "revoked the previous key."
    ),
]
VERBOSE = (
    "Hi all, just a quick note, and sorry that it is a long one: the minus-80 freezer F3 is "
    "going to be defrosted on 2026-07-15, so 2026-07-15, in the morning. Everything that is in "
    "freezer F3 has to be moved into F5, into rack B of F5, rack B, because rack A is full. By "
    "my count there are 46 boxes, so 46 boxes that need to move, and we have ordered 30 kg of "
    "dry ice, 30 kg, to keep things cold while they move. So, again, in summary, to make it "
    "clear: freezer F3, defrost on 2026-07-15, move 46 boxes to F5 rack B, 30 kg of dry ice. "
    "If your boxes are not labelled with your name, please label them, otherwise they may get "
    "mixed up with the boxes of the other group, which would be a problem for everybody."
)
UNRELATED = "Booked a table for six at Osteria Lupo for Friday at 19:30 for the team dinner."


def _episode(content: str, when: datetime, **fields: Any) -> MemoryRecord:
    fields.setdefault("source_agent", BOSS.agent_id)
    return MemoryRecord.draft(MemoryType.EPISODE, content, event_time=when, **fields)


async def _write(kernel: Kernel, record: MemoryRecord, caller: CallerIdentity = BOSS) -> GateResult:
    result = await kernel.gate.evaluate(
        GateRequest(GateAction.CREATE, record, caller, GateDecisionType.EXTERNAL)
    )
    assert result.record_id is not None, result.reason
    return result


async def _seed(
    kernel: Kernel,
    texts: list[str],
    start: datetime,
    *,
    callers: tuple[CallerIdentity, ...] = (BOSS,),
    **fields: Any,
) -> list[UUID]:
    ids = []
    for n, text in enumerate(texts):
        caller = callers[n % len(callers)]
        fields["source_agent"] = caller.agent_id
        record = _episode(text, start + timedelta(days=n), **fields)
        result = await _write(kernel, record, caller)
        assert result.record_id is not None
        ids.append(result.record_id)
    return ids


async def _live(kernel: Kernel) -> dict[UUID, tuple[str, str, str]]:
    """Every record an unrestricted reader sees now (without consolidated ones)."""
    records = await kernel.admin_temporal.query(limit=10_000)
    return {r.record_id: (r.content, r.status.value, r.access_level.value) for r in records}


async def test_each_action_makes_its_record_through_the_gate(kernel: Kernel) -> None:
    """Merge, promote, skill and compress each produce one slow-path record, audited as a
    consolidation CREATE that cites (derived_from) every source; sources become
    consolidated versions and an unrelated record is left alone."""
    incident = await _seed(kernel, INCIDENT, DAY)
    etl = await _seed(kernel, LATE_ETL, DAY + timedelta(days=40), callers=(BOSS, OTHER))
    rotation = await _seed(kernel, ROTATION, DAY + timedelta(days=90))
    verbose = await _seed(kernel, [VERBOSE], DAY + timedelta(days=150))
    lonely = await _seed(kernel, [UNRELATED], DAY + timedelta(days=200))

    report = await kernel.consolidation.run(DEEP)

    items = {item.action: item for batch in report.batches for item in batch.items}
    assert set(items) == set(ConsolidationAction)
    assert set(items[ConsolidationAction.MERGE].sources) == set(incident)
    assert set(items[ConsolidationAction.PROMOTE].sources) == set(etl)
    assert set(items[ConsolidationAction.SKILL].sources) == set(rotation)
    assert list(items[ConsolidationAction.COMPRESS].sources) == verbose
    assert (await head_of(kernel, lonely[0])).status is MemoryStatus.ACTIVE
    expected_types = {
        ConsolidationAction.MERGE: MemoryType.EPISODE,
        ConsolidationAction.PROMOTE: MemoryType.BELIEF,
        ConsolidationAction.SKILL: MemoryType.SKILL,
        ConsolidationAction.COMPRESS: MemoryType.EPISODE,
    }
    for action, item in items.items():
        made = await head_of(kernel, item.record_id)
        assert made.type is expected_types[action]
        assert made.consolidation_path is ConsolidationPath.SLOW
        assert made.gate_decision_type is GateDecisionType.CONSOLIDATION
        assert set(made.evidence_links) == set(item.source_versions)
        targets = await kernel.db.fetch(
            "SELECT target_id FROM memory_edges WHERE source_id = $1 AND kind = 'derived_from'",
            made.id,
        )
        assert {row["target_id"] for row in targets} == set(item.source_versions)
        entry = await kernel.audit.by_decision(made.gate_decision_id)  # type: ignore[arg-type]
        assert entry is not None
        assert ("CREATE", "consolidation", "approved") == (
            entry.action,
            entry.decision_type,
            entry.decision,
        )
        for source in item.sources:
            head = await head_of(kernel, source)
            assert (head.status, head.version) == (MemoryStatus.CONSOLIDATED, 2)
            assert head.consolidation_path is ConsolidationPath.FAST
    merged = await head_of(kernel, items[ConsolidationAction.MERGE].record_id)
    for fact in ("02:10", "checkout-api", "v4.2.0", "02:31", "20", "v4.3.0"):
        assert fact in merged.content
    lines = merged.content.splitlines()
    assert lines == sorted(lines)  # each moment dated, in event-time order
    belief = await head_of(kernel, items[ConsolidationAction.PROMOTE].record_id)
    sightings = [await head_of(kernel, source) for source in etl]
    # two agents saw it: more sure than either alone (one agent's repeats would not count)
    assert belief.source_confidence > max(s.source_confidence for s in sightings) + 0.1
    skill = await head_of(kernel, items[ConsolidationAction.SKILL].record_id)
    assert any("secret/payments/stripe" in step for step in skill.metadata["steps"])
    compressed = await head_of(kernel, verbose[0])
    made = await head_of(kernel, items[ConsolidationAction.COMPRESS].record_id)
    assert len(made.content.split()) < len(compressed.content.split())
    for fact in ("F3", "2026-07-15", "F5", "46 boxes", "30 kg"):
        assert fact in made.content
    listing = await _live(kernel)
    assert not set(incident) & set(listing)  # consolidated sources are hidden by default
    assert items[ConsolidationAction.MERGE].record_id in listing
    samples = {
        s.name: s.value
        for metric in kernel.metrics.registry.collect()
        for s in metric.samples
        if s.name == "engram_consolidation_duration_seconds_count"
        and s.labels.get("trigger") == "scheduled_deep"
    }
    assert samples == {"engram_consolidation_duration_seconds_count": 1.0}


async def test_a_second_pass_finds_nothing_left_to_do(kernel: Kernel) -> None:
    """Consolidated sources and slow-path records are not candidates again."""
    await _seed(kernel, INCIDENT, DAY)
    first = await kernel.consolidation.run(DEEP)
    assert len(first.created) == 1
    again = await kernel.consolidation.run(DEEP)
    assert (again.created, again.consumed) == ([], [])


async def test_a_failure_in_the_batch_rolls_all_of_it_back(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """The batch row is written last in the batch's transaction; when the database refuses it
    (privilege revoked: a real error, not a patched method), no record, edge, status change or
    audit row of the batch remains. With the privilege back, the same pass succeeds."""
    sources = await _seed(kernel, INCIDENT, DAY)
    before = await _live(kernel)
    audited = await kernel.audit.count()
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute("REVOKE INSERT ON engram.consolidation_batches FROM engram_runtime")
        with pytest.raises(PermissionDenied):
            await kernel.consolidation.run(DEEP)
        assert before == await _live(kernel)
        assert audited == await kernel.audit.count()
        for source in sources:
            assert (await head_of(kernel, source)).version == 1
        assert 0 == await admin.fetchval(
            "SELECT count(*) FROM engram.memories WHERE consolidation_path = 'slow'"
        )
        assert 0 == await admin.fetchval(
            "SELECT count(*) FROM engram.memory_edges WHERE kind = 'derived_from'"
        )
        await admin.execute("GRANT INSERT ON engram.consolidation_batches TO engram_runtime")
    finally:
        await admin.close()
    report = await kernel.consolidation.run(DEEP)
    assert set(report.consumed) == set(sources)


async def test_a_source_updated_during_the_pass_is_skipped_not_overwritten(
    kernel: Kernel,
) -> None:
    """A topic whose source an agent changes after planning is left for the next run; the
    agent's version stands; the other topics of the batch commit."""
    incident = await _seed(kernel, INCIDENT, DAY)
    etl = await _seed(kernel, LATE_ETL, DAY + timedelta(days=40))
    planned = await kernel.consolidation.evaluate_candidates()
    assert len(planned) == 2
    changed = MemoryRecord.draft(
        MemoryType.EPISODE,
        "Paged at 02:12 (not 02:10) for checkout-api: p99 latency above 2 s.",
        record_id=incident[0],
        source_agent=BOSS.agent_id,
        event_time=DAY,
    )
    result = await kernel.gate.evaluate(
        GateRequest(GateAction.UPDATE, changed, BOSS, EXTERNAL, expected_version=1)
    )
    assert result.version == 2

    batches = await kernel.consolidation.commit(planned, trigger=DEEP)

    assert sum(b.skipped.get(SkipReason.SOURCE_CHANGED.value, 0) for b in batches) == 3
    consumed = {s for b in batches for s in b.consumed}
    assert consumed == set(etl)
    head = await head_of(kernel, incident[0])
    assert (head.version, head.status, head.content) == (2, MemoryStatus.ACTIVE, changed.content)
    for source in incident[1:]:
        assert (await head_of(kernel, source)).status is MemoryStatus.ACTIVE
    later = await kernel.consolidation.run(DEEP)  # the next run takes the topic up again
    assert set(later.consumed) == set(incident)


async def test_rollback_restores_the_live_set_and_is_audited(kernel: Kernel) -> None:
    """After a rollback the live set equals the one before the batch; the summary is
    forgotten (its history kept); a second rollback and an unknown batch are refused."""
    await _seed(kernel, INCIDENT, DAY)
    await _seed(kernel, LATE_ETL, DAY + timedelta(days=40))
    before = await _live(kernel)
    report = await kernel.consolidation.run(DEEP)
    (batch,) = report.batches
    assert before != await _live(kernel)

    undone = await kernel.consolidation.rollback(batch.batch_id)

    assert before == await _live(kernel)
    assert set(undone.restored) == set(batch.consumed)
    assert set(undone.retired) == set(batch.created)
    for created in batch.created:
        assert (await head_of(kernel, created)).status is MemoryStatus.FORGOTTEN
    shown = await kernel.consolidation.batch(batch.batch_id)
    assert shown.rolled_back_at is not None
    with pytest.raises(ConsolidationConflict):
        await kernel.consolidation.rollback(batch.batch_id)
    with pytest.raises(NotFound):
        await kernel.consolidation.rollback(UUID(int=7))
    actions = await kernel.db.fetch(
        "SELECT action, count(*) AS n FROM librarian_audit "
        "WHERE decision_type = 'consolidation' GROUP BY action"
    )
    # 2 summaries + 7 sources consolidated; 2 forgotten + 7 restored
    assert {(r["action"], r["n"]) for r in actions} == {
        ("CREATE", 2),
        ("UPDATE", 14),
        ("FORGET", 2),
    }


async def test_quarantined_sources_make_a_sensitive_summary_of_their_own(
    kernel: Kernel,
) -> None:
    """Topics never span access levels: the two quarantined sources of a thread are merged
    into a `sensitive` record, the clean one is left alone for its readers (ADR-018)."""
    texts = list(INCIDENT)
    texts[1] += " Escalated to the on-call lead at jana.novak@example.com."
    texts[2] += " Ticket owner: jana.novak@example.com."
    ids = await _seed(kernel, texts, DAY)
    levels = [(await head_of(kernel, i)).access_level for i in ids]
    assert levels == [AccessLevel.AGENT, AccessLevel.SENSITIVE, AccessLevel.SENSITIVE]
    report = await kernel.consolidation.run(DEEP)
    (made,) = report.created
    assert set(report.consumed) == set(ids[1:])
    assert (await head_of(kernel, made)).access_level is AccessLevel.SENSITIVE
    assert (await head_of(kernel, ids[0])).status is MemoryStatus.ACTIVE
    admin = CallerIdentity.system("cli:test-admin")
    with pytest.raises(Quarantine, match="consolidated"):  # its readers would get nothing
        await kernel.quarantine.release(ids[1], admin=admin, reason="shared address")
    await kernel.quarantine.release(made, admin=admin, reason="shared address")
    reader = caller_for_tier("after-release", TrustLevel.STANDARD)
    chain = await kernel.temporal.get_version_chain(made, caller=reader)
    assert "jana.novak@example.com" in chain[-1].content


async def test_as_of_reads_before_the_batch_still_see_the_sources(kernel: Kernel) -> None:
    """Bi-temporal: before the batch the sources are active and the summary unknown."""
    sources = await _seed(kernel, INCIDENT, DAY)
    await asyncio.sleep(0.01)
    instant = datetime.now(UTC)
    await asyncio.sleep(0.01)
    report = await kernel.consolidation.run(DEEP)
    (made,) = report.created
    then = {r.record_id: r for r in await kernel.admin_temporal.query(as_of_ingestion=instant)}
    assert set(sources) <= set(then)
    assert all(then[s].version == 1 for s in sources), [then[s].status for s in sources]
    assert made not in then
    now = {r.record_id for r in await kernel.admin_temporal.query()}
    assert made in now
    assert not set(sources) & now
    chain = await kernel.admin_temporal.get_version_chain(sources[0])
    assert [v.status for v in chain] == [MemoryStatus.SUPERSEDED, MemoryStatus.CONSOLIDATED]


async def test_audit_state_and_replay_agree_after_consolidation_and_rollback(
    kernel: Kernel,
) -> None:
    """The audit log rebuilds the store's live set, and replay changes no decision, after a
    pass and after its rollback."""
    await _seed(kernel, INCIDENT, DAY)
    await _seed(kernel, ROTATION, DAY + timedelta(days=30))
    report = await kernel.consolidation.run(DEEP)
    state = await kernel.audit_state.compare(datetime.now(UTC))
    assert state.ok, [d.to_json() for d in state.differences]
    replayed = await kernel.replay.replay()
    assert [] == [d.to_json() for d in replayed.changed]
    for batch in report.batches:
        await kernel.consolidation.rollback(batch.batch_id)
    state = await kernel.audit_state.compare(datetime.now(UTC))
    assert state.ok, [d.to_json() for d in state.differences]
    replayed = await kernel.replay.replay()
    assert [] == [d.to_json() for d in replayed.changed]


async def test_dry_run_writes_nothing(kernel: Kernel) -> None:
    """A dry run plans and reports, and changes nothing."""
    await _seed(kernel, INCIDENT, DAY)
    audited = await kernel.audit.count()
    report = await kernel.consolidation.run(DEEP, dry_run=True)
    assert report.dry_run
    assert len(report.planned) == 1
    assert (report.batches, await kernel.audit.count()) == ((), audited)


async def test_a_reader_walks_from_a_summary_to_its_evidence(kernel: Kernel) -> None:
    """Each id a consolidated record cites opens its source's history, also when it names a
    later version of the source (not the record id), for a reader who may read the summary."""
    ids = await _seed(kernel, INCIDENT, DAY)
    corrected = MemoryRecord.draft(
        MemoryType.EPISODE,
        INCIDENT[0].replace("02:10", "02:12"),
        record_id=ids[0],
        source_agent=BOSS.agent_id,
        event_time=DAY,
    )
    result = await kernel.gate.evaluate(
        GateRequest(GateAction.UPDATE, corrected, BOSS, EXTERNAL, expected_version=1)
    )
    assert result.modified_record is not None
    await kernel.events.settled()
    report = await kernel.consolidation.run(DEEP)
    (made,) = report.created
    summary = await head_of(kernel, made)
    assert result.modified_record.id in summary.evidence_links
    reader = caller_for_tier("walker", TrustLevel.STANDARD)
    for cited in summary.evidence_links:
        chain = await kernel.temporal.get_version_chain(cited, caller=reader)
        assert chain, cited
        assert cited in {version.id for version in chain}
        assert chain[-1].status is MemoryStatus.CONSOLIDATED


async def test_each_trigger_covers_what_it_says(kernel: Kernel) -> None:
    """Event-driven acts only on topics of at least the threshold, pressure-driven only over
    the fast-path limit, light only on records ingested within its window."""
    small = await _seed(kernel, INCIDENT, DAY)  # a topic of 3
    big = await _seed(kernel, [*LATE_ETL, LATE_ETL[0].replace("06:40", "06:45")], DAY)  # of 5
    await kernel.events.settled()
    event = await engine_with(kernel, event_threshold=5).run(ConsolidationTrigger.EVENT_DRIVEN)
    assert set(event.consumed) == set(big)
    assert event.skipped == {SkipReason.TOO_FEW.value: len(small)}
    calm = await engine_with(kernel, fast_path_limit=10).run(ConsolidationTrigger.PRESSURE_DRIVEN)
    assert (calm.consumed, calm.skipped) == ([], {SkipReason.UNDER_LIMIT.value: len(small)})
    light = await engine_with(kernel, light_window=timedelta(microseconds=1)).run(
        ConsolidationTrigger.SCHEDULED_LIGHT
    )
    assert (light.candidates, light.consumed) == (0, [])
    pressed = await engine_with(kernel, fast_path_limit=2).run(ConsolidationTrigger.PRESSURE_DRIVEN)
    assert set(pressed.consumed) == set(small)


async def test_a_backend_killed_mid_batch_leaves_nothing_half_done(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """The batch's backend is terminated (pg_terminate_backend) while it is inside the batch,
    between writes: nothing of the batch is visible meanwhile or after the kill; the adapter
    runs the transaction again, and the batch lands exactly once."""
    sources = await _seed(kernel, INCIDENT, DAY)
    await kernel.events.settled()
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute(
            "CREATE FUNCTION engram.slow_edge() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(5); RETURN NEW; END $$"
        )
        await admin.execute(
            "CREATE TRIGGER slow_edge BEFORE INSERT ON engram.memory_edges FOR EACH ROW "
            "WHEN (NEW.kind = 'derived_from') EXECUTE FUNCTION engram.slow_edge()"
        )
        running = asyncio.ensure_future(kernel.consolidation.run(DEEP))
        pid = None
        for _ in range(500):
            pid = await admin.fetchval(
                "SELECT pid FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
                "AND datname = current_database()"
            )
            if pid is not None:
                break
            await asyncio.sleep(0.01)
        assert pid is not None, "the batch never reached its derived_from edges"
        # mid-batch: the summary row is written inside the open transaction, unseen outside
        assert 0 == await admin.fetchval(
            "SELECT count(*) FROM engram.memories WHERE consolidation_path = 'slow'"
        )
        await admin.execute("DROP TRIGGER slow_edge ON engram.memory_edges")
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        report = await running
    finally:
        await admin.close()
    assert set(report.consumed) == set(sources)
    assert len(report.created) == 1
    assert 1 == await kernel.db.fetchval(
        "SELECT count(*) FROM memories WHERE consolidation_path = 'slow'"
    )
    for source in sources:
        chain = await kernel.admin_temporal.get_version_chain(source)
        assert [v.status for v in chain] == [MemoryStatus.SUPERSEDED, MemoryStatus.CONSOLIDATED]
    state = await kernel.audit_state.compare(datetime.now(UTC))
    assert state.ok, [d.to_json() for d in state.differences]
    assert (await kernel.audit.verify()).ok


class _Ticking:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now - 1.0


async def test_a_pass_out_of_time_keeps_what_it_committed(kernel: Kernel) -> None:
    """A pass past its time limit starts no new batch: the batch it committed stays, the rest
    is skipped as timed_out, and a later pass consolidates it. Reads of the injected clock:
    the pass's start (0), one per topic while planning (1, 2), one per batch (3, then 4 past
    the agent level's deadline, 0.85 of 4 s)."""
    incident = await _seed(kernel, INCIDENT, DAY)
    etl = await _seed(kernel, LATE_ETL, DAY + timedelta(days=40), callers=(BOSS, OTHER))
    await kernel.events.settled()
    hurried = engine_with(kernel, batch_size=3, max_seconds=4.0, clock=_Ticking())
    report = await hurried.run(DEEP)
    assert set(report.consumed) == set(incident)
    assert report.skipped == {SkipReason.TIMED_OUT.value: len(etl)}
    later = await kernel.consolidation.run(DEEP)
    assert set(later.consumed) == set(etl)
