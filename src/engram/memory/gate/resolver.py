"""The resolver: carries out the steps a write planned for its conflicts, through the Gate.

A write's transaction plans which records the resolution of each of its conflicts may change
(:mod:`~engram.memory.gate.resolution`) and puts them in ``memory.conflicts_found``; when the
outbox delivers that event, after the commit and at least once, :func:`carry_out` proposes
each step to the Gate as a ``self_healing`` UPDATE by ``system:conflict-resolver``, under a
request id derived from the write's decision, so it is audited and a second delivery changes
nothing. A conflict either of whose claims no longer stands (forgotten, or its content
changed) is skipped and logged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from uuid import UUID

import structlog

from engram.errors import EngramError, InfrastructureError
from engram.infra.db import DatabaseAdapter
from engram.infra.events import Event
from engram.memory import store
from engram.memory.conflict.detection import ConflictResult
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.gate.resolution import FULL_STEPS, Step, resolution_requests
from engram.memory.types import (
    ConflictClassification,
    GateDecision,
    MemoryRecord,
    MemoryStatus,
)

log = structlog.get_logger("engram.memory.gate.resolver")

#: Times a step is tried again after its record moved on under it.
RETRIES_AFTER_MOVE = 3


async def carry_out(
    event: Event,
    *,
    db: DatabaseAdapter,
    evaluate: Callable[[GateRequest], Awaitable[GateResult]],
) -> tuple[GateResult, ...]:
    """Carry out the resolutions of one write's conflicts (``memory.conflicts_found``).

    Runs when the outbox delivers the event, after the write committed and its caller had its
    answer. Each step is a ``self_healing`` UPDATE with a request id derived from the write's
    decision, so a second delivery changes nothing. A conflict is skipped (and logged) when
    either claim no longer stands: its record was forgotten, or its content changed since
    (a restatement by an earlier step of this resolution still stands); a step is skipped
    when the record it would change may no longer show the other claim to its readers (one
    of them was raised since the write, :func:`_still_shown`). A step whose record
    moved on between the read and the write (its metadata changed, say: the claim stands) is
    tried again against the record as it is now (:func:`_retry_step`).
    """
    payload = event.payload
    newer_version = UUID(payload["version_id"])
    newer = await _standing_head(db, newer_version)
    if newer is None:
        log.info("conflict.resolution_skipped", reason="the newer claim moved on")
        return ()
    decision_id = UUID(payload["decision_id"])
    done: list[GateResult] = []
    for item in payload["conflicts"]:
        conflict = ConflictResult(
            classification=ConflictClassification(item["classification"]),
            existing_record_id=UUID(item["existing_record_id"]),
            existing_version_id=UUID(item["existing_version_id"]),
            similarity=float(item["similarity"]),
            reason=item["reason"],
        )
        older = await _standing_head(db, conflict.existing_version_id)
        if older is None:
            log.info("conflict.resolution_skipped", reason="the existing record moved on")
            continue
        planned = item.get("steps")
        chosen = set(
            FULL_STEPS.get(conflict.classification, ())
            if planned is None
            else (Step(value) for value in planned)
        )
        for step in [c for c in Step if c in chosen and _still_shown(c, older, newer)]:
            requests = resolution_requests(
                conflict, newer=newer, older=older, decision_id=decision_id, steps=[step]
            )
            for follow_up in requests:
                try:
                    outcome = await evaluate(follow_up)
                    if outcome.decision is GateDecision.CONFLICT:
                        moved = _Moved(conflict, newer_version, decision_id)
                        outcome = await _retry_step(step, moved, outcome, db, evaluate)
                except InfrastructureError:
                    # The outbox delivers the event again; done steps replay by request id.
                    log.warning("conflict.resolution_deferred", reason="infrastructure")
                    raise
                except EngramError as exc:
                    log.warning("conflict.resolution_failed", error=type(exc).__name__)
                    continue
                done.append(outcome)
                if follow_up.record.record_id == newer.record_id and outcome.modified_record:
                    newer = outcome.modified_record
    return tuple(done)


def _still_shown(step: Step, older: MemoryRecord, newer: MemoryRecord) -> bool:
    """Whether the record ``step`` changes may still change on the other's grounds: the
    levels were checked when the write planned it, but either record may have been raised
    since (a trusted agent's UPDATE, a PII rescan) above the readers of the one it changes."""
    changed, grounds = (newer, older) if step is Step.CHALLENGE_NEWER else (older, newer)
    return changed.access_level.allows(grounds.access_level)


@dataclass(frozen=True, slots=True)
class _Moved:
    """What a step retried after its record moved on needs to find the claims again."""

    conflict: ConflictResult
    newer_version: UUID
    decision_id: UUID


async def _retry_step(
    step: Step,
    moved: _Moved,
    outcome: GateResult,
    db: DatabaseAdapter,
    evaluate: Callable[[GateRequest], Awaitable[GateResult]],
) -> GateResult:
    """A step refused because its record moved on since it was read: while both claims
    still stand, the step is proposed again against the current head, under a request id
    naming that head's version (so a second delivery replays it), unless the head already
    carries the step's change (an earlier delivery made it)."""
    conflict = moved.conflict
    for _ in range(RETRIES_AFTER_MOVE):
        newer = await _standing_head(db, moved.newer_version)
        older = await _standing_head(db, conflict.existing_version_id)
        if newer is None or older is None:
            log.info("conflict.resolution_skipped", reason="a claim moved on during the step")
            return outcome
        target = newer if step is Step.CHALLENGE_NEWER else older
        [request] = resolution_requests(
            conflict,
            newer=newer,
            older=older,
            decision_id=moved.decision_id,
            steps=[step],
            revision=target.version,
        )
        if _in_effect(step, target, request.record):
            return outcome
        outcome = await evaluate(request)
        if outcome.decision is not GateDecision.CONFLICT:
            return outcome
    log.warning("conflict.resolution_failed", error="the record kept moving")
    return outcome


def _in_effect(step: Step, head: MemoryRecord, proposal: MemoryRecord) -> bool:
    """Whether ``head`` already says what ``step`` would write."""
    if step is Step.SUPERSEDE_OLDER:
        return head.event_time_end is not None and head.event_time_end <= (
            proposal.event_time_end or head.event_time_end
        )
    return head.status is MemoryStatus.CHALLENGED


async def _standing_head(db: DatabaseAdapter, version_id: UUID) -> MemoryRecord | None:
    """The head of ``version_id``'s record while that version's claim still stands: the
    record is not forgotten and its head says the same (None otherwise)."""
    version = await store.version_by_id(db, version_id)
    if version is None:
        return None
    head = await store.head(db, version.record_id)
    if head is None or head.status is MemoryStatus.FORGOTTEN or head.content != version.content:
        return None
    return head
