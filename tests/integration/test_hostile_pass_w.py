"""Hostile pass W: the self-healing jobs and the scheduler (a PII finding that did not fit a
record whose writer filled its metadata, a watched job's failing check that held back every
job after it, a degraded record citing a record raised since that could never be re-embedded).

Every test here failed on the code it was written against; what held is in
``test_hostile_pass_w_held.py``. Real embedded PostgreSQL, the real embedding model, no
mocks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engram import Kernel, open_kernel
from engram.autonomy.healing import reembed_missing
from engram.autonomy.schedule import Every
from engram.autonomy.scheduler import Job, JobContext
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.schemas import MAX_METADATA_BYTES
from engram.memory.types import AccessLevel, GateDecision
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import head_of
from tests.integration.gate_helpers import (
    BOSS,
    INTERN,
    WRITER,
    belief,
    create,
    holding_head,
    update,
)
from tests.integration.scheduler_helpers import Clock, scheduler
from tests.integration.test_self_healing import MARKER, assert_flagged, rescan, write

START = datetime(2026, 11, 25, 2, 59, 30, tzinfo=UTC)


def filled(**metadata: Any) -> dict[str, Any]:
    """``metadata`` with a ``notes`` entry that fills it to exactly the size limit."""
    metadata["notes"] = ""
    room = MAX_METADATA_BYTES - len(json.dumps(metadata, ensure_ascii=False).encode())
    metadata["notes"] = "n" * room
    assert MAX_METADATA_BYTES == len(json.dumps(metadata, ensure_ascii=False).encode())
    return metadata


async def test_a_finding_is_recorded_on_a_record_whose_metadata_is_full(kernel: Kernel) -> None:
    """High. The rescan raises a record to ``sensitive`` with its finding in
    ``metadata.pii``, a self-healing UPDATE the Gate's schema check measured like a
    writer's: a record whose writer filled its metadata to the 16 KiB limit could not take
    the finding, the UPDATE was rejected for size, counted refused and marked read, and the
    record (and a record citing it, filled the same way) stayed readable at ``agent`` for
    good: the compensating control after a detector upgrade was off for anyone padding
    their metadata. An internal write's size limit no longer counts the kernel's own
    finding; the rest of the metadata passed the limit when it was written."""
    text = f"The {MARKER} launch moves to the spring offsite in Lisbon."
    source = await write(kernel, belief(text, metadata=filled(team="growth")))
    citing = await write(
        kernel,
        belief(
            "The spring offsite needs a larger venue this year.",
            evidence_links=[source],
            metadata=filled(),
        ),
    )

    report = await rescan(kernel).run()

    assert (report.flagged, report.propagated, report.refused) == (1, 1, 0)
    assert_flagged(await head_of(kernel, source))
    assert_flagged(await head_of(kernel, citing), propagated_from=source)
    for reader in (INTERN, WRITER):
        for record_id in (source, citing):
            assert [] == await kernel.temporal.query(record_id=record_id, caller=reader)


@pytest.mark.usefixtures("schedulers")
async def test_a_watched_job_whose_check_fails_holds_back_no_other_job(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Medium. A scheduler's tick claimed the due jobs one after another, and a watched job's
    condition (the consolidation triggers' counts, the advisor's feedback count) that raised
    ended the tick there: every job registered after it (re-embedding, the PII rescan, the
    decay refresh, retention, training) was not started on that tick, nor on any later one
    while the condition kept failing, with nothing recorded for any of them. Here the
    condition waits for a row another session holds locked and gives up (a real
    ``lock_not_available``). The failing check is now logged and tried again at the next
    poll; the jobs after it run on time."""
    record_id = await write(kernel, belief("The staging cluster is rebuilt every Sunday night."))

    async def busy(context: JobContext) -> str | None:
        del context
        async with kernel.db.transaction() as conn:
            await conn.execute("SET LOCAL lock_timeout = '100ms'")
            await conn.fetchval("SELECT 1 FROM memories WHERE record_id = $1 FOR SHARE", record_id)
        return "the row was free"

    served: list[datetime] = []

    async def plain(context: JobContext) -> Mapping[str, Any]:
        served.append(context.due)
        return {}

    minute = Every(timedelta(minutes=1))
    clock = Clock(START)
    runner = scheduler(
        kernel,
        [Job("watched", minute, plain, "test", ready=busy), Job("plain", minute, plain, "test")],
        clock,
    )
    assert [] == await runner.tick()  # first sighting of both: marked, not run
    async with holding_head(database.admin_url, record_id):
        clock.advance(minutes=1)
        assert ["plain"] == await runner.tick()
        await runner.wait_idle()
        clock.advance(seconds=10)  # the check fails again while the lock is held
        assert [] == await runner.tick()
    due = START.replace(second=0) + timedelta(minutes=1)
    assert [due] == served
    assert [] == await runner.book.runs("watched")
    clock.advance(minutes=1)  # the lock is gone: the check holds, the job runs
    assert ["watched", "plain"] == await runner.tick()
    await runner.wait_idle()
    assert ["succeeded"] == [run.outcome for run in await runner.book.runs("watched")]


async def test_a_degraded_record_citing_a_record_raised_since_is_re_embedded(
    stalled_kernel: Kernel, database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """Medium. Every UPDATE cites its evidence again, and a citation of a record above the
    proposal's level is refused (ADR-008). The re-embed job restates a degraded record
    unchanged: when a record it cites had been raised above it since (here by a trusted
    agent), the job's UPDATE was rejected on every run, an audit row each time, and the
    record never got its embedding (absent from every vector search); a hundred such
    records, read first, held back the repair of every later one. An internal write that
    keeps the head's citations at its level or above is no longer refused for them: it
    shows them to no reader that did not read them already."""
    port = "The checkout service listens on port 8443."
    cited = await stalled_kernel.gate.evaluate(create(belief(port), WRITER))
    citing = await stalled_kernel.gate.evaluate(
        create(
            belief(
                "Checkout health checks probe the service port every ten seconds.",
                evidence_links=[cited.record_id],
            ),
            WRITER,
        )
    )
    assert (True, True) == (cited.degraded, citing.degraded)
    settings = EngramSettings(database_url=database.runtime_url, migrate_on_start=False)
    async with open_kernel(settings=settings, embeddings=embedder) as healthy:
        assert cited.record_id is not None
        raised = await healthy.gate.evaluate(
            update(
                cited.record_id,
                port,
                expected_version=1,
                caller=BOSS,
                access_level=AccessLevel.SENSITIVE,
            )
        )
        assert GateDecision.APPROVED is raised.decision, raised.reason
        report = await reembed_missing(healthy.gate, healthy.db)
        assert (1, 1, 0) == (report.candidates, report.repaired, report.still_degraded)
        rows = await healthy.db.fetch(
            "SELECT decision, outcome FROM librarian_audit WHERE record_id = $1 "
            "AND decision_type = 'self_healing'",
            citing.record_id,
        )
        assert [("approved", "reinforced")] == [tuple(row) for row in rows]
        hits = await healthy.retrieval.search(WRITER, "how often are checkout health checks run")
        assert citing.record_id in {hit.record.record_id for hit in hits.hits}
        again = await reembed_missing(healthy.gate, healthy.db)
        assert 0 == again.candidates
