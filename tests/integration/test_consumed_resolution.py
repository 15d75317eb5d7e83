"""A conflict resolution delivered after a consolidation batch consumed the record it would
change: carried out on the record compressed from it alone, escalated when the writer may
not change that one, and dropped with the knowledge when an agent forgot it (ADR-010).

The races that lead here (a batch committing between a write and its resolution) are in
``test_hostile_pass_h.py``; there the summary merges several records. A compression is made
from one record of a hundred words or more, and the detector does not find a contradiction
between a one-line claim and such a record, so these tests deliver the
``memory.conflicts_found`` event the write would have published had its Layer 2 found it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from engram import Kernel
from engram.infra.events import Event
from engram.memory.consolidation import ConsolidationAction
from engram.memory.gate.requests import GateRequest
from engram.memory.gate.resolution import CONFLICTS_FOUND
from engram.memory.types import (
    CallerIdentity,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
)
from tests.integration.consolidation_helpers import DEEP, head_of
from tests.integration.gate_helpers import BOSS, EXTERNAL, WRITER
from tests.integration.race_helpers import broken_invariants

VERBOSE_AUTH = (
    "Hi all, a quick note, and sorry that it is a long one: the public API authenticates "
    "requests with JWT bearer tokens, JWT bearer tokens, which the identity service issues. "
    "Every client sends its token in the Authorization header, the Authorization header, on "
    "every request, and the gateway checks the signature of the token against the keys of "
    "the identity service before anything else runs. So, again, in summary, to make it "
    "clear: JWT bearer tokens, checked at the gateway, keys from the identity service. If a "
    "client sends no token at all, the gateway refuses the request with a 401, which is "
    "exactly what we want, for every client, for every request, without any exception."
)
COOKIES = "The public API authenticates requests with session cookies."
SWITCHED = (
    "The public API no longer authenticates requests with JWT bearer tokens: from tomorrow "
    "it uses session cookies."
)


async def _write(
    kernel: Kernel, caller: CallerIdentity, text: str, confidence: float, **fields: Any
) -> UUID:
    """A belief by ``caller``; its record id."""
    record = MemoryRecord.draft(
        MemoryType.BELIEF,
        text,
        source_agent=caller.agent_id,
        source_confidence=confidence,
        **fields,
    )
    result = await kernel.gate.evaluate(GateRequest(GateAction.CREATE, record, caller, EXTERNAL))
    assert result.record_id is not None, result.reason
    await kernel.events.settled()
    return result.record_id


async def _compressed(kernel: Kernel, caller: CallerIdentity) -> tuple[UUID, UUID]:
    """The long JWT belief by ``caller``, compressed by a deep pass: (its id, the summary's)."""
    verbose = await _write(kernel, caller, VERBOSE_AUTH, 0.9)
    report = await kernel.consolidation.run(DEEP)
    [item] = [item for batch in report.batches for item in batch.items]
    assert (ConsolidationAction.COMPRESS, (verbose,)) == (item.action, item.sources)
    return verbose, item.record_id


async def _found_before_the_batch(
    kernel: Kernel,
    newer: UUID,
    older: UUID,
    classification: str = "contradiction",
    steps: tuple[str, ...] = ("challenge_older", "challenge_newer"),
) -> Event:
    """The ``memory.conflicts_found`` event of the write of ``newer`` (its first version) as
    its Layer 2 would have published it had it read ``older`` before the batch: by default a
    contradiction whose resolution challenges both claims."""
    written = await head_of(kernel, newer)
    assert written.version == 1
    payload = {
        "record_id": str(newer),
        "version_id": str(written.id),
        "decision_id": str(written.gate_decision_id),
        "conflicts": [
            {
                "classification": classification,
                "existing_record_id": str(older),
                "existing_version_id": str(older),
                "similarity": 0.8,
                "reason": f"{classification} (conflict-gbdt@8)",
                "steps": list(steps),
            }
        ],
    }
    return Event(CONFLICTS_FOUND, newer, payload)


async def _statuses(kernel: Kernel, *ids: UUID) -> list[MemoryStatus]:
    """The status of each record's head."""
    return [(await head_of(kernel, record_id)).status for record_id in ids]


async def test_a_contradiction_of_a_compressed_record_challenges_the_compression(
    kernel: Kernel,
) -> None:
    """A trusted agent's contradiction, resolved after a batch compressed the record it
    contradicts, challenges the compressed record (made from that record alone) in its place:
    the source stays consolidated, nothing is escalated, each restatement has its audit row,
    and a second delivery changes nothing."""
    verbose, summary = await _compressed(kernel, BOSS)
    cookies = await _write(kernel, BOSS, COOKIES, 0.5)

    found = await _found_before_the_batch(kernel, cookies, verbose)
    done = await kernel.gate.resolve_conflicts(found)
    await kernel.events.settled()

    expected = [MemoryStatus.CONSOLIDATED, MemoryStatus.CHALLENGED, MemoryStatus.CHALLENGED]
    assert expected == await _statuses(kernel, verbose, summary, cookies)
    assert {summary, cookies} == {result.record_id for result in done}
    assert {GateDecisionType.SELF_HEALING} == {
        (await head_of(kernel, record_id)).gate_decision_type for record_id in (summary, cookies)
    }
    assert [] == await kernel.admin_queue.pending()
    again = await kernel.gate.resolve_conflicts(found)
    assert [True] == [result.replayed for result in again]  # the compression says it already
    assert [2, 2] == [(await head_of(kernel, r)).version for r in (summary, cookies)]
    assert await broken_invariants(kernel) == []


async def test_a_contradiction_its_writer_may_not_carry_to_the_compression_is_escalated(
    kernel: Kernel,
) -> None:
    """A standard agent may challenge another standard agent's record, but the record
    compressed from it stands as consolidation wrote it (trusted): resolved after the batch,
    the contradiction leaves both the source (consolidated) and the compression (active) as
    they are, challenges the agent's own claim, and is escalated naming the compression."""
    verbose, summary = await _compressed(kernel, WRITER)
    cookies = await _write(kernel, WRITER, COOKIES, 0.5)

    found = await _found_before_the_batch(kernel, cookies, verbose)
    await kernel.gate.resolve_conflicts(found)
    await kernel.events.settled()

    expected = [MemoryStatus.CONSOLIDATED, MemoryStatus.ACTIVE, MemoryStatus.CHALLENGED]
    assert expected == await _statuses(kernel, verbose, summary, cookies)
    [escalation] = [dict(row["payload"]) for row in await kernel.admin_queue.pending()]
    assert (str(summary), str(verbose), str(cookies)) == (
        escalation["existing_record_id"],
        escalation["consumed_record_id"],
        escalation["record_id"],
    )
    assert "standard agent's claim may not change a record a trusted agent wrote" in str(
        escalation["escalated"]
    )
    await kernel.gate.resolve_conflicts(found)
    await kernel.events.settled()
    assert 1 == len(await kernel.admin_queue.pending())  # one escalation, however delivered
    assert await broken_invariants(kernel) == []


async def test_a_contradiction_of_a_record_whose_summary_was_forgotten_changes_nothing(
    kernel: Kernel,
) -> None:
    """An agent forgot the compressed record before the resolution was delivered, which
    forgets its knowledge (its source stays consolidated): the contradicted claim no longer
    stands, so neither record is restated and nothing is escalated."""
    verbose, summary = await _compressed(kernel, BOSS)
    cookies = await _write(kernel, BOSS, COOKIES, 0.5)
    made = await head_of(kernel, summary)
    forgotten = await kernel.gate.evaluate(
        GateRequest.forget(made, BOSS, EXTERNAL, expected_version=made.version)
    )
    assert forgotten.record_id == summary, forgotten.reason
    await kernel.events.settled()

    found = await _found_before_the_batch(kernel, cookies, verbose)
    assert () == await kernel.gate.resolve_conflicts(found)
    await kernel.events.settled()

    expected = [MemoryStatus.CONSOLIDATED, MemoryStatus.FORGOTTEN, MemoryStatus.ACTIVE]
    assert expected == await _statuses(kernel, verbose, summary, cookies)
    assert [] == await kernel.admin_queue.pending()
    assert await broken_invariants(kernel) == []


async def test_a_supersession_of_a_compressed_record_ends_the_compression(
    kernel: Kernel,
) -> None:
    """A trusted agent's newer statement, resolved after a batch compressed the record it
    supersedes, ends the validity of the source (which stays consolidated) and of the
    compressed record made from it alone, which stays active: what was believed before stays
    answerable, and nothing is escalated."""
    verbose, summary = await _compressed(kernel, BOSS)
    switched = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    newer = await _write(kernel, BOSS, SWITCHED, 0.9, event_time=switched)

    found = await _found_before_the_batch(
        kernel, newer, verbose, "supersession", ("supersede_older",)
    )
    await kernel.gate.resolve_conflicts(found)
    await kernel.events.settled()

    source, made = await head_of(kernel, verbose), await head_of(kernel, summary)
    assert (MemoryStatus.CONSOLIDATED, switched) == (source.status, source.event_time_end)
    assert (MemoryStatus.ACTIVE, switched) == (made.status, made.event_time_end)
    assert [] == await kernel.admin_queue.pending()
    assert await broken_invariants(kernel) == []
