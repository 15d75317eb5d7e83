"""The Gate's one-statement write (engram.memory.gate.at_once, ADR-016).

A new record admitted as it stands goes to PostgreSQL as one statement. These tests check
that it stores what the transactional path stores (version, edges, outbox event, an audit row
whose hash verifies and whose time is the version's), that it answers a reused request id as
that path does, and that the statement writes the audit row's time exactly as Python does
when it verifies the chain. (Retries after killed connections are in
test_gate_origins_and_faults.py, whose writes take both paths.)
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import asyncpg
import pytest

from engram.kernel import Kernel
from engram.memory.gate import at_once, write_path
from engram.memory.types import (
    AccessLevel,
    GateDecision,
    MemoryRecord,
    MemoryType,
    WriteOutcome,
)
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import BOSS, WHEN, WRITER, create


@pytest.fixture
def at_once_calls(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Observe which writes took the one-statement path (behaviour unchanged)."""
    calls: list[bool] = []
    real = at_once.create_at_once

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(True)
        return await real(*args, **kwargs)

    monkeypatch.setattr(write_path, "create_at_once", counted)
    return calls


async def test_isoformat_fragment_writes_times_as_python_does(database: ScratchDatabase) -> None:
    """The audit hash covers occurred_at as Python's isoformat() writes it in UTC; the
    statement writes it itself, so the two must agree, with and without microseconds."""
    fragment = at_once.FRAGMENTS["isoformat_utc"]
    sql = f"SELECT {fragment} FROM (SELECT $1::timestamptz AS ingestion_time) AS v"
    conn = await asyncpg.connect(database.runtime_url)
    try:
        for moment in (
            datetime(2026, 11, 26, 14, 0, 0, tzinfo=UTC),
            datetime(2026, 11, 26, 14, 0, 0, 1, tzinfo=UTC),
            datetime(2026, 11, 26, 14, 0, 0, 500_000, tzinfo=UTC),
            datetime(1999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
            datetime(2030, 1, 1, 0, 30, 0, 120, tzinfo=timezone(timedelta(hours=5))),
            datetime(2026, 3, 29, 1, 59, 59, 10, tzinfo=timezone(timedelta(hours=-7))),
        ):
            expected = moment.astimezone(UTC).isoformat()
            assert expected == await conn.fetchval(sql, moment), moment
    finally:
        await conn.close()


async def test_a_plain_create_is_one_statement_and_stores_what_a_transaction_would(
    kernel: Kernel, at_once_calls: list[bool]
) -> None:
    """An episode, then a reflection citing it: both admitted as they stand, so both are
    written at once. The reflection's ``derived_from`` edge, both outbox events and both
    audit rows are there, each audit row stamped with its version's ingestion time, and the
    chain verifies."""
    episode = MemoryRecord.draft(
        MemoryType.EPISODE,
        "The Friday deploy of the billing service failed on a missing secret.",
        source_agent="agent-standard",
        event_time=WHEN,
    )
    first = await kernel.gate.evaluate(create(episode, WRITER))
    assert first.outcome is WriteOutcome.CREATED
    reflection = MemoryRecord.draft(
        MemoryType.REFLECTION,
        "Deploys on Fridays fail more often than deploys on other days.",
        source_agent="agent-standard",
        evidence_links=[episode.record_id],
    )
    second = await kernel.gate.evaluate(create(reflection, WRITER, request_id="r-1"))
    assert second.outcome is WriteOutcome.CREATED
    assert len(at_once_calls) == 2
    assert second.modified_record is not None
    assert second.modified_record.id == reflection.id

    edges = await kernel.db.fetch(
        "SELECT target_id, kind, weight, provenance FROM memory_edges WHERE source_id = $1",
        reflection.id,
    )
    assert [(e["target_id"], e["kind"], e["weight"]) for e in edges] == [
        (episode.id, "derived_from", 1.0)
    ]
    assert edges[0]["provenance"] == {"reason": "evidence_links"}

    for result, record in ((first, episode), (second, reflection)):
        event = await kernel.db.fetchrow(
            "SELECT event_type, aggregate_id, payload, decision_id FROM outbox "
            "WHERE decision_id = $1",
            result.decision_id,
        )
        assert event is not None
        assert (event["event_type"], event["aggregate_id"]) == ("memory.created", record.id)
        payload = event["payload"]
        payload = json.loads(payload) if isinstance(payload, str) else payload
        assert payload["version_id"] == str(record.id)
        assert payload["decision_type"] == "external"
        assert payload["agent_id"] == WRITER.agent_id
        row = await kernel.db.fetchrow(
            "SELECT a.occurred_at, a.request_id, a.version_id, m.ingestion_time "
            "FROM librarian_audit a JOIN memories m ON m.id = a.version_id "
            "WHERE a.decision_id = $1",
            result.decision_id,
        )
        assert row is not None
        assert row["occurred_at"] == row["ingestion_time"]
    assert (await kernel.audit.by_decision(second.decision_id)).request_id == "r-1"  # type: ignore[union-attr]
    assert (await kernel.audit.verify()).ok


async def test_a_conflicting_create_takes_the_transactional_path(
    kernel: Kernel, at_once_calls: list[bool]
) -> None:
    """A write Layer 2 found a conflict for needs reads inside its transaction: it is not
    written at once, and the chain verifies across both kinds of write."""
    base = MemoryRecord.draft(
        MemoryType.BELIEF, "The staging database runs PostgreSQL 15.", source_agent="agent-standard"
    )
    await kernel.gate.evaluate(create(base, WRITER))
    changed = MemoryRecord.draft(
        MemoryType.BELIEF,
        "The staging database was upgraded and now runs PostgreSQL 17.",
        source_agent="agent-standard",
    )
    result = await kernel.gate.evaluate(create(changed, WRITER))
    assert result.decision is GateDecision.APPROVED
    assert result.layer2_decision is not None
    assert result.layer2_decision.conflicts
    assert len(at_once_calls) == 1  # the first write only
    assert (await kernel.audit.verify()).ok


async def test_one_request_id_sent_twice_at_once_is_written_once(
    kernel: Kernel, at_once_calls: list[bool]
) -> None:
    """Two evaluations of one request id race past the idempotency look-up: the statement of
    the second meets the request-id key and the Gate answers with the first's result."""
    results = await asyncio.gather(
        *(
            kernel.gate.evaluate(
                create(
                    MemoryRecord.draft(
                        MemoryType.BELIEF,
                        "The nightly export writes to the analytics bucket.",
                        source_agent="agent-standard",
                    ),
                    WRITER,
                    request_id="same-request",
                )
            )
            for _ in range(2)
        )
    )
    assert {r.decision_id for r in results} == {results[0].decision_id}
    assert 1 == await kernel.db.fetchval("SELECT count(*) FROM memories")
    assert 1 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    assert at_once_calls  # at least the winner was written at once
    assert (await kernel.audit.verify()).ok


async def test_an_unresolvable_conflict_is_linked_and_escalated_in_the_one_statement(
    kernel: Kernel, at_once_calls: list[bool]
) -> None:
    """Two claims with nothing to prefer one: no record changes state, so the write needs no
    read and goes at once, with the conflict's edge and ``memory.conflict_detected`` before
    ``memory.created`` in the outbox, as the transactional path publishes them."""
    first = MemoryRecord.draft(
        MemoryType.BELIEF, "The staging database runs PostgreSQL 15.", source_agent="agent-standard"
    )
    await kernel.gate.evaluate(create(first, WRITER))
    second = MemoryRecord.draft(
        MemoryType.BELIEF, "The staging database runs PostgreSQL 16.", source_agent="agent-standard"
    )
    result = await kernel.gate.evaluate(create(second, WRITER))
    assert result.layer2_decision is not None
    classes = {c.classification.value for c in result.layer2_decision.conflicts}
    assert classes == {"unresolvable"}
    assert len(at_once_calls) == 2
    edge = await kernel.db.fetchrow(
        "SELECT kind, weight, provenance FROM memory_edges WHERE source_id = $1 AND target_id = $2",
        second.id,
        first.id,
    )
    assert edge is not None
    assert edge["kind"] == "relates_to"
    assert edge["provenance"]["classification"] == "unresolvable"
    assert 0 < edge["weight"] <= 1
    events = await kernel.db.fetch(
        "SELECT event_type FROM outbox WHERE decision_id = $1 ORDER BY id", result.decision_id
    )
    assert [e["event_type"] for e in events] == ["memory.conflict_detected", "memory.created"]
    assert (await kernel.audit.verify()).ok


async def test_a_lower_tier_write_at_once_links_nothing_it_may_not_read(
    kernel: Kernel, at_once_calls: list[bool]
) -> None:
    """A sensitive record and a standard agent's near copy of it: the copy is written at
    once, and neither its edges, its events nor its answer name the record it cannot read."""
    text = "The payroll export runs at 02:00 and writes to the finance-restricted bucket."
    hidden = MemoryRecord.draft(
        MemoryType.BELIEF, text, source_agent=BOSS.agent_id, access_level=AccessLevel.SENSITIVE
    )
    await kernel.gate.evaluate(create(hidden, BOSS))
    mine = MemoryRecord.draft(MemoryType.BELIEF, text + " Noted.", source_agent="agent-standard")
    result = await kernel.gate.evaluate(create(mine, WRITER))
    assert result.outcome is WriteOutcome.CREATED
    assert len(at_once_calls) == 2
    assert result.layer2_decision is not None
    assert not result.layer2_decision.conflicts
    assert str(hidden.id) not in json.dumps(result.layer2_decision.to_json(), default=str)
    targets = await kernel.db.fetch(
        "SELECT target_id FROM memory_edges WHERE source_id = $1", mine.id
    )
    assert hidden.id not in {row["target_id"] for row in targets}
    payloads = await kernel.db.fetch(
        "SELECT payload::text AS payload FROM outbox WHERE decision_id = $1", result.decision_id
    )
    assert payloads
    assert all(str(hidden.id) not in row["payload"] for row in payloads)
