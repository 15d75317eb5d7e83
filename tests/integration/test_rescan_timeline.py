"""The PII rescan's new version on the ingestion axis (docs/temporal.md, ADR-003): the rescan
proposes a copy of the head, ingestion time included, but the version it writes is stamped
with its own transaction's time, and the version before it ends at that same instant.

Real embedded PostgreSQL and the real model; the rescan runs with a newer detector.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from uuid import UUID

from engram import Kernel
from engram.memory.types import AccessLevel, CallerIdentity, GateDecision
from tests.integration.gate_helpers import WRITER, belief, update
from tests.integration.test_self_healing import MARKER, rescan, write

#: A reader cleared for the flagged (``sensitive``) head.
CLEARED = CallerIdentity.system("timeline-test")


async def chain(kernel: Kernel, record_id: UUID) -> list[tuple[int, datetime, datetime | None]]:
    """Every version of the record as stored: (version, ingestion_time, ingestion_time_end)."""
    rows = await kernel.db.fetch(
        "SELECT version, ingestion_time, ingestion_time_end FROM memories "
        "WHERE record_id = $1 ORDER BY version",
        record_id,
    )
    return [(r["version"], r["ingestion_time"], r["ingestion_time_end"]) for r in rows]


async def test_a_rescan_writes_its_version_at_its_own_ingestion_time(kernel: Kernel) -> None:
    """A record with two versions is flagged by the rescan: the third version's ingestion
    time is when the rescan wrote it (after the head's, not a copy of it), each earlier
    version's interval ends exactly where the next begins, only the new head is open, its
    event time is the fact's (kept), and its audit row is stamped with its ingestion time."""
    first = f"The {MARKER} launch moves to the spring offsite in Lisbon."
    record_id = await write(kernel, belief(first))
    await asyncio.sleep(0.05)
    changed = f"The {MARKER} launch moves to the summer offsite in Porto."
    result = await kernel.gate.evaluate(update(record_id, changed, 1, WRITER))
    assert GateDecision.APPROVED == result.decision, result.reason
    await asyncio.sleep(0.05)
    [before] = await kernel.temporal.query(record_id=record_id, caller=WRITER)

    report = await rescan(kernel).run()

    assert [str(record_id)] == report.flagged_ids
    versions = await chain(kernel, record_id)
    assert [1, 2, 3] == [version for version, _, _ in versions]
    starts = [start for _, start, _ in versions]
    ends = [end for _, _, end in versions]
    assert starts[0] < starts[1] < starts[2], versions  # strictly increasing
    assert starts[1:] == ends[:-1], versions  # contiguous: each ends where the next begins
    assert ends[-1] is None
    assert before.ingestion_time == starts[1] < starts[2]
    [flagged] = await kernel.temporal.query(record_id=record_id, caller=CLEARED)
    assert AccessLevel.SENSITIVE is flagged.access_level
    assert (flagged.ingestion_time, flagged.event_time) == (starts[2], before.event_time)
    assert flagged.gate_decision_id is not None
    entry = await kernel.audit.by_decision(flagged.gate_decision_id)
    assert entry is not None
    assert starts[2] == entry.occurred_at
