"""Origins at the adapter boundary, degraded embedding, fail-closed auditing, idempotent retry."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import asyncpg
import pytest

from engram import Kernel, open_kernel
from engram.autonomy.healing import reembed_missing
from engram.config import EngramSettings
from engram.errors import PermissionDenied
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.gate.requests import WriteOutcome
from engram.memory.types import GateDecision, TrustLevel
from engram.protocols.inprocess import AgentSession
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import READ_ONLY, STANDARD, belief, create

GOOD = {"type": "belief", "content": "The search index is rebuilt every night."}


async def _last_audit(kernel: Kernel) -> asyncpg.Record:
    row = await kernel.db.fetchrow(
        "SELECT decision, decision_type, reason, input_snapshot::text AS snapshot "
        "FROM librarian_audit ORDER BY seq DESC LIMIT 1"
    )
    assert row is not None
    return row  # type: ignore[return-value]


@pytest.mark.parametrize("origin", ["consolidation", "self_healing", "external"])
async def test_a_client_cannot_choose_its_origin(kernel: Kernel, origin: str) -> None:
    """A payload naming a decision_type is refused, audited as external, and stores nothing."""
    session = AgentSession(kernel, READ_ONLY)
    result = await session.remember({**GOOD, "decision_type": origin})
    assert GateDecision.REJECTED == result.decision
    assert "decision_type: Extra inputs are not permitted" in result.reason
    audit = await _last_audit(kernel)
    assert ("rejected", "external") == (audit["decision"], audit["decision_type"])
    assert origin == json.loads(audit["snapshot"])["raw"]["decision_type"]
    assert 0 == await kernel.db.fetchval("SELECT count(*) FROM memories")


async def test_adapter_requests_are_external_and_meet_access_and_rate_limits(
    kernel: Kernel,
) -> None:
    """Everything an adapter sends is external: a read-only agent is refused by access control."""
    denied = await AgentSession(kernel, READ_ONLY).remember(GOOD)
    assert GateDecision.REJECTED == denied.decision
    assert ["access", "rate_limit"] == [c.name for c in denied.failed_checks]
    allowed = await AgentSession(kernel, STANDARD).remember(GOOD)
    assert GateDecision.APPROVED == allowed.decision
    audit = await _last_audit(kernel)
    assert "external" == audit["decision_type"]


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ({"type": "belief"}, "content: Field required"),
        ({"type": "poem", "content": "x"}, "type: Input should be"),
        ({**GOOD, "source_confidence": 7}, "source_confidence"),
        ({**GOOD, "evidence_links": ["not-a-uuid"]}, "evidence_links.0"),
        ({**GOOD, "event_time": "yesterday-ish"}, "event_time"),
    ],
)
async def test_malformed_input_is_rejected_typed_and_audited(
    kernel: Kernel, payload: dict[str, object], fragment: str
) -> None:
    """Input that cannot become a record gets a reasoned rejection and one audit row."""
    result = await AgentSession(kernel, STANDARD).remember(payload)
    assert GateDecision.REJECTED == result.decision
    assert fragment in result.reason
    assert 1 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    assert 0 == await kernel.db.fetchval("SELECT count(*) FROM memories")
    assert (await kernel.audit.verify()).ok


async def test_session_update_and_forget_are_external(kernel: Kernel) -> None:
    """UPDATE and FORGET through the adapter carry the external origin and its checks."""
    session = AgentSession(kernel, STANDARD)
    created = await session.remember(GOOD)
    assert created.record_id is not None
    updated = await session.update(
        created.record_id,
        {"type": "belief", "content": "The search index is rebuilt every hour."},
        expected_version=1,
    )
    assert WriteOutcome.UPDATED == updated.outcome
    forgotten = await session.forget(created.record_id, expected_version=2)
    assert WriteOutcome.FORGOTTEN == forgotten.outcome
    origins = await kernel.db.fetch("SELECT DISTINCT decision_type FROM librarian_audit")
    assert [("external",)] == [tuple(r) for r in origins]


async def test_embedding_timeout_stores_degraded_and_self_healing_repairs_it(
    stalled_kernel: Kernel, database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """Without an embedding the record is stored and flagged; the re-embed job fills it in."""
    result = await stalled_kernel.gate.evaluate(create(belief("Audit logs are shipped hourly.")))
    assert (GateDecision.APPROVED, True) == (result.decision, result.degraded)
    assert 1 == await stalled_kernel.db.fetchval(
        "SELECT count(*) FROM memories WHERE embedding IS NULL AND embedding_model IS NULL"
    )
    settings = EngramSettings(database_url=database.runtime_url, migrate_on_start=False)
    async with open_kernel(settings=settings, embeddings=embedder) as healthy:
        report = await reembed_missing(healthy.gate, healthy.db)
        assert (1, 1, 0) == (report.candidates, report.repaired, report.still_degraded)
        row = await healthy.db.fetchrow(
            "SELECT embedding IS NOT NULL AS embedded, repetitions, version FROM memories"
        )
        assert row is not None
        assert (True, 1, 1) == (row["embedded"], row["repetitions"], row["version"])
        origins = await healthy.db.fetch(
            "SELECT decision_type, outcome FROM librarian_audit ORDER BY seq"
        )
        assert [("external", "created"), ("self_healing", "reinforced")] == [
            tuple(r) for r in origins
        ]


async def test_an_evaluation_that_cannot_be_audited_writes_nothing(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """With INSERT on the audit log revoked, the write fails and no version is stored."""
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute("REVOKE INSERT ON engram.librarian_audit FROM engram_runtime")
        with pytest.raises(PermissionDenied):
            await kernel.gate.evaluate(create(belief("Unauditable facts are not stored.")))
        assert 0 == await admin.fetchval("SELECT count(*) FROM engram.memories")
        assert 0 == await admin.fetchval("SELECT count(*) FROM engram.outbox")
    finally:
        await admin.execute("GRANT INSERT ON engram.librarian_audit TO engram_runtime")
        await admin.close()


async def test_a_retry_after_a_killed_connection_writes_once(
    quick_breaker_kernel: Kernel, database: ScratchDatabase
) -> None:
    """Backends killed while writes run: every write lands exactly once, audited once."""
    kernel = quick_breaker_kernel
    caller = replace(STANDARD, writes_per_minute=1_000_000, trust_level=TrustLevel.TRUSTED)
    admin = await asyncpg.connect(database.admin_url)

    async def killer() -> None:
        for _ in range(5):
            await asyncio.sleep(0.03)
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = $1 AND usename = 'engram_runtime' AND state <> 'idle'",
                database.name,
            )

    try:
        writes = [
            kernel.gate.evaluate(
                create(belief(f"Queue {n} drains into topic {n * 3}."), caller, request_id=f"q{n}")
            )
            for n in range(24)
        ]
        results, _ = await asyncio.gather(asyncio.gather(*writes, return_exceptions=True), killer())
    finally:
        await admin.close()
    await asyncio.sleep(0.3)  # the kills may have opened the breaker: let it probe again
    succeeded = [r for r in results if not isinstance(r, BaseException)]
    failed = [r for r in results if isinstance(r, BaseException)]
    stored = await kernel.db.fetchval("SELECT count(*) FROM memories")
    audited = await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    assert len(succeeded) == stored == audited
    assert all(type(r).__module__.startswith("engram") for r in failed), failed
    assert (await kernel.audit.verify()).ok
    retried = [
        await kernel.gate.evaluate(
            create(belief(f"Queue {n} drains into topic {n * 3}."), caller, request_id=f"q{n}")
        )
        for n in range(24)
    ]
    assert all(r.decision is GateDecision.APPROVED for r in retried)
    assert 24 == await kernel.db.fetchval("SELECT count(*) FROM memories")
    assert 24 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
