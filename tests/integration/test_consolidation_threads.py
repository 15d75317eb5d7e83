"""A decision taken in the course of a thread is merged with the thread's episodes (ADR-018,
amendment of 2026-11-29): the narrative tells it, with its rationale, in its place."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from engram import Kernel
from engram.memory.consolidation import ConsolidationAction
from engram.memory.gate.requests import GateRequest
from engram.memory.types import GateAction, MemoryRecord, MemoryStatus, MemoryType
from tests.integration.consolidation_helpers import DAY, DEEP, LATE_ETL, head_of
from tests.integration.gate_helpers import BOSS, EXTERNAL

#: One thread: a fault, a quote, the decision taken on it, the fix.
THREAD: list[tuple[MemoryType, str]] = [
    (
        MemoryType.EPISODE,
        "Ticket OPS-7741: the Lisbon office printers keep jamming on A3 paper since Monday.",
    ),
    (
        MemoryType.EPISODE,
        "OPS-7741: Printwise says the Lisbon printers need new fuser units, quote EUR 1,840.",
    ),
    (
        MemoryType.DECISION,
        "OPS-7741: approve the Printwise quote of EUR 1,840 for the Lisbon fuser units.",
    ),
    (
        MemoryType.EPISODE,
        "OPS-7741 closed: Printwise fitted the fuser units in Lisbon on Thursday, no jams.",
    ),
]
RATIONALE = "cheaper than leasing new printers for a year"


async def _write(kernel: Kernel, kind: MemoryType, text: str, day: int, **meta: Any) -> UUID:
    record = MemoryRecord.draft(
        kind,
        text,
        source_agent=BOSS.agent_id,
        event_time=DAY + timedelta(days=day),
        metadata=meta,
    )
    result = await kernel.gate.evaluate(GateRequest(GateAction.CREATE, record, BOSS, EXTERNAL))
    assert result.record_id is not None, result.reason
    return result.record_id


async def test_a_decision_in_a_thread_is_merged_with_its_rationale(kernel: Kernel) -> None:
    """The decision joins its thread's merge: consumed like the episodes, its words and its
    rationale in the narrative, which stays an episode."""
    ids = [
        await _write(
            kernel,
            kind,
            text,
            n,
            **({"rationale": RATIONALE} if kind is MemoryType.DECISION else {}),
        )
        for n, (kind, text) in enumerate(THREAD)
    ]

    report = await kernel.consolidation.run(DEEP)

    items = [item for batch in report.batches if batch.committed for item in batch.items]
    assert [item.action for item in items] == [ConsolidationAction.MERGE]
    assert set(items[0].sources) == set(ids)
    made = await head_of(kernel, items[0].record_id)
    assert made.type is MemoryType.EPISODE
    for fact in ("approve the Printwise quote", "EUR 1,840", RATIONALE, "Thursday"):
        assert fact in made.content
    decision = await head_of(kernel, ids[2])
    assert decision.status is MemoryStatus.CONSOLIDATED
    assert decision.metadata["rationale"] == RATIONALE


async def test_decisions_without_an_episode_stay_apart(kernel: Kernel) -> None:
    """Two decisions on one subject are never joined with each other alone: a merged record
    of decisions would have no one rationale, and their disagreement is the conflict
    judgement's to find, not a narrative's to tell."""
    first = await _write(kernel, MemoryType.DECISION, THREAD[2][1], 0, rationale=RATIONALE)
    second = await _write(
        kernel,
        MemoryType.DECISION,
        "OPS-7741: order the Lisbon fuser units from Printwise, EUR 1,840 approved.",
        1,
        rationale="the quote is within the office budget",
    )

    report = await kernel.consolidation.run(DEEP)

    consumed = {s for batch in report.batches for item in batch.items for s in item.sources}
    assert not consumed & {first, second}
    for record_id in (first, second):
        assert (await head_of(kernel, record_id)).status is MemoryStatus.ACTIVE


async def test_a_decision_stays_out_of_a_promoted_pattern(kernel: Kernel) -> None:
    """A pattern seen again and again is promoted without the decision taken about it: a
    belief states what recurs, and the choice stays a decision of its own."""
    etl = [await _write(kernel, MemoryType.EPISODE, text, n) for n, text in enumerate(LATE_ETL)]
    choice = await _write(
        kernel,
        MemoryType.DECISION,
        "Move the orders_daily ETL deadline from 06:00 to 07:00 while it keeps running late.",
        len(LATE_ETL),
        rationale="the nightly ETL finished late again and again",
    )

    report = await kernel.consolidation.run(DEEP)

    items = [item for batch in report.batches if batch.committed for item in batch.items]
    assert [(item.action, set(item.sources)) for item in items] == [
        (ConsolidationAction.PROMOTE, set(etl))
    ]
    assert (await head_of(kernel, choice)).status is MemoryStatus.ACTIVE
