"""Resolutions undone when the claim they rested on leaves the changed record's readers.

A resolution changes a record R on the grounds of another claim G only while everyone who may
read R may read G (:func:`~engram.memory.gate.resolution.plan_resolution`, and
``resolver._still_shown`` at delivery). An approved UPDATE may later change a level: G raised
above R's readers (a trusted agent hides the newer claim), or R lowered below G's. R's readers
would then read R as ended or ``challenged`` on grounds they may not read. What they should
read is what they would have read had the levels been so from the start: the conflict
escalated, R as it was.

* The UPDATE's own transaction publishes :data:`LEVEL_CHANGED` (:func:`note_level_change`),
  so the change and the request to look at its resolutions commit together; the outbox
  delivers it at least once, after the commit.
* :class:`Reopener` finds the resolver's approved steps that changed a record on the grounds of
  another, one of the two being the changed record, where the changed one's readers may no
  longer read the grounds. Each is undone only while its change is what the record shows:
  its content is the one the step restated, the step's change is still on the head, and no
  later step of the same kind on grounds its readers may read says the same. The record is
  restated as it was before the step (validity end, or status), as a ``self_healing`` UPDATE
  by the resolver through the Gate, under a request id naming the level change, the step and
  the head's version (idempotent; a head that moved on under it is read again, as
  :mod:`~engram.memory.gate.resolver` does).
* Before that, the conflict is escalated (``memory.conflict_detected`` naming both records;
  the admin queue keeps one per level change and conflict), and the newer claim, when it was
  the grounds, is marked ``challenged`` as an escalated write marks it (its readers may read
  the older record; it still states the claim it was written with). A delivery interrupted
  in between does all three again: each is idempotent.

A FORGET changes no level and publishes nothing: forgetting a claim is not retracting it.
A step carried out on a consolidated summary, or on a record consolidated or forgotten since,
is left as it is (logged); an ending carried out on a source a batch had consumed before it
is undone, the source staying ``consolidated``. Nothing is redone when a level is changed back.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from engram.errors import EngramError, InfrastructureError
from engram.infra.db import Connection, DatabaseAdapter, Row
from engram.infra.events import Event, EventBus
from engram.infra.sql import load_queries
from engram.memory import store
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.gate.resolution import (
    RESOLVER,
    RETRIES_AFTER_MOVE,
    Step,
    publish_escalation,
    restatement,
)
from engram.memory.types import GateDecision, MemoryRecord, MemoryStatus

log = structlog.get_logger("engram.memory.gate.reopen")

SQL = load_queries("engram.memory.gate", "reopen.sql")

#: The event an approved UPDATE that changes a record's access level publishes.
LEVEL_CHANGED = "memory.level_changed"

#: Each step as its request id names it (``resolution_requests``).
_NAMED = {
    "supersede": Step.SUPERSEDE_OLDER,
    "challenge-older": Step.CHALLENGE_OLDER,
    "challenge-newer": Step.CHALLENGE_NEWER,
}
#: Statuses an ending kept, and its undoing keeps too (as ``resolution_requests`` does).
_KEPT = (MemoryStatus.CHALLENGED, MemoryStatus.CONSOLIDATED)
ESCALATED = (
    "the claim a resolution rested on is no longer readable by the readers of the record it "
    "changed; the resolution was undone"
)


def level_change(
    *, before: MemoryRecord, after: MemoryRecord, decision_id: uuid.UUID
) -> dict[str, Any] | None:
    """The payload of :data:`LEVEL_CHANGED` when ``after`` (the new version) has another
    access level than ``before`` (the head it replaces), else None."""
    if before.access_level is after.access_level:
        return None
    return {
        "record_id": str(after.record_id),
        "version_id": str(after.id),
        "decision_id": str(decision_id),
        "from_level": before.access_level.value,
        "to_level": after.access_level.value,
    }


async def note_level_change(
    conn: Connection,
    events: EventBus,
    *,
    before: MemoryRecord,
    after: MemoryRecord,
    decision_id: uuid.UUID,
) -> None:
    """Inside the UPDATE's transaction: publish :data:`LEVEL_CHANGED` when the level changed
    (:func:`level_change`)."""
    payload = level_change(before=before, after=after, decision_id=decision_id)
    if payload is not None:
        await events.publish(conn, Event(LEVEL_CHANGED, after.record_id, payload))


async def look_again(db: DatabaseAdapter, events: EventBus, moved: MemoryRecord) -> None:
    """Publish :data:`LEVEL_CHANGED` again for the change of level that gave ``moved`` (a
    head) its level, in a transaction of its own: a resolution step that committed after
    that change (it checked the levels before) was not there when the change's own event
    was delivered. The reopener's requests are keyed by the change's decision, so a second
    look at a change it has seen already does nothing new."""
    if moved.gate_decision_id is None:  # pragma: no cover - every stored head has one
        return
    payload = {
        "record_id": str(moved.record_id),
        "version_id": str(moved.id),
        "decision_id": str(moved.gate_decision_id),
        "to_level": moved.access_level.value,
    }
    async with db.transaction() as conn:
        await events.publish(conn, Event(LEVEL_CHANGED, moved.record_id, payload))
    events.committed()


@dataclass(frozen=True, slots=True)
class LevelChange:
    """The UPDATE that changed a record's level: its decision and the version it stored."""

    record_id: uuid.UUID
    version_id: uuid.UUID
    decision_id: uuid.UUID

    @classmethod
    def from_event(cls, event: Event) -> LevelChange:
        """The change a :data:`LEVEL_CHANGED` event names."""
        payload = event.payload
        return cls(
            record_id=uuid.UUID(payload["record_id"]),
            version_id=uuid.UUID(payload["version_id"]),
            decision_id=uuid.UUID(payload["decision_id"]),
        )


@dataclass(frozen=True, slots=True)
class DoneStep:
    """One approved resolution step, with the conflict it carried out."""

    seq: int
    decision_id: uuid.UUID
    step: Step
    written: uuid.UUID | None
    updated: bool
    classification: str
    similarity: float
    reason: str
    newer_version: uuid.UUID
    newer_record: uuid.UUID
    older_version: uuid.UUID
    older_record: uuid.UUID

    @classmethod
    def from_row(cls, row: Row) -> DoneStep | None:
        """The step of a ``resolution_steps`` row (None for a name this module does not know)."""
        step = _NAMED.get(str(row["request_id"]).split(":")[3].split("@")[0])
        if step is None:
            return None
        return cls(
            seq=row["seq"],
            decision_id=row["decision_id"],
            step=step,
            written=row["version_id"],
            updated=row["outcome"] == "updated",
            classification=row["classification"] or "",
            similarity=float(row["similarity"]),
            reason=row["reason"] or "",
            newer_version=row["newer_version"],
            newer_record=row["newer_record"],
            older_version=row["older_version"],
            older_record=row["older_record"],
        )

    @property
    def changed(self) -> uuid.UUID:
        """The record the step changed."""
        return self.newer_record if self.step is Step.CHALLENGE_NEWER else self.older_record

    @property
    def grounds(self) -> uuid.UUID:
        """The record on whose claim it changed it."""
        return self.older_record if self.step is Step.CHALLENGE_NEWER else self.newer_record

    @property
    def ends(self) -> bool:
        """Whether the step ended a validity (else it marked a record ``challenged``)."""
        return self.step is Step.SUPERSEDE_OLDER


class Reopener:
    """The subscriber of :data:`LEVEL_CHANGED` (see the module docstring)."""

    def __init__(
        self,
        *,
        db: DatabaseAdapter,
        events: EventBus,
        evaluate: Callable[[GateRequest], Awaitable[GateResult]],
    ) -> None:
        self._db = db
        self._events = events
        self._evaluate = evaluate

    async def on_level_changed(self, event: Event) -> tuple[GateResult, ...]:
        """Undo the resolutions the level change of ``event``'s record leaves resting on
        grounds hidden from the changed record's readers; the Gate's results."""
        change = LevelChange.from_event(event)
        changed_id = change.record_id
        partners = [
            row["record_id"] for row in await self._db.fetch(SQL["conflict_partners"], changed_id)
        ]
        done: list[GateResult] = []
        for record_id in [changed_id, *sorted(set(partners))]:
            steps = await self._steps(record_id)
            for step in reversed(steps):  # the newest first: it is the one the head shows
                if changed_id in (step.changed, step.grounds):
                    kin = [s for s in steps if s.ends is step.ends and s is not step]
                    try:
                        done += await self._undo(step, kin, change)
                    except InfrastructureError:
                        # The outbox delivers the event again; what was done replays by id.
                        log.warning("conflict.reopen_deferred", reason="infrastructure")
                        raise
                    except EngramError as exc:
                        log.warning("conflict.reopen_failed", error=type(exc).__name__)
        return tuple(done)

    async def _steps(self, record_id: uuid.UUID) -> list[DoneStep]:
        rows = await self._db.fetch(SQL["resolution_steps"], record_id, RESOLVER.agent_id)
        return [step for step in map(DoneStep.from_row, rows) if step is not None]

    async def _undo(
        self, step: DoneStep, kin: list[DoneStep], change: LevelChange
    ) -> list[GateResult]:
        """Undo ``step`` if its grounds are hidden from its record's readers and its change
        is still what the record shows (``kin``: the record's other steps of its kind)."""
        for attempt in range(RETRIES_AFTER_MOVE + 1):
            head = await store.head(self._db, step.changed)
            grounds = await store.head(self._db, step.grounds)
            if head is None or grounds is None:
                return []
            if head.access_level.allows(grounds.access_level):
                return []  # its readers may still read why it changed
            request = await self._request(step, kin, head, change.decision_id)
            if request is None:
                return []
            if not attempt and not await self._escalated_already(step, change):
                await self._escalate(step, change.decision_id, grounds)
                await self._challenge_grounds(step, change.decision_id, head)
            outcome = await self._evaluate(request)
            if outcome.decision is not GateDecision.CONFLICT:
                log.info(
                    "conflict.reopened",
                    record_id=str(step.changed),
                    grounds_record_id=str(step.grounds),
                    step=step.step.value,
                    decision=outcome.decision.value,
                )
                return [outcome]
        log.warning("conflict.reopen_failed", reason="the record kept moving")
        return []

    async def _request(
        self, step: DoneStep, kin: list[DoneStep], head: MemoryRecord, change: uuid.UUID
    ) -> GateRequest | None:
        """The restatement undoing ``step`` on ``head``, or None (logged) when the record
        does not show the step's change any more, or shows it on other readable grounds."""
        written = (
            None if step.written is None else await store.version_by_id(self._db, step.written)
        )
        if not step.updated or written is None or written.record_id != head.record_id:
            return None  # the step wrote no version (its change was there already)
        # A source a batch had consumed before the step (the step ended its validity and
        # kept it consolidated) is restated as it was; one consumed or forgotten since is not.
        consumed_before = step.ends and written.status is MemoryStatus.CONSOLIDATED
        if head.status is MemoryStatus.FORGOTTEN or (
            head.status is MemoryStatus.CONSOLIDATED and not consumed_before
        ):
            _skipped(step, "the record was forgotten or consolidated since")
            return None
        if head.content != written.content:
            _skipped(step, "the record's content changed since")
            return None
        if (head.event_time_end if step.ends else head.status) != (
            written.event_time_end if step.ends else written.status
        ):
            _skipped(step, "the record no longer shows the step's change")
            return None
        for other in kin:
            if other.seq > step.seq and await self._readable(head, other):
                _skipped(step, "a later resolution its readers may read says the same")
                return None
        key = f"reopen:{change}:{step.decision_id}@{head.version}"
        if not step.ends:
            # A challenge that wrote a version found the record not challenged: it was active
            # (a consolidated record's challenge goes to its summary).
            return restatement(head, status=MemoryStatus.ACTIVE, key=key)
        end = await self._end_before(step, kin, head)
        if end == head.event_time_end:
            return None
        # an ending changed no status: a challenged or consumed record keeps its own
        kept = head.status if head.status in _KEPT else None
        return restatement(head, status=kept, key=key, event_time_end=end)

    async def _end_before(
        self, step: DoneStep, kin: list[DoneStep], head: MemoryRecord
    ) -> datetime | None:
        """The validity end ``head``'s record had before ``step`` and before every earlier
        ending on grounds also hidden from its readers (normally None: open)."""
        by_version = {s.written: s for s in kin if s.written is not None and s.updated}
        chain = {v.version: v for v in await store.version_chain(self._db, head.record_id)}
        version = next(v for v in chain.values() if v.id == step.written).version - 1
        while version in chain:
            earlier = by_version.get(chain[version].id)
            if earlier is None or await self._readable(head, earlier):
                return chain[version].event_time_end
            version -= 1
        return None

    async def _readable(self, head: MemoryRecord, step: DoneStep) -> bool:
        """Whether ``head``'s readers may read the grounds of ``step`` (one of its steps)."""
        grounds = await store.head(self._db, step.grounds)
        return grounds is not None and head.access_level.allows(grounds.access_level)

    async def _escalated_already(self, step: DoneStep, change: LevelChange) -> bool:
        """Whether the UPDATE that changed the level escalated this conflict itself (its Layer
        2 found it again, challenged the newer claim when it could and told a person)."""
        other = step.grounds if change.record_id == step.changed else step.changed
        found = await self._db.fetchval(SQL["escalated_in"], change.version_id, other)
        return bool(found)

    async def _escalate(self, step: DoneStep, change: uuid.UUID, grounds: MemoryRecord) -> None:
        """Put the conflict in front of a person, naming both records (once per level
        change and conflict in the admin queue)."""
        payload: dict[str, Any] = {
            "classification": step.classification,
            "existing_record_id": str(step.older_record),
            "existing_version_id": str(step.older_version),
            "similarity": step.similarity,
            "reason": step.reason,
            "record_id": str(step.newer_record),
            "version_id": str(step.newer_version),
            "decision_id": str(change),
            "type": grounds.type.value,
            "namespace": grounds.namespace,
            "escalated": ESCALATED,
        }
        await publish_escalation(self._db, self._events, step.newer_record, payload)
        log.info(
            "conflict.reopen_escalated",
            record_id=str(step.newer_record),
            existing_record_id=str(step.older_record),
        )

    async def _challenge_grounds(
        self, step: DoneStep, change: uuid.UUID, changed: MemoryRecord
    ) -> None:
        """Mark the newer claim ``challenged`` when it was the grounds of the undone step, as
        a write at its level would have been (its readers may read the older record, and it
        still states what it was written with)."""
        if step.step is Step.CHALLENGE_NEWER:
            return  # the older record was the grounds; a write of the newer never saw it
        newer = await store.head(self._db, step.newer_record)
        stated = await store.version_by_id(self._db, step.newer_version)
        if (
            newer is None
            or stated is None
            or newer.status is not MemoryStatus.ACTIVE
            or newer.content != stated.content
            or not newer.access_level.allows(changed.access_level)
        ):
            return
        key = f"reopen:{change}:{step.decision_id}:challenge@{newer.version}"
        outcome = await self._evaluate(restatement(newer, status=MemoryStatus.CHALLENGED, key=key))
        log.info(
            "conflict.reopen_challenged",
            record_id=str(newer.record_id),
            decision=outcome.decision.value,
        )


def _skipped(step: DoneStep, reason: str) -> None:
    log.info("conflict.reopen_skipped", record_id=str(step.changed), reason=reason)
