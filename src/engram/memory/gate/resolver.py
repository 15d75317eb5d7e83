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
from engram.infra.events import Event, EventBus
from engram.memory import store
from engram.memory.audit.log import AuditLog
from engram.memory.conflict.detection import ConflictResult
from engram.memory.gate.consumed import ConsumedStep, SummarySteps
from engram.memory.gate.reopen import look_again
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.gate.resolution import (
    FULL_STEPS,
    RETRIES_AFTER_MOVE,
    Step,
    in_effect,
    resolution_requests,
)
from engram.memory.types import (
    ConflictClassification,
    GateDecision,
    MemoryRecord,
    MemoryStatus,
)

log = structlog.get_logger("engram.memory.gate.resolver")


class Resolver:
    """The subscriber of ``memory.conflicts_found``: carries out each write's resolutions
    through the Gate's ``evaluate`` (:func:`carry_out`)."""

    def __init__(
        self,
        db: DatabaseAdapter,
        events: EventBus,
        audit: AuditLog,
        evaluate: Callable[[GateRequest], Awaitable[GateResult]],
    ) -> None:
        self._db = db
        self._events = events
        self._evaluate = evaluate
        self._summaries = SummarySteps(db=db, events=events, audit=audit, evaluate=evaluate)

    async def carry_out(self, event: Event) -> tuple[GateResult, ...]:
        """Carry out the resolutions of the write ``event`` names (:func:`carry_out`)."""
        return await carry_out(
            event,
            db=self._db,
            events=self._events,
            evaluate=self._evaluate,
            summaries=self._summaries,
        )


async def carry_out(
    event: Event,
    *,
    db: DatabaseAdapter,
    events: EventBus,
    evaluate: Callable[[GateRequest], Awaitable[GateResult]],
    summaries: SummarySteps,
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
    tried again against the record as it is now (:func:`_carry_out_step`); one whose record
    a batch consumed since is carried out on the summary made from it, or escalated
    (:mod:`~engram.memory.gate.consumed`).
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
            pending = _Pending(step, conflict, newer_version, decision_id)
            try:
                outcomes = await _carry_out_step(
                    pending, older=older, newer=newer, db=db, evaluate=evaluate, summaries=summaries
                )
            except InfrastructureError:
                # The outbox delivers the event again; done steps replay by request id.
                log.warning("conflict.resolution_deferred", reason="infrastructure")
                raise
            except EngramError as exc:
                log.warning("conflict.resolution_failed", error=type(exc).__name__)
                continue
            done += outcomes
            await _hidden_meanwhile(
                db, events, step=step, older=older, newer=newer, outcomes=outcomes
            )
            for outcome in outcomes:
                changed = outcome.modified_record
                if changed is not None and changed.record_id == newer.record_id:
                    newer = changed
    return tuple(done)


async def _hidden_meanwhile(
    db: DatabaseAdapter,
    events: EventBus,
    *,
    step: Step,
    older: MemoryRecord,
    newer: MemoryRecord,
    outcomes: list[GateResult],
) -> None:
    """After ``step`` changed its record: when a change of level that committed while it
    was carried out (after :func:`_still_shown`) hides the grounds from the changed
    record's readers, have the reopener look at that change again. The change's own
    delivery may have come before the step committed (another kernel's, or one deferred),
    and found nothing to undo; a change committed after the step is delivered after it."""
    changed_before, grounds_before = (
        (newer, older) if step is Step.CHALLENGE_NEWER else (older, newer)
    )
    if not any(
        o.approved
        and o.modified_record is not None
        and o.modified_record.record_id == changed_before.record_id
        for o in outcomes
    ):
        return
    changed = await store.head(db, changed_before.record_id)
    grounds = await store.head(db, grounds_before.record_id)
    if changed is None or grounds is None or changed.access_level.allows(grounds.access_level):
        return
    moved = grounds if grounds.access_level is not grounds_before.access_level else changed
    log.info("conflict.resolution_hidden_meanwhile", record_id=str(moved.record_id))
    await look_again(db, events, moved)


def _still_shown(step: Step, older: MemoryRecord, newer: MemoryRecord) -> bool:
    """Whether the record ``step`` changes may still change on the other's grounds: the
    levels were checked when the write planned it, but either record may have been raised
    since (a trusted agent's UPDATE, a PII rescan) above the readers of the one it changes."""
    changed, grounds = (newer, older) if step is Step.CHALLENGE_NEWER else (older, newer)
    return changed.access_level.allows(grounds.access_level)


@dataclass(frozen=True, slots=True)
class _Pending:
    """One step of one conflict's resolution, and what finds its claims again."""

    step: Step
    conflict: ConflictResult
    newer_version: UUID
    decision_id: UUID


async def _carry_out_step(
    pending: _Pending,
    *,
    older: MemoryRecord,
    newer: MemoryRecord,
    db: DatabaseAdapter,
    evaluate: Callable[[GateRequest], Awaitable[GateResult]],
    summaries: SummarySteps,
) -> list[GateResult]:
    """Propose one step; when it is refused because its record moved on since it was read,
    and while both claims still stand and the changed record's readers may still read the
    other (:func:`_still_shown`), propose it again against the current head under a
    request id naming that head's version (so a second delivery replays it), unless the head
    already carries the step's change (an earlier delivery made it). A record a batch
    consumed is not restated out of its summary: a challenge goes to the summary (or is
    escalated), and a supersession ends the record's validity, keeping it ``consolidated``,
    and then goes to the summary too."""
    step, conflict = pending.step, pending.conflict
    outcome: GateResult | None = None
    settled = False
    for attempt in range(RETRIES_AFTER_MOVE + 1):
        if attempt:
            newer_now = await _standing_head(db, pending.newer_version)
            older_now = await _standing_head(db, conflict.existing_version_id)
            if newer_now is None or older_now is None:
                log.info("conflict.resolution_skipped", reason="a claim moved on during the step")
                return [] if outcome is None else [outcome]
            if not _still_shown(step, older_now, newer_now):
                # what moved it may be a change of level (hostile pass R): the first try was
                # checked against the levels it read, this one must be against these
                log.info("conflict.resolution_skipped", reason="a level changed during the step")
                return [] if outcome is None else [outcome]
            newer, older = newer_now, older_now
        target, grounds = (newer, older) if step is Step.CHALLENGE_NEWER else (older, newer)
        consumed = target.status is MemoryStatus.CONSOLIDATED
        if consumed and step is not Step.SUPERSEDE_OLDER:
            return await summaries.carry_out(_consumed(pending, target, grounds, newer))
        [request] = resolution_requests(
            conflict,
            newer=newer,
            older=older,
            decision_id=pending.decision_id,
            steps=[step],
            revision=target.version if attempt else None,
        )
        if attempt and in_effect(step, target, request.record):
            settled = True
            break
        outcome = await evaluate(request)
        if outcome.decision is not GateDecision.CONFLICT:
            settled = True
            break
    if not settled:
        log.warning("conflict.resolution_failed", error="the record kept moving")
    done = [] if outcome is None else [outcome]
    if settled and consumed:
        done += await summaries.carry_out(_consumed(pending, target, grounds, newer))
    return done


def _consumed(
    pending: _Pending, target: MemoryRecord, grounds: MemoryRecord, newer: MemoryRecord
) -> ConsumedStep:
    return ConsumedStep(
        step=pending.step,
        conflict=pending.conflict,
        decision_id=pending.decision_id,
        consumed=target,
        grounds=grounds,
        write_version=pending.newer_version,
        write=newer,
    )


async def _standing_head(db: DatabaseAdapter, version_id: UUID) -> MemoryRecord | None:
    """The head of ``version_id``'s record while that version's claim still stands: the
    record is not forgotten, its head says the same, and if a batch consumed it, the summary
    made from it lives (an agent that forgets a summary forgets its knowledge; None
    otherwise)."""
    version = await store.version_by_id(db, version_id)
    if version is None:
        return None
    head = await store.head(db, version.record_id)
    if head is None or head.status is MemoryStatus.FORGOTTEN or head.content != version.content:
        return None
    if head.status is MemoryStatus.CONSOLIDATED and not await store.summaries_of(
        db, head.record_id
    ):
        return None
    return head
