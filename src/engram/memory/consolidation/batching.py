"""How a pass's planned topics become batches of Gate requests, and what a committed batch
recorded: the pure part of :mod:`.engine`'s commit (no database, no clock)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from uuid import UUID

from engram.memory.consolidation.actions import most_closed
from engram.memory.consolidation.model import BatchItem, ConsolidationCandidate, SkipReason
from engram.memory.consolidation.undo import CONSOLIDATOR, restate
from engram.memory.gate.groups import GroupOutcome
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
)

#: Called after each batch is written: (topics done, topics planned so far; the total grows
#: while a level is still being planned).
Progress = Callable[[int, int], None]


def chunks(
    planned: Sequence[ConsolidationCandidate], size: int
) -> list[list[ConsolidationCandidate]]:
    """Topics in batches of about ``size`` sources (a larger topic is a batch of its own);
    a batch holds topics of one access level only."""
    chunks: list[list[ConsolidationCandidate]] = []
    current: list[ConsolidationCandidate] = []
    count = 0
    for candidate in planned:
        other_level = current and current[-1].access_level is not candidate.access_level
        if current and (other_level or count + len(candidate.sources) > size):
            chunks.append(current)
            current, count = [], 0
        current.append(candidate)
        count += len(candidate.sources)
    if current:
        chunks.append(current)
    return chunks


def shifted(progress: Progress, before: int) -> Progress:
    """``progress`` of one level's topics, counted after the ``before`` of earlier levels
    (the topics still to plan, of this level or the next, are not known yet)."""

    def advance(done: int, total: int) -> None:
        progress(before + done, before + total)

    return advance


def requests(batch_id: UUID, n: int, candidate: ConsolidationCandidate) -> list[GateRequest]:
    """One topic's requests: the consolidated record's CREATE, then each source's UPDATE."""
    sources = candidate.sources
    first = min(s.event_time or s.ingestion_time for s in sources)
    closest = most_closed(sources)
    record = MemoryRecord.draft(
        candidate.proposal_type,
        candidate.content,
        source_agent=CONSOLIDATOR.agent_id,
        metadata=candidate.metadata,
        event_time=first,
        access_level=candidate.access_level,
        source_confidence=candidate.confidence,
        evidence_links=[s.id for s in sources],
        namespace=sources[0].namespace,
        classification=closest.classification,
    )
    requests = [
        GateRequest(
            GateAction.CREATE,
            record,
            CONSOLIDATOR,
            GateDecisionType.CONSOLIDATION,
            request_id=f"consolidation:{batch_id}:{n}",
        )
    ]
    requests += [
        restate(
            source,
            MemoryStatus.CONSOLIDATED,
            request_id=f"consolidation:{batch_id}:{source.record_id}",
        )
        for source in sources
    ]
    return requests


def summarise(
    chunk: Sequence[ConsolidationCandidate], outcomes: Sequence[GroupOutcome]
) -> tuple[list[BatchItem], dict[str, int]]:
    items: list[BatchItem] = []
    skipped: Counter[str] = Counter()
    for candidate, outcome in zip(chunk, outcomes, strict=True):
        if not outcome.written:
            reason = outcome.skipped or SkipReason.REJECTED.value
            skipped[reason] += len(candidate.sources)
            continue
        created = outcome.results[0]
        if created.record_id is None:  # pragma: no cover - an approved CREATE names its record
            raise RuntimeError("a consolidated record without an id")
        items.append(
            BatchItem(
                action=candidate.action,
                record_id=created.record_id,
                sources=candidate.source_ids,
                source_versions=tuple(s.id for s in candidate.sources),
            )
        )
    return items, dict(skipped)
