"""Resolution steps on a record a consolidation batch consumed after the conflicting write.

A batch may commit between a write that found a conflict and the delivery of its resolution:
the record a step would change is then ``consolidated``, hidden from reads, and its claim is
read from the consolidated record made from it (its summary). Restating the record as
``challenged`` would make it readable again beside a summary that states the same fact
unchallenged. So the record stays ``consolidated`` (a supersession still ends its validity,
which changes no status and holds if the batch is undone), and the step is carried out on the
summary instead, as far as that changes nothing else a reader relies on (ADR-010):

* a summary made from that record alone (a compression) is restated as the record would have
  been (``challenged``, or its validity ended) when the writer of the conflicting record may
  change it, by the rule of every resolution
  (:func:`~engram.memory.gate.access.resolution_denial`, with the summary's standing:
  content consolidation wrote stands as trusted);
* a summary made from several records, or one the writer may not change, is left as it is and
  the conflict is **escalated**: ``memory.conflict_detected`` names the summary as the existing
  record and the consumed one beside it. Challenging such a summary would dispute, and ending
  it would retire, what the other records state, which nothing contradicts;
* no live summary (an agent forgot it, which forgets its knowledge): the claim no longer
  stands; the step is skipped and logged.

Each restatement is a ``self_healing`` UPDATE through the Gate under a request id of its own
(:func:`~engram.memory.gate.resolution.resolution_requests` with ``summary``); an escalation is
published through the outbox, once per write and summary in the admin queue.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import structlog

from engram.infra.db import DatabaseAdapter
from engram.infra.events import EventBus
from engram.memory import store
from engram.memory.audit.entry import caller_from_json
from engram.memory.audit.log import AuditLog
from engram.memory.conflict.detection import ConflictResult
from engram.memory.gate.access import resolution_denial
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.gate.resolution import (
    RESOLVER,
    RETRIES_AFTER_MOVE,
    Step,
    in_effect,
    publish_escalation,
    resolution_requests,
)
from engram.memory.types import (
    CallerIdentity,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    TrustLevel,
)

log = structlog.get_logger("engram.memory.gate.consumed")


def summary_denial(
    summary: store.Summary,
    *,
    writer: CallerIdentity,
    decision_type: GateDecisionType,
    standing: TrustLevel,
    grounds: MemoryRecord,
) -> str | None:
    """Why a step on ``writer``'s behalf, on the grounds of ``grounds``, may not change
    ``summary`` in place of a record it consumed (None if it may; see the module)."""
    if summary.sources > 1:
        return (
            f"the claim was consolidated with {summary.sources - 1} other record(s); "
            "resolving it on their summary would change what they state too"
        )
    if summary.head.status is MemoryStatus.CONSOLIDATED:
        return "the claim's summary was itself consolidated"
    if decision_type is not GateDecisionType.EXTERNAL:
        # Internal writers may change any record, but not on grounds hidden from its readers.
        if summary.head.access_level.allows(grounds.access_level):
            return None
        writer = RESOLVER
    return resolution_denial(writer, summary.head, standing=standing, newer=grounds)


@dataclass(frozen=True, slots=True)
class ConsumedStep:
    """One step whose record (``consumed``) a batch consumed since the write."""

    step: Step
    conflict: ConflictResult
    decision_id: UUID
    consumed: MemoryRecord
    #: The record on whose grounds the step changes ``consumed`` (the other claim).
    grounds: MemoryRecord
    #: The version the conflicting write stored (its record is in every escalation).
    write_version: UUID
    #: The head of the conflicting write's record now.
    write: MemoryRecord


class SummarySteps:
    """Carries out a step on the summary of the record it would change (see the module)."""

    def __init__(
        self,
        *,
        db: DatabaseAdapter,
        events: EventBus,
        audit: AuditLog,
        evaluate: Callable[[GateRequest], Awaitable[GateResult]],
    ) -> None:
        self._db = db
        self._events = events
        self._audit = audit
        self._evaluate = evaluate

    async def carry_out(self, pending: ConsumedStep) -> list[GateResult]:
        """Carry out ``pending`` on each live summary of its consumed record, or escalate."""
        summaries = await store.summaries_of(self._db, pending.consumed.record_id)
        if not summaries:
            log.info("conflict.resolution_skipped", reason="the consumed claim was forgotten")
            return []
        done = []
        for summary in summaries:
            denial = await self._denial(pending, summary)
            if denial is not None:
                await self._escalate(pending, summary, denial)
                continue
            outcome = await self._restate(pending, summary.head)
            if outcome is not None:
                done.append(outcome)
        return done

    async def _denial(self, pending: ConsumedStep, summary: store.Summary) -> str | None:
        entry = await self._audit.by_decision(pending.decision_id)
        if entry is None:  # pragma: no cover - the write's audit row commits with its event
            return "the conflicting write is not in the audit log"
        return summary_denial(
            summary,
            writer=caller_from_json(json.loads(entry.caller)),
            decision_type=GateDecisionType(entry.decision_type),
            standing=await store.standing(self._db, summary.head.record_id),
            grounds=pending.grounds,
        )

    async def _restate(self, pending: ConsumedStep, head: MemoryRecord) -> GateResult | None:
        """The step proposed on the summary's head, and again against its current head while
        that moves on under it with its content kept; None when the head says it already."""
        outcome = None
        for attempt in range(RETRIES_AFTER_MOVE + 1):
            if attempt:
                current = await store.head(self._db, head.record_id)
                if (
                    current is None
                    or current.status is MemoryStatus.FORGOTTEN
                    or current.content != head.content
                ):
                    log.info("conflict.resolution_skipped", reason="the summary moved on")
                    return outcome
                head = current
            request = self._request(pending, head, revision=head.version if attempt else None)
            if in_effect(pending.step, head, request.record):
                return outcome
            outcome = await self._evaluate(request)
            if outcome.decision is not GateDecision.CONFLICT:
                return outcome
        log.warning("conflict.resolution_failed", error="the summary kept moving")
        return outcome

    def _request(
        self, pending: ConsumedStep, head: MemoryRecord, *, revision: int | None
    ) -> GateRequest:
        newer, older = (
            (head, pending.grounds)
            if pending.step is Step.CHALLENGE_NEWER
            else (pending.grounds, head)
        )
        [request] = resolution_requests(
            pending.conflict,
            newer=newer,
            older=older,
            decision_id=pending.decision_id,
            steps=[pending.step],
            revision=revision,
            summary=head.record_id,
        )
        return request

    async def _escalate(self, pending: ConsumedStep, summary: store.Summary, why: str) -> None:
        """Put the dispute in front of a person, naming the summary that states the claim."""
        conflict, write = pending.conflict, pending.write
        payload: dict[str, Any] = {
            "classification": conflict.classification.value,
            "existing_record_id": str(summary.head.record_id),
            "existing_version_id": str(summary.made_id),
            "consumed_record_id": str(pending.consumed.record_id),
            "similarity": conflict.similarity,
            "reason": conflict.reason,
            "record_id": str(write.record_id),
            "version_id": str(pending.write_version),
            "decision_id": str(pending.decision_id),
            "type": write.type.value,
            "namespace": write.namespace,
            "escalated": why,
        }
        await publish_escalation(self._db, self._events, write.record_id, payload)
        log.info(
            "conflict.resolution_escalated",
            record_id=str(write.record_id),
            summary_record_id=str(summary.head.record_id),
            classification=conflict.classification.value,
        )
