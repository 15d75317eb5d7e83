"""Self-healing and bookkeeping jobs (engram.autonomy.healing, engram.autonomy.catalogue) on the
real database and model: the PII rescan with a newer detector, propagation of its findings to
derived records, the decay refresh, re-embedding driven by the scheduler, and retention."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg
import pytest

from engram import Kernel, open_kernel
from engram.autonomy.healing import PiiRescan, Screener, current_screener
from engram.autonomy.scheduler import Job, Scheduler, SchedulerSettings
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.gate.requests import WriteOutcome
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    ConsolidationPath,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
)
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DAY, DEEP, INCIDENT, head_of
from tests.integration.gate_helpers import (
    BOSS,
    INTERN,
    WRITER,
    belief,
    create,
    lock_waiters,
    update,
)
from tests.integration.scheduler_helpers import Clock

MARKER = "PROJECT-NIGHTJAR"
NEWER = "regex@1+codename"
SELF_HEALING = GateDecisionType.SELF_HEALING


def codename_screener() -> Screener:
    """A newer detector: what the current one finds, and the project codename besides."""
    current = current_screener()

    def kinds(text: str) -> list[str]:
        found = list(current.kinds(text))
        return [*found, "codename"] if MARKER in text else found

    return Screener(version=NEWER, label="regex", kinds=kinds)


def rescan(kernel: Kernel) -> PiiRescan:
    """A rescan with the newer detector."""
    return PiiRescan(
        kernel.gate,
        kernel.db,
        kernel.metrics,
        screener=codename_screener(),
        release=kernel.consolidation.release,
    )


def pii_flags(kernel: Kernel) -> float:
    """engram_pii_flags_total{detector="regex"} now."""
    value = kernel.metrics.registry.get_sample_value(
        "engram_pii_flags_total", {"detector": "regex"}
    )
    return value or 0.0


async def write(kernel: Kernel, record: MemoryRecord, caller: CallerIdentity = WRITER) -> UUID:
    """Write ``record`` as ``caller``; it must be created."""
    result = await kernel.gate.evaluate(create(record, caller))
    assert (result.decision, result.outcome) == (GateDecision.APPROVED, WriteOutcome.CREATED), (
        result.reason
    )
    assert result.record_id is not None
    return result.record_id


async def self_healing_rows(kernel: Kernel) -> list[tuple[UUID, str, str, str]]:
    """The self-healing audit rows, oldest first."""
    rows = await kernel.db.fetch(
        "SELECT record_id, action, decision, outcome FROM librarian_audit "
        "WHERE decision_type = 'self_healing' ORDER BY seq"
    )
    return [(r["record_id"], r["action"], r["decision"], r["outcome"]) for r in rows]


def assert_flagged(
    record: MemoryRecord,
    *,
    propagated_from: UUID | None = None,
    by: GateDecisionType = SELF_HEALING,
) -> None:
    """The record is sensitive with the rescan's finding, written by ``by`` (a self-healing
    write, or consolidation's restatement after it undid a summary)."""
    expected: dict[str, Any] = {"kinds": ["codename"], "detector": NEWER, "found_by": "rescan"}
    if propagated_from is not None:
        expected["propagated_from"] = str(propagated_from)
    assert record.access_level is AccessLevel.SENSITIVE
    assert record.metadata["pii"] == expected
    assert record.gate_decision_type is by


# --- the PII rescan ---------------------------------------------------------------------------


async def test_rescan_flags_what_an_older_detector_passed(kernel: Kernel) -> None:
    """A record the Gate's detector passed is flagged by a newer one: one audited
    self-healing UPDATE to sensitive (content and status kept, metadata.pii with found_by
    rescan), counted once in engram_pii_flags_total; agents can no longer read it; a clean
    record is only marked; the next pass has nothing left to read."""
    secret_text = f"The {MARKER} launch moves to the spring offsite in Lisbon."
    secret = await write(kernel, belief(secret_text, metadata={"team": "growth"}))
    clean = await write(kernel, belief("The staging cluster is rebuilt every Sunday night."))
    before = await head_of(kernel, secret)
    assert before.access_level is AccessLevel.AGENT
    assert "pii" not in before.metadata
    assert [secret] == [
        r.record_id for r in await kernel.temporal.query(record_id=secret, caller=INTERN)
    ]
    hits = await kernel.retrieval.search(WRITER, f"{MARKER} launch Lisbon offsite")
    assert secret in {hit.record.record_id for hit in hits.hits}
    flags = pii_flags(kernel)

    report = await rescan(kernel).run()

    assert (report.flagged, report.propagated, report.refused) == (1, 0, 0)
    # Both records are read once; the version the flag wrote is marked read, not read again.
    assert 2 == report.scanned
    assert report.flagged_ids == [str(secret)]
    assert pii_flags(kernel) - flags == 1.0
    after = await head_of(kernel, secret)
    assert_flagged(after)
    assert (after.content, after.status, after.version) == (secret_text, MemoryStatus.ACTIVE, 2)
    assert after.metadata["team"] == "growth"  # the rest of the metadata is kept
    assert after.consolidation_path is ConsolidationPath.FAST
    assert after.gate_decision_id is not None
    entry = await kernel.audit.by_decision(after.gate_decision_id)
    assert entry is not None
    assert (entry.action, entry.decision_type, entry.decision, entry.outcome) == (
        "UPDATE",
        "self_healing",
        "approved",
        "updated",
    )
    assert [(secret, "UPDATE", "approved", "updated")] == await self_healing_rows(kernel)
    untouched = await head_of(kernel, clean)
    assert (untouched.version, untouched.access_level) == (1, AccessLevel.AGENT)
    # agent-level and user-level readers no longer see it, by id, listing or search
    for reader in (INTERN, WRITER):
        assert [] == await kernel.temporal.query(record_id=secret, caller=reader)
        listing = await kernel.temporal.query(caller=reader)
        assert secret not in {r.record_id for r in listing}
        assert clean in {r.record_id for r in listing}
        hits = await kernel.retrieval.search(reader, f"{MARKER} launch Lisbon offsite")
        assert secret not in {hit.record.record_id for hit in hits.hits}
    # every live head is marked as read by the newer detector
    unread = await kernel.db.fetchval(
        "SELECT count(*) FROM memories WHERE superseded_by IS NULL AND screened_with <> $1",
        NEWER,
    )
    assert unread == 0, "live heads left for the next pass to read again"

    again = await rescan(kernel).run()
    assert (again.scanned, again.flagged, again.propagated, again.refused) == (0, 0, 0, 0)
    assert pii_flags(kernel) - flags == 1.0
    assert (await head_of(kernel, secret)).version == 2


async def _seed_incident(kernel: Kernel) -> tuple[list[UUID], UUID]:
    """The incident thread, the middle record carrying the codename in its metadata; the
    ids of all three and of the marked one."""
    ids = []
    for n, text in enumerate(INCIDENT):
        metadata = {"project": MARKER} if n == 1 else {}
        record = MemoryRecord.draft(
            MemoryType.EPISODE,
            text,
            source_agent=BOSS.agent_id,
            event_time=DAY + timedelta(days=n),
            metadata=metadata,
        )
        ids.append(await write(kernel, record, BOSS))
    return ids, ids[1]


async def test_a_finding_reaches_every_record_derived_from_it(kernel: Kernel) -> None:
    """The marked record was consolidated into a summary and cited as evidence by a record
    that is itself cited: all four become sensitive, each by one self-healing UPDATE, the
    derived ones naming the source in propagated_from. The summary is then undone (ADR-018,
    amended 2026-11-27): forgotten at sensitive, and every source active again, the marked
    one at sensitive, so the clean sources' facts stay readable at their own level."""
    sources, marked = await _seed_incident(kernel)
    consolidation = await kernel.consolidation.run(DEEP)
    [item] = [item for batch in consolidation.batches for item in batch.items]
    assert set(item.sources) == set(sources)
    summary = await head_of(kernel, item.record_id)
    assert MARKER not in summary.content + str(summary.metadata)  # reached only by derivation
    citing = await write(
        kernel,
        belief("The payment-step pager alert needs a lower threshold.", evidence_links=[marked]),
        BOSS,
    )
    chained = await write(
        kernel,
        belief("Alert thresholds get reviewed with the SRE rotation.", evidence_links=[citing]),
        BOSS,
    )
    bystander = await write(kernel, belief("The office plants are watered on Mondays."), BOSS)
    await kernel.events.settled()
    flags = pii_flags(kernel)

    report = await rescan(kernel).run()
    await kernel.events.settled()

    assert (report.flagged, report.propagated, report.refused) == (1, 3, 0)
    assert report.flagged_ids == [str(marked)]
    assert pii_flags(kernel) - flags == 1.0  # one finding; propagation is not a finding
    source = await head_of(kernel, marked)
    assert_flagged(source, by=GateDecisionType.CONSOLIDATION)  # restored, still sensitive
    assert source.status is MemoryStatus.ACTIVE
    for derived in (citing, chained):
        assert_flagged(await head_of(kernel, derived), propagated_from=marked)
    made = await head_of(kernel, item.record_id)
    assert_flagged(made, propagated_from=marked)  # raised, then forgotten as it stood
    assert (made.status, made.consolidation_path) == (
        MemoryStatus.FORGOTTEN,
        ConsolidationPath.SLOW,
    )
    assert made.content == summary.content
    for other in set(sources) - {marked}:
        head = await head_of(kernel, other)
        assert (head.status, head.access_level) == (MemoryStatus.ACTIVE, AccessLevel.AGENT)
    assert (await head_of(kernel, bystander)).access_level is AccessLevel.AGENT
    [batch] = await kernel.consolidation.batches()
    assert batch.rolled_back_at is None
    rows = await self_healing_rows(kernel)
    assert sorted(rows) == sorted(
        (rid, "UPDATE", "approved", "updated") for rid in (marked, item.record_id, citing, chained)
    )
    # nobody below sensitive reads the summary or the records citing the finding
    for reader in (INTERN, WRITER):
        for rid in (item.record_id, citing, chained):
            assert [] == await kernel.temporal.query(
                record_id=rid, caller=reader, include_consolidated=True
            )


async def test_a_derived_record_that_moves_on_meanwhile_is_raised_as_it_is_now(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A record citing the finding is held (a real row lock) while its writer changes only
    its metadata; the rescan's propagation, queued behind, finds it moved on. The source is
    marked read after this pass, so the propagation raises the record's new head now."""
    _, marked = await _seed_incident(kernel)
    text = "The payment-step pager alert needs a lower threshold."
    citing = await write(kernel, belief(text, evidence_links=[marked]), BOSS)
    first = await head_of(kernel, citing)
    await kernel.events.settled()
    admin = await asyncpg.connect(database.admin_url)
    try:
        held = admin.transaction()
        await held.start()
        await admin.fetch("SELECT 1 FROM engram.memories WHERE id = $1 FOR NO KEY UPDATE", first.id)
        tagging = asyncio.create_task(
            kernel.gate.evaluate(
                update(citing, text, 1, BOSS, evidence_links=[marked], metadata={"team": "sre"})
            )
        )
        await lock_waiters(admin, 1)
        scanning = asyncio.create_task(rescan(kernel).run())
        await lock_waiters(admin, 2)  # the propagation waits behind the metadata change
        await held.rollback()
        tagged = await tagging
        assert (GateDecision.APPROVED, 2) == (tagged.decision, tagged.version)
        report = await scanning
    finally:
        await admin.close()
    assert (report.flagged, report.propagated, report.refused) == (1, 1, 0)
    head = await head_of(kernel, citing)
    assert_flagged(head, propagated_from=marked)
    assert (3, "sre") == (head.version, head.metadata["team"])
    assert [] == await kernel.temporal.query(record_id=citing, caller=WRITER)


async def test_a_summary_quoting_the_finding_is_changed_once(kernel: Kernel) -> None:
    """The codename is in the source's content, so the merge quotes it: the summary is made
    sensitive once — found in its own text or reached by propagation from the source,
    whichever the pass reads first (both were written in one transaction) — and nothing is
    refused."""
    ids = []
    for n, told in enumerate(INCIDENT):
        text = told.replace("checkout-api", f"checkout-api ({MARKER})") if n == 1 else told
        record = MemoryRecord.draft(
            MemoryType.EPISODE, text, source_agent=BOSS.agent_id, event_time=DAY + timedelta(n)
        )
        ids.append(await write(kernel, record, BOSS))
    consolidation = await kernel.consolidation.run(DEEP)
    [item] = [item for batch in consolidation.batches for item in batch.items]
    assert MARKER in (await head_of(kernel, item.record_id)).content

    report = await rescan(kernel).run()

    assert_flagged(await head_of(kernel, ids[1]), by=GateDecisionType.CONSOLIDATION)
    summary = await head_of(kernel, item.record_id)
    assert summary.access_level is AccessLevel.SENSITIVE
    assert summary.status is MemoryStatus.FORGOTTEN  # undone, its sources active again
    assert summary.metadata["pii"]["kinds"] == ["codename"]
    assert report.flagged + report.propagated == 2
    assert report.flagged >= 1
    assert report.refused == 0
    decisions = [(rid, decision) for rid, _, decision, _ in await self_healing_rows(kernel)]
    assert sorted(decisions) == sorted([(ids[1], "approved"), (item.record_id, "approved")])


async def _released(kernel: Kernel, text: str) -> tuple[UUID, MemoryRecord]:
    """A record quarantined for an email address, then released by an admin."""
    result = await kernel.gate.evaluate(create(belief(text), BOSS))
    assert result.record_id is not None
    held = await head_of(kernel, result.record_id)
    assert held.access_level is AccessLevel.SENSITIVE
    assert held.metadata["pii"]["kinds"] == ["email"]
    released, _ = await kernel.quarantine.release(
        result.record_id, admin=BOSS, reason="a shared team mailbox, not personal data"
    )
    assert released.access_level is AccessLevel.AGENT
    return result.record_id, released


async def test_a_record_an_admin_released_is_not_flagged_again(kernel: Kernel) -> None:
    """An admin read the quarantined record and released it: a newer detector that finds
    only what the release covered does not quarantine it again; it is only marked as read."""
    record_id, released = await _released(
        kernel, "The budget sheet is owned by dana.kim@example.com in finance."
    )
    flags = pii_flags(kernel)

    report = await rescan(kernel).run()

    assert (report.scanned, report.flagged, report.propagated, report.refused) == (1, 0, 0, 0)
    head = await head_of(kernel, record_id)
    assert (head.id, head.version, head.access_level) == (released.id, 1, AccessLevel.AGENT)
    assert head.metadata["pii"]["kinds"] == ["email"]
    assert "found_by" not in head.metadata["pii"]
    assert pii_flags(kernel) == flags
    assert [] == await self_healing_rows(kernel)
    assert NEWER == await kernel.db.fetchval(
        "SELECT screened_with FROM memories WHERE id = $1", head.id
    )
    assert [record_id] == [
        r.record_id for r in await kernel.temporal.query(record_id=record_id, caller=INTERN)
    ]


async def test_a_released_record_goes_back_for_a_new_kind_of_finding(kernel: Kernel) -> None:
    """The release covered the email address; the newer detector also finds the codename,
    which no admin has seen: the record is quarantined again for that kind alone."""
    record_id, _ = await _released(
        kernel, f"The {MARKER} budget sheet is owned by dana.kim@example.com in finance."
    )

    report = await rescan(kernel).run()

    assert (report.flagged, report.refused) == (1, 0)
    head = await head_of(kernel, record_id)
    assert head.access_level is AccessLevel.SENSITIVE
    # The Gate screens the self-healing UPDATE too, and records its own finding (the email).
    assert head.metadata["pii"]["kinds"] == ["email"]
    assert [(record_id, "UPDATE", "approved", "updated")] == await self_healing_rows(kernel)
    assert [] == await kernel.temporal.query(record_id=record_id, caller=INTERN)


async def test_a_pii_key_a_caller_wrote_exempts_nothing(kernel: Kernel) -> None:
    """An agent that puts its own ``pii`` key in the metadata does not switch the rescan off
    for its record."""
    result = await kernel.gate.evaluate(
        create(belief(f"The {MARKER} launch is planned for spring.", metadata={"pii": {}}))
    )
    assert result.record_id is not None
    assert (await head_of(kernel, result.record_id)).access_level is AccessLevel.AGENT

    report = await rescan(kernel).run()

    assert report.flagged == 1
    assert_flagged(await head_of(kernel, result.record_id))


# --- decay ------------------------------------------------------------------------------------


def decay_count(kernel: Kernel, memory_type: str = "belief") -> float:
    """How many decay scores of ``memory_type`` were observed."""
    value = kernel.metrics.registry.get_sample_value(
        "engram_decay_score_count", {"type": memory_type}
    )
    return value or 0.0


async def test_decay_refresh_pages_through_every_record_and_writes_what_moved(
    kernel: Kernel,
) -> None:
    """Sixty days on, every fresh record's stored score drops to what compute_decay says;
    paging by two reaches all five once; a second refresh at that instant writes nothing."""
    texts = [
        "The VPN gateway certificate renews on the first of each month.",
        "Grafana dashboards for billing live in the finance folder.",
        "The mobile app release train leaves every second Thursday.",
        "Backups of the wiki database are kept for ninety days.",
        "The data warehouse nightly load starts at 01:15 UTC.",
    ]
    ids = [await write(kernel, belief(text)) for text in texts]
    stored = {
        r["record_id"]: r["decay_score"]
        for r in await kernel.db.fetch("SELECT record_id, decay_score FROM memories")
    }
    later = datetime.now(UTC) + timedelta(days=60)
    observed = decay_count(kernel)

    pages: list[tuple[int, int]] = []
    after: UUID | None = None
    while True:
        read, written, after = await kernel.temporal.refresh_decay(now=later, after=after, limit=2)
        pages.append((read, written))
        if after is None:
            break
        assert after in ids

    assert [2, 2, 1] == [read for read, _ in pages]
    assert 5 == sum(written for _, written in pages)
    assert decay_count(kernel) - observed == 5.0
    rows = await kernel.db.fetch("SELECT record_id, decay_score FROM memories")
    now_stored = {r["record_id"]: r["decay_score"] for r in rows}
    assert set(now_stored) == set(ids)
    for record_id in ids:
        assert now_stored[record_id] < stored[record_id] - 0.01
        expected = await kernel.admin_temporal.compute_decay(record_id, now=later)
        assert now_stored[record_id] == pytest.approx(expected, abs=1e-4)

    again = await kernel.temporal.refresh_decay(now=later)
    assert (5, 0, None) == again
    assert decay_count(kernel) - observed == 10.0
    assert now_stored == {
        r["record_id"]: r["decay_score"]
        for r in await kernel.db.fetch("SELECT record_id, decay_score FROM memories")
    }


# --- jobs driven by a scheduler -----------------------------------------------------------------


def runner(kernel: Kernel, names: Sequence[str], clock: Clock) -> Scheduler:
    """A scheduler over ``kernel``'s own jobs of those names."""
    jobs: list[Job] = [job for job in kernel.scheduler.jobs if job.name in names]
    assert sorted(job.name for job in jobs) == sorted(names)
    return Scheduler(
        kernel.db,
        jobs,
        metrics=kernel.metrics,
        clock=clock,
        settings=SchedulerSettings(poll_seconds=0.05, stop_grace_seconds=5.0),
    )


async def test_the_reembed_job_repairs_degraded_records_on_its_schedule(
    stalled_kernel: Kernel, database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """Records stored without an embedding are embedded by the 'reembed' job the scheduler
    starts five minutes after first seeing it; its outcome counts them."""
    for text in ("Audit logs are shipped hourly.", "The CDN cache is purged on deploy."):
        result = await stalled_kernel.gate.evaluate(create(belief(text)))
        assert (result.decision, result.degraded) == (GateDecision.APPROVED, True)
    assert 2 == await stalled_kernel.db.fetchval(
        "SELECT count(*) FROM memories WHERE embedding IS NULL"
    )
    settings = EngramSettings(database_url=database.runtime_url, migrate_on_start=False)
    async with open_kernel(settings=settings, embeddings=embedder) as healthy:
        clock = Clock(datetime(2026, 11, 25, 10, 1, 30, tzinfo=UTC))
        jobs = runner(healthy, ["reembed"], clock)
        try:
            assert [] == await jobs.tick()  # first sighting: marked, not run
            assert [] == await jobs.wait_idle()
            assert 2 == await healthy.db.fetchval(
                "SELECT count(*) FROM memories WHERE embedding IS NULL"
            )
            clock.advance(minutes=5)
            assert ["reembed"] == await jobs.tick()
            [outcome] = await jobs.wait_idle()
            assert (outcome.job, outcome.outcome) == ("reembed", "succeeded")
            assert dict(outcome.detail) == {"candidates": 2, "repaired": 2, "still_degraded": 0}
            assert outcome.due == datetime(2026, 11, 25, 10, 5, tzinfo=UTC)
            rows = await healthy.db.fetch(
                "SELECT embedding IS NOT NULL AS embedded, embedding_model, version FROM memories"
            )
            assert [(True, embedder.model_name, 1)] * 2 == [
                (r["embedded"], r["embedding_model"], r["version"]) for r in rows
            ]
            assert [("self_healing", "reinforced")] * 2 == [
                (r["decision_type"], r["outcome"])
                for r in await healthy.db.fetch(
                    "SELECT decision_type, outcome FROM librarian_audit "
                    "WHERE decision_type <> 'external'"
                )
            ]
            clock.advance(minutes=5)
            assert ["reembed"] == await jobs.tick()
            [idle] = await jobs.wait_idle()
            assert dict(idle.detail) == {"candidates": 0, "repaired": 0, "still_degraded": 0}
        finally:
            await jobs.stop()


async def test_retention_deletes_only_old_delivered_events(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """The retention job (run at once) deletes delivered outbox events older than the
    retention period; recent ones, and old ones never delivered, stay."""
    for text in (
        "The load balancer idle timeout is 350 seconds.",
        "Terraform state for prod lives in the ops bucket.",
        "The on-call handover happens on Mondays at 10:00.",
    ):
        await write(kernel, belief(text))
    await kernel.events.settled()
    ids = [r["id"] for r in await kernel.db.fetch("SELECT id FROM outbox ORDER BY id")]
    assert len(ids) >= 3
    old_delivered, old_pending = ids[0], ids[1]
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute(
            "UPDATE engram.outbox SET created_at = now() - interval '90 days', "
            "dispatched_at = now() - interval '89 days' WHERE id = $1",
            old_delivered,
        )
        await admin.execute(
            "UPDATE engram.outbox SET created_at = now() - interval '90 days', "
            "dispatched_at = NULL WHERE id = $1",
            old_pending,
        )
        # a delivered event just inside the retention period stays as well
        await admin.execute(
            "UPDATE engram.outbox SET dispatched_at = now() - interval '29 days' WHERE id = $1",
            ids[2],
        )
    finally:
        await admin.close()
    assert (
        await kernel.db.fetchval(
            "SELECT count(*) FROM outbox WHERE id <> ALL($1::bigint[]) AND dispatched_at IS NULL",
            [old_pending],
        )
        == 0
    )

    jobs = runner(kernel, ["retention"], Clock(datetime.now(UTC)))
    try:
        outcome = await jobs.run_now("retention")
    finally:
        await jobs.stop()

    assert outcome.outcome == "succeeded"
    assert outcome.detail["events"] == 1
    left = [r["id"] for r in await kernel.db.fetch("SELECT id FROM outbox ORDER BY id")]
    assert left == [i for i in ids if i != old_delivered]
