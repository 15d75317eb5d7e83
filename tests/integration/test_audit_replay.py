"""Audit replay (kernel.replay) and the state rebuilt from the audit log (kernel.audit_state)."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID

import asyncpg
import pytest

from engram import Kernel
from engram.errors import ValidationFailed
from engram.memory.admin.replay import ReplayPolicy, load_policy
from engram.memory.audit.state import LiveRecord, compare_states
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.requests import GateRequest, GateResult, WriteOutcome
from engram.memory.types import (
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    TrustLevel,
)
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import EXTERNAL, READ_ONLY, SYSTEM, WHEN, belief, create, update

WRITER = caller_for_tier("replay-writer", TrustLevel.STANDARD, writes_per_minute=1000)
DEFAULT_RATE = caller_for_tier("replay-default-rate", TrustLevel.STANDARD)
SLOW = caller_for_tier("replay-slow", TrustLevel.STANDARD, writes_per_minute=1)

STRICT = """
[layer1]
declarative_types = ["belief", "entity", "reflection", "episode"]

[rate_limit]
standard = 1
"""


@dataclass
class History:
    """Results of the mixed history, by name."""

    results: dict[str, GateResult]

    def record(self, name: str) -> MemoryRecord:
        stored = self.results[name].modified_record
        assert stored is not None
        return stored


async def _evaluate(kernel: Kernel, request: GateRequest) -> GateResult:
    result = await kernel.gate.evaluate(request)
    await asyncio.sleep(0.002)  # distinct instants between decisions
    return result


async def _history(kernel: Kernel) -> History:
    """Approvals, a reinforcement, rejections of every Layer 1 kind, a conflict, an update,
    a forget, a quarantine and its release."""
    done: dict[str, GateResult] = {}
    ledger = "The billing service stores invoices in PostgreSQL."
    done["ledger"] = await _evaluate(kernel, create(belief(ledger), WRITER))
    done["again"] = await _evaluate(kernel, create(belief(ledger), WRITER))
    done["order"] = await _evaluate(
        kernel, create(belief("Always restart the server before deploying."), WRITER)
    )
    done["pii"] = await _evaluate(
        kernel, create(belief("The on-call engineer is reachable at dana@example.com."), WRITER)
    )
    ledger_id = done["ledger"].record_id
    assert ledger_id is not None
    done["update"] = await _evaluate(
        kernel, update(ledger_id, "The billing service stores invoices in CockroachDB.", 1, WRITER)
    )
    done["stale"] = await _evaluate(
        kernel, update(ledger_id, "The billing service stores invoices in MySQL.", 1, WRITER)
    )
    episode = MemoryRecord.draft(
        MemoryType.EPISODE,
        "Run the migration on staging tonight, the team agreed.",
        source_agent=DEFAULT_RATE.agent_id,
        event_time=WHEN,
    )
    done["episode"] = await _evaluate(kernel, create(episode, DEFAULT_RATE))
    done["second"] = await _evaluate(
        kernel, create(belief("The staging cluster runs in eu-west-1."), DEFAULT_RATE)
    )
    done["gone"] = await _evaluate(
        kernel, create(belief("The cache layer uses Redis 7 with persistence off."), WRITER)
    )
    gone = done["gone"].modified_record
    assert gone is not None
    done["forget"] = await _evaluate(kernel, GateRequest.forget(gone, WRITER, EXTERNAL))
    done["slow-1"] = await _evaluate(kernel, create(belief("The VPN uses WireGuard."), SLOW))
    done["slow-2"] = await _evaluate(kernel, create(belief("The wiki runs on Confluence."), SLOW))
    done["reader"] = await _evaluate(kernel, create(belief("The sky is blue."), READ_ONLY))
    done["internal"] = await _evaluate(
        kernel,
        create(
            belief("The nightly backup finishes by 03:00 UTC.", source_agent=SYSTEM.agent_id),
            SYSTEM,
            origin=GateDecisionType.CONSOLIDATION,
        ),
    )
    pii_id = done["pii"].record_id
    assert pii_id is not None
    await kernel.quarantine.reveal(
        admin=SYSTEM, shown="quarantine list", reason="triage", record_ids=[pii_id]
    )
    await kernel.quarantine.release(pii_id, admin=SYSTEM, reason="a work address, not PII")
    await asyncio.sleep(0.002)
    return History(done)


def _expected_shape(history: History) -> None:
    """The history holds the mix the tests rely on."""
    outcomes = {name: (r.decision, r.outcome) for name, r in history.results.items()}
    assert (GateDecision.APPROVED, WriteOutcome.REINFORCED) == outcomes["again"]
    assert GateDecision.REJECTED == outcomes["order"][0]
    assert (GateDecision.APPROVED, WriteOutcome.UPDATED) == outcomes["update"]
    assert GateDecision.CONFLICT == outcomes["stale"][0]
    assert (GateDecision.APPROVED, WriteOutcome.CREATED) == outcomes["episode"]
    assert (GateDecision.APPROVED, WriteOutcome.FORGOTTEN) == outcomes["forget"]
    assert GateDecision.REJECTED == outcomes["slow-2"][0]
    assert GateDecision.REJECTED == outcomes["reader"][0]
    assert (GateDecision.APPROVED, WriteOutcome.CREATED) == outcomes["internal"]


async def _footprint(kernel: Kernel) -> tuple[object, ...]:
    await kernel.temporal.flush_reads()
    row = await kernel.db.fetchrow(
        "SELECT (SELECT count(*) FROM librarian_audit) AS audit,"
        " (SELECT count(*) FROM memories) AS versions,"
        " (SELECT coalesce(sum(repetitions), 0) FROM memories) AS repetitions,"
        " (SELECT max(updated_at) FROM memories) AS updated,"
        " (SELECT count(*) FROM memory_access) AS accessed,"
        " (SELECT count(*) FROM outbox) AS outbox"
    )
    assert row is not None
    return tuple(row.values())


async def test_an_admin_shown_quarantined_content_leaves_one_audited_row(kernel: Kernel) -> None:
    """`reveal` needs a reason and appends one REVEAL row naming the admin, where the content
    was shown and which records; the chain still verifies and the state rebuilt from the log
    is the store's (a reveal changes no record)."""
    history = await _history(kernel)
    pii_id = history.results["pii"].record_id
    with pytest.raises(ValidationFailed, match="must say why"):
        await kernel.quarantine.reveal(admin=SYSTEM, shown="audit export", reason=" \t")
    [row] = await kernel.audit.search(action="REVEAL")
    assert ("approved", "revealed", "triage", SYSTEM.agent_id) == (
        row["decision"],
        row["outcome"],
        row["reason"],
        row["agent_id"],
    )
    assert {"action": "REVEAL", "shown": "quarantine list", "records": [str(pii_id)]} == (
        row["input_snapshot"]
    )
    assert row["record_id"] is None
    assert (await kernel.audit.verify()).ok
    assert (await kernel.audit_state.compare(datetime.now(UTC))).ok


async def test_replay_with_the_default_policy_changes_nothing(kernel: Kernel) -> None:
    """Every recorded decision replays to the same verdict; replay writes nothing."""
    history = await _history(kernel)
    _expected_shape(history)
    before = await _footprint(kernel)
    seen: list[int] = []
    report = await kernel.replay.replay(progress=seen.append)
    assert [] == [d.to_json() for d in report.changed]
    assert ["REVEAL", "RELEASE"] == [d.action for d in report.skipped]
    assert await kernel.audit.count() == len(report.decisions) == seen[-1]
    assert "heuristic@2" == report.advisor
    assert before == await _footprint(kernel)
    body = report.to_json()
    assert (0, 2) == (body["changed"], body["skipped"])


async def test_a_stricter_policy_changes_decisions_and_says_why(
    kernel: Kernel, tmp_path: Path
) -> None:
    """Episodes must now read as statements and default-rate agents write once a minute."""
    history = await _history(kernel)
    before = await _footprint(kernel)
    path = tmp_path / "strict.toml"
    path.write_text(STRICT)
    report = await kernel.replay.replay(policy=load_policy(path))
    changed = {d.decision_id: d for d in report.changed}
    episode = changed[str(history.results["episode"].decision_id)]
    assert ("approved", "rejected") == (episode.recorded.decision, episode.replayed.decision)
    assert ("classification",) == episode.replayed.failed_checks
    assert any("classification" in reason for reason in episode.reasons)
    second = changed[str(history.results["second"].decision_id)]
    assert ("rate_limit",) == second.replayed.failed_checks
    assert any("writes per minute" in reason for reason in second.reasons)
    assert 2 == len(changed)
    assert before == await _footprint(kernel)
    # The same policy as JSON, and a policy with an unknown knob.
    as_json = tmp_path / "strict.json"
    as_json.write_text(
        '{"layer1": {"declarative_types": ["belief", "entity", "reflection", "episode"]},'
        ' "rate_limit": {"standard": 1}}'
    )
    assert load_policy(path) == load_policy(as_json)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text("[advisor]\nnear_duplicat = 0.9\nrelated = 2\n")
    with pytest.raises(ValidationFailed) as caught:
        load_policy(wrong)
    assert 2 == len(caught.value.errors)


async def test_advisor_thresholds_change_layer2_advice(kernel: Kernel) -> None:
    """With the near-duplicate and restatement thresholds at 1 the restated record is no
    longer a NOOP, but an exact duplicate stays one."""
    first = await _evaluate(
        kernel,
        create(belief("The staging database is restored from backup every Sunday night."), WRITER),
    )
    near = await _evaluate(
        kernel,
        create(belief("The staging database is restored from backups every Sunday night."), WRITER),
    )
    assert first.approved
    assert WriteOutcome.REINFORCED == near.outcome
    assert "near duplicate" in near.reason
    never = {"near_duplicate": 1.0, "restatement": 1.0, "plain_restatement": 1.0}
    policy = ReplayPolicy(advisor=replace(ReplayPolicy().advisor, **never))
    report = await kernel.replay.replay(policy=policy)
    [changed] = report.changed
    assert str(near.decision_id) == changed.decision_id
    assert "NOOP" == changed.recorded.advice
    assert changed.replayed is not None
    assert "ADD" == changed.replayed.advice
    assert "heuristic@2+policy" == report.advisor


async def test_the_audit_row_shares_the_version_clock(kernel: Kernel) -> None:
    """A write's occurred_at is its version's ingestion time (the end of it, for FORGET)."""
    created = await _evaluate(kernel, create(belief("The API runs on port 8443."), WRITER))
    record = created.modified_record
    assert record is not None
    entry = await kernel.audit.by_decision(created.decision_id)
    assert entry is not None
    assert record.ingestion_time == entry.occurred_at
    updated = await _evaluate(kernel, update(record.record_id, "The API runs on 9443.", 1, WRITER))
    assert updated.modified_record is not None
    entry = await kernel.audit.by_decision(updated.decision_id)
    assert entry is not None
    assert updated.modified_record.ingestion_time == entry.occurred_at
    forgotten = await _evaluate(
        kernel, GateRequest.forget(updated.modified_record, WRITER, EXTERNAL)
    )
    assert forgotten.modified_record is not None
    entry = await kernel.audit.by_decision(forgotten.decision_id)
    assert entry is not None
    assert forgotten.modified_record.ingestion_time_end == entry.occurred_at


async def test_state_from_the_log_matches_the_temporal_reads(kernel: Kernel) -> None:
    """At the edges of every write, between writes, after updates and after the forget."""
    history = await _history(kernel)
    instants = {datetime(2000, 1, 1, tzinfo=UTC), datetime.now(UTC)}
    for result in history.results.values():
        stored = result.modified_record
        if stored is None or result.outcome is WriteOutcome.REINFORCED:
            continue
        for edge in (stored.ingestion_time, stored.ingestion_time_end):
            if edge is not None:
                instants |= {
                    edge - timedelta(microseconds=1),
                    edge,
                    edge + timedelta(microseconds=1),
                }
    ordered = sorted(instants)
    instants |= {a + (b - a) / 2 for a, b in itertools.pairwise(ordered)}
    for instant in sorted(instants):
        report = await kernel.audit_state.compare(instant)
        assert report.ok, (instant, [d.to_json() for d in report.differences])
    ledger = history.record("update")
    at_update = await kernel.audit_state.from_log(ledger.ingestion_time)
    assert ledger.id == at_update[ledger.record_id].version_id
    just_before = await kernel.audit_state.from_log(
        ledger.ingestion_time - timedelta(microseconds=1)
    )
    assert history.record("ledger").id == just_before[ledger.record_id].version_id
    gone = history.record("forget")
    assert gone.ingestion_time_end is not None
    assert gone.record_id not in await kernel.audit_state.from_log(gone.ingestion_time_end)
    assert gone.record_id in await kernel.audit_state.from_log(
        gone.ingestion_time_end - timedelta(microseconds=1)
    )
    now = await kernel.audit_state.compare(datetime.now(UTC))
    assert 6 == now.live_in_log == now.live_in_store


async def test_a_doctored_store_shows_a_difference(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A record ended behind the Gate's back, and a doctored comparison, are both reported."""
    history = await _history(kernel)
    ledger = history.record("update")
    logged = await kernel.audit_state.from_log(datetime.now(UTC))
    stored = await kernel.audit_state.from_store(datetime.now(UTC))
    assert [] == compare_states(logged, stored)
    doctored = dict(stored)
    doctored[ledger.record_id] = LiveRecord(ledger.record_id, UUID(int=1), "default", "belief")
    [difference] = compare_states(logged, doctored)
    assert "different live versions" in difference.problem
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute(
            "UPDATE engram.memories SET status = 'forgotten', ingestion_time_end = now()"
            " WHERE id = $1",
            ledger.id,
        )
    finally:
        await admin.close()
    report = await kernel.audit_state.compare(datetime.now(UTC) + timedelta(seconds=1))
    assert not report.ok
    [found] = report.differences
    assert (ledger.record_id, None) == (found.record_id, found.from_store)
    assert "absent from the store" in found.problem
