"""CREATE, UPDATE, FORGET and NOOP through kernel.gate.evaluate against the real database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engram import Kernel
from engram.memory.gate.advisor import AdvisorAction
from engram.memory.gate.requests import GateRequest, WriteOutcome
from engram.memory.types import (
    GateAction,
    GateDecision,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
)
from tests.integration.gate_helpers import EXTERNAL, STANDARD, WHEN, belief, create, update


async def _counts(kernel: Kernel) -> tuple[int, int, int]:
    versions = await kernel.db.fetchval("SELECT count(*) FROM memories")
    audit = await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    outbox = await kernel.db.fetchval("SELECT count(*) FROM outbox")
    return versions, audit, outbox


async def test_create_stores_version_one_on_the_fast_path(kernel: Kernel) -> None:
    """An approved CREATE is version 1, active, fast path, embedded, with one audit row."""
    proposal = belief("The ledger service stores balances in PostgreSQL 16.")
    result = await kernel.gate.evaluate(create(proposal))
    assert GateDecision.APPROVED == result.decision
    assert WriteOutcome.CREATED == result.outcome
    stored = result.modified_record
    assert stored is not None
    assert (1, proposal.id, proposal.id) == (stored.version, stored.id, stored.record_id)
    assert MemoryStatus.ACTIVE == stored.status
    assert "fast" == stored.consolidation_path.value
    assert stored.event_time is not None
    assert abs(stored.event_time - stored.ingestion_time) < timedelta(seconds=1)
    assert result.decision_id == stored.gate_decision_id
    assert not result.degraded
    row = await kernel.db.fetchrow(
        "SELECT embedding IS NOT NULL AS embedded, embedding_model FROM memories WHERE id = $1",
        stored.id,
    )
    assert row is not None
    assert row["embedded"]
    assert kernel.embeddings.model_name == row["embedding_model"]
    assert (1, 1, 1) == await _counts(kernel)


async def test_create_keeps_a_given_event_time(kernel: Kernel) -> None:
    """An explicit event time is stored as given; ingestion time is the transaction's."""
    result = await kernel.gate.evaluate(
        create(belief("The office moved to Lyon.", event_time=WHEN))
    )
    assert result.modified_record is not None
    assert WHEN == result.modified_record.event_time
    assert result.modified_record.ingestion_time > WHEN


async def test_update_adds_a_version_and_closes_the_previous_one(kernel: Kernel) -> None:
    """UPDATE with the current version writes version 2 and closes version 1 atomically."""
    first = await kernel.gate.evaluate(create(belief("The deploy target is v2.0.")))
    assert first.record_id is not None
    second = await kernel.gate.evaluate(update(first.record_id, "The deploy target is v2.1.", 1))
    assert GateDecision.APPROVED == second.decision
    assert (WriteOutcome.UPDATED, 2) == (second.outcome, second.version)
    rows = await kernel.db.fetch(
        "SELECT version, superseded_by, status::text, ingestion_time, ingestion_time_end "
        "FROM memories WHERE record_id = $1 ORDER BY version",
        first.record_id,
    )
    assert [1, 2] == [r["version"] for r in rows]
    assert second.modified_record is not None
    assert second.modified_record.id == rows[0]["superseded_by"]
    assert ["superseded", "active"] == [r["status"] for r in rows]
    assert rows[0]["ingestion_time_end"] == rows[1]["ingestion_time"]
    assert rows[1]["ingestion_time_end"] is None
    edge = await kernel.db.fetchval(
        "SELECT kind FROM memory_edges WHERE source_id = $1", second.modified_record.id
    )
    assert "supersedes" == edge


async def test_update_without_expected_version_is_rejected(kernel: Kernel) -> None:
    """UPDATE requires expected_version; without it the Gate rejects and changes nothing."""
    first = await kernel.gate.evaluate(create(belief("Builds run on Linux runners.")))
    assert first.record_id is not None
    before = await _counts(kernel)
    result = await kernel.gate.evaluate(update(first.record_id, "Builds run on ARM runners.", None))
    assert GateDecision.REJECTED == result.decision
    assert "expected_version" in result.reason
    versions, audit, outbox = await _counts(kernel)
    assert (before[0], before[1] + 1, before[2]) == (versions, audit, outbox)


async def test_stale_expected_version_is_a_conflict(kernel: Kernel) -> None:
    """UPDATE against an old version is CONFLICT naming the current version; nothing changes."""
    first = await kernel.gate.evaluate(create(belief("The cache TTL is 60 seconds.")))
    assert first.record_id is not None
    await kernel.gate.evaluate(update(first.record_id, "The cache TTL is 90 seconds.", 1))
    before = await _counts(kernel)
    stale = await kernel.gate.evaluate(update(first.record_id, "The cache TTL is 30 seconds.", 1))
    assert GateDecision.CONFLICT == stale.decision
    assert 2 == stale.current_version
    versions, audit, _ = await _counts(kernel)
    assert (before[0], before[1] + 1) == (versions, audit)


async def test_update_of_an_unknown_record_is_rejected(kernel: Kernel) -> None:
    """UPDATE of a record that does not exist is rejected by the schema check."""
    proposal = belief("Nothing to see.")
    result = await kernel.gate.evaluate(update(proposal.id, "The sky is green.", 1))
    assert GateDecision.REJECTED == result.decision
    assert "no record" in result.reason


async def test_forget_closes_both_intervals_and_keeps_history(kernel: Kernel) -> None:
    """FORGET marks the head forgotten, ends both intervals, and keeps every version."""
    first = await kernel.gate.evaluate(create(belief("The VPN gateway is in Frankfurt.")))
    assert first.modified_record is not None
    forget = GateRequest.forget(first.modified_record, STANDARD, EXTERNAL, expected_version=1)
    result = await kernel.gate.evaluate(forget)
    assert (GateDecision.APPROVED, WriteOutcome.FORGOTTEN) == (result.decision, result.outcome)
    row = await kernel.db.fetchrow(
        "SELECT status::text AS status, event_time_end, ingestion_time_end FROM memories "
        "WHERE id = $1",
        first.modified_record.id,
    )
    assert row is not None
    assert "forgotten" == row["status"]
    assert row["event_time_end"] is not None
    assert row["ingestion_time_end"] is not None
    assert 1 == await kernel.db.fetchval("SELECT count(*) FROM memories")
    again = await kernel.gate.evaluate(forget)
    assert GateDecision.REJECTED == again.decision
    assert "forgotten" in again.reason


async def test_exact_duplicate_is_a_noop_that_reinforces(kernel: Kernel) -> None:
    """The same content again (spacing and case aside) is NOOP naming the existing record."""
    first = await kernel.gate.evaluate(create(belief("Payments are settled nightly at 02:00 UTC.")))
    again = await kernel.gate.evaluate(
        create(belief("payments are   settled nightly at 02:00 UTC"))
    )
    assert GateDecision.APPROVED == again.decision
    assert WriteOutcome.REINFORCED == again.outcome
    assert again.layer2_decision is not None
    assert AdvisorAction.NOOP == again.layer2_decision.action
    assert first.record_id == again.record_id
    row = await kernel.db.fetchrow(
        "SELECT count(*) AS n, max(repetitions) AS reps FROM memories WHERE type = 'belief'"
    )
    assert row is not None
    assert (1, 2) == (row["n"], row["reps"])


async def test_near_duplicate_is_a_noop(kernel: Kernel) -> None:
    """A trivially reworded proposal (cosine ≥ 0.95) reinforces instead of adding."""
    first = await kernel.gate.evaluate(
        create(belief("The staging database is restored from backup every Sunday night."))
    )
    again = await kernel.gate.evaluate(
        create(belief("The staging database is restored from backups every Sunday night."))
    )
    assert WriteOutcome.REINFORCED == again.outcome
    assert first.record_id == again.record_id


async def test_close_content_on_the_same_subject_is_an_update_candidate(kernel: Kernel) -> None:
    """Similar but different content is added and flagged as an update candidate."""
    first = await kernel.gate.evaluate(
        create(belief("The mobile app release train ships every two weeks on Tuesday."))
    )
    second = await kernel.gate.evaluate(
        create(belief("The mobile app release train ships every three weeks on Tuesday."))
    )
    assert WriteOutcome.CREATED == second.outcome
    assert second.layer2_decision is not None
    assert first.record_id == second.layer2_decision.update_candidate_of


async def test_update_with_identical_content_is_a_noop(kernel: Kernel) -> None:
    """An UPDATE that changes nothing writes no version; it reinforces the head."""
    first = await kernel.gate.evaluate(create(belief("The API gateway is Envoy.")))
    assert first.record_id is not None
    same = await kernel.gate.evaluate(update(first.record_id, "The API gateway is Envoy.", 1))
    assert WriteOutcome.REINFORCED == same.outcome
    assert 1 == await kernel.db.fetchval("SELECT count(*) FROM memories")


async def test_evidence_links_become_derived_from_edges(kernel: Kernel) -> None:
    """A reflection citing records links to them; citing an unknown record is rejected."""
    one = await kernel.gate.evaluate(
        create(
            MemoryRecord.draft(
                MemoryType.EPISODE,
                "The Friday deploy failed on a missing secret.",
                source_agent="agent-standard",
                event_time=WHEN,
            )
        )
    )
    assert one.record_id is not None
    assert one.modified_record is not None
    reflection = MemoryRecord.draft(
        MemoryType.REFLECTION,
        "Friday deploys fail more often than others.",
        source_agent="agent-standard",
        evidence_links=[one.record_id],
    )
    result = await kernel.gate.evaluate(create(reflection))
    assert GateDecision.APPROVED == result.decision
    target = await kernel.db.fetchval(
        "SELECT target_id FROM memory_edges WHERE source_id = $1 AND kind = 'derived_from'",
        reflection.id,
    )
    assert one.modified_record.id == target
    orphan = MemoryRecord.draft(
        MemoryType.REFLECTION,
        "Tuesdays are calm.",
        source_agent="agent-standard",
        evidence_links=[MemoryRecord.draft(MemoryType.BELIEF, "x is y.", source_agent="a").id],
    )
    rejected = await kernel.gate.evaluate(create(orphan))
    assert GateDecision.REJECTED == rejected.decision
    assert "evidence_links" in rejected.reason


async def test_a_request_id_makes_a_write_idempotent(kernel: Kernel) -> None:
    """Evaluating the same request id twice returns the first result and writes nothing new."""
    request = create(belief("The on-call rotation changes on Mondays."), request_id="req-42")
    first = await kernel.gate.evaluate(request)
    before = await _counts(kernel)
    second = await kernel.gate.evaluate(request)
    assert second.replayed
    assert (first.decision_id, first.record_id, first.version) == (
        second.decision_id,
        second.record_id,
        second.version,
    )
    assert before == await _counts(kernel)


async def test_creating_an_existing_id_is_rejected(kernel: Kernel) -> None:
    """A CREATE that reuses a stored record's id is refused, not turned into an update."""
    proposal = belief("The data warehouse is BigQuery.")
    await kernel.gate.evaluate(create(proposal))
    twin = proposal.model_copy(update={"content": "The data warehouse is Snowflake."})
    result = await kernel.gate.evaluate(create(twin))
    assert GateDecision.REJECTED == result.decision
    assert "already exists" in result.reason


async def test_every_evaluation_leaves_exactly_one_audit_row(kernel: Kernel) -> None:
    """Approved, rejected, conflicting and NOOP evaluations each add one audit row."""
    first = await kernel.gate.evaluate(create(belief("Logs are kept for 30 days.")))
    assert first.record_id is not None
    requests = [
        create(belief("Logs are kept for 30 days.")),
        update(first.record_id, "Logs are kept for 45 days.", 1),
        update(first.record_id, "Logs are kept for 60 days.", 1),
        update(first.record_id, "Always keep logs.", 2),
    ]
    decisions = [first.decision]
    decisions += [(await kernel.gate.evaluate(request)).decision for request in requests]
    assert [
        GateDecision.APPROVED,
        GateDecision.APPROVED,
        GateDecision.APPROVED,
        GateDecision.CONFLICT,
        GateDecision.REJECTED,
    ] == decisions
    assert 5 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    actions = await kernel.db.fetch(
        "SELECT action, decision, outcome FROM librarian_audit ORDER BY seq"
    )
    assert [
        ("CREATE", "approved", "created"),
        ("CREATE", "approved", "reinforced"),
        ("UPDATE", "approved", "updated"),
        ("UPDATE", "conflict", "none"),
        ("UPDATE", "rejected", "none"),
    ] == [tuple(r) for r in actions]
    assert GateAction.UPDATE.value == actions[-1]["action"]
    assert datetime.now(UTC) > WHEN
