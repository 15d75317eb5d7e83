"""The Gate's transactions: one per evaluation, with the audit row appended last.

An approved write commits its version rows, edges, outbox event and audit row together (a
new record admitted as it stands in one statement: :mod:`~engram.memory.gate.at_once`). A
rejected or conflicting evaluation commits its audit row alone. Each transaction may run more
than once (the database adapter retries after a lost connection); an attempt first looks for
its own decision in the audit log, so a retry after a COMMIT whose acknowledgement was lost
changes nothing.
"""

from __future__ import annotations

import json
from uuid import UUID

from engram.errors import VersionConflict
from engram.infra.db import Connection, DatabaseAdapter
from engram.infra.events import Event, EventBus
from engram.memory import store
from engram.memory.audit.log import AuditEntry, AuditLog
from engram.memory.gate.access import merge_denial
from engram.memory.gate.advisor import AdvisorAction
from engram.memory.gate.at_once import (
    AlreadyWritten,
    create_at_once,
    update_at_once,
    updates_at_once,
    writes_at_once,
)
from engram.memory.gate.links import link_version
from engram.memory.gate.plan import (
    Plan,
    Timing,
    approval_entry,
    approval_reason,
    approved_result,
    created_version,
    next_version,
    record_event,
)
from engram.memory.gate.reopen import note_level_change
from engram.memory.gate.requests import (
    GateResult,
    WriteOutcome,
    advisor_decision_from_json,
    checks_from_json,
)
from engram.memory.types import (
    EdgeKind,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    can_read,
)


class StaleTarget(Exception):
    """The record a NOOP advice was about moved on before the write locked it; ``current``
    is its head now (None when it has none). The Gate plans again."""

    def __init__(self, current: MemoryRecord | None) -> None:
        self.current = current
        super().__init__("the advised record moved on")


class WritePath:
    """Runs the Gate's transactions."""

    def __init__(self, *, db: DatabaseAdapter, audit: AuditLog, events: EventBus) -> None:
        self._db = db
        self._audit = audit
        self._events = events

    async def audit_only(self, entry: AuditEntry) -> None:
        """Commit the audit row of a rejected or conflicting evaluation."""

        async def body(conn: Connection) -> None:
            if await self._audit.audited(conn, entry.decision_id):
                return
            await self._audit.append(conn, entry)

        await self._db.run_in_transaction(body)

    async def commit(self, plan: Plan, *, decision_id: UUID, timing: Timing) -> GateResult:
        """Persist an approved plan and have its events delivered; raises
        :class:`~engram.errors.VersionConflict` when the head moved (or another writer won the
        race for the next version). A new record admitted as it stands, and an UPDATE of the
        head it was planned against, are written in one statement
        (:mod:`~engram.memory.gate.at_once`), which may announce its events itself; an
        UPDATE whose head moved on since comes here."""
        at_once = (
            create_at_once
            if writes_at_once(plan)
            else update_at_once
            if updates_at_once(plan)
            else None
        )
        if at_once is not None:
            try:
                written = await at_once(
                    self._db,
                    self._audit,
                    self._events,
                    plan,
                    decision_id=decision_id,
                    timing=timing,
                )
            except AlreadyWritten:
                self._events.committed()
                return await self._already_committed(plan, decision_id)
            if written is not None:
                result, announced = written
                if not announced:
                    self._events.committed()
                return result
        attempts = 0

        async def body(conn: Connection) -> GateResult:
            nonlocal attempts
            attempts += 1
            if attempts > 1 and await self._audit.audited(conn, decision_id):
                raise AlreadyWritten
            return await self.apply(conn, plan, decision_id, timing)

        try:
            committed = await self._db.run_in_transaction(body)
        except AlreadyWritten:
            committed = await self._already_committed(plan, decision_id)
        self._events.committed()
        return committed

    async def _already_committed(self, plan: Plan, decision_id: UUID) -> GateResult:
        """The result of a write whose first attempt committed (its acknowledgement lost)."""
        entry = await self._audit.by_decision(decision_id)
        if entry is None:  # pragma: no cover - only called after the row was seen
            raise RuntimeError("audited decision vanished")
        return await result_from_audit(self._db, entry, replayed=False, degraded=not plan.embedding)

    async def apply(
        self, conn: Connection, plan: Plan, decision_id: UUID, timing: Timing
    ) -> GateResult:
        """Write one approved plan inside the caller's transaction (``commit`` and groups)."""
        action = plan.request.action
        if action is GateAction.FORGET:
            return await self._forget(conn, plan, decision_id, timing)
        if plan.advice is not None and plan.advice.action is AdvisorAction.NOOP:
            return await self._reinforce(conn, plan, decision_id, timing)
        if action is GateAction.UPDATE:
            locked = await self._lock_head(conn, plan)
            return await self._new_version(conn, plan, locked, decision_id, timing)
        if plan.advice is not None and plan.advice.action is AdvisorAction.UPDATE:
            return await self._merge(conn, plan, decision_id, timing)
        return await self._create(conn, plan, decision_id, timing)

    async def _create(
        self, conn: Connection, plan: Plan, decision_id: UUID, timing: Timing
    ) -> GateResult:
        new = created_version(plan, decision_id)
        ingested = await self._insert(conn, plan, new, decision_id)
        await self._links(conn, plan, ingested, decision_id)
        await self._publish(conn, "memory.created", new, decision_id, plan)
        return await self._approve(
            conn,
            plan=plan,
            decision_id=decision_id,
            timing=timing,
            outcome=WriteOutcome.CREATED,
            record=ingested,
        )

    async def _lock_head(self, conn: Connection, plan: Plan) -> MemoryRecord:
        """Lock the record's head for this transaction; a missing, forgotten or moved head
        (against the expected version, when given, in the store's numbering:
        :attr:`Plan.expected_version`) is a :class:`~engram.errors.VersionConflict` (its
        ``expected`` the caller's number, its ``actual`` the stored one)."""
        expected = plan.request.expected_version
        locked = await store.head(conn, plan.record.record_id, lock=True)
        if locked is not None and not can_read(plan.request.caller_identity, locked):
            # now beyond the caller's reach: no version named
            raise VersionConflict(expected=expected, actual=None)
        if locked is None or locked.status is MemoryStatus.FORGOTTEN:
            actual = None if locked is None else locked.version
            raise VersionConflict(expected=expected, actual=actual)
        if plan.expected_version is not None and locked.version != plan.expected_version:
            raise VersionConflict(expected=expected, actual=locked.version)
        return locked

    async def _merge(
        self, conn: Connection, plan: Plan, decision_id: UUID, timing: Timing
    ) -> GateResult:
        """A CREATE the advisor merged into its nearest record (ADR-020): stored as that
        record's next version, provided the version the advice saw is still its live head."""
        target = plan.target
        if target is None:  # the advisor named a record the Gate did not offer it
            raise RuntimeError("UPDATE advice on a CREATE without a known target")
        locked = await store.head(conn, target.record_id, lock=True)
        if locked is None or locked.status is not MemoryStatus.ACTIVE or locked.id != target.id:
            raise StaleTarget(locked)
        denial = merge_denial(plan.request.caller_identity, plan.record, locked)
        if denial is not None:  # an advisor that ignored the rule: never written
            raise RuntimeError(f"merge advice the Gate does not allow: {denial}")
        return await self._new_version(conn, plan, locked, decision_id, timing, reason="merge")

    async def _new_version(
        self,
        conn: Connection,
        plan: Plan,
        locked: MemoryRecord,
        decision_id: UUID,
        timing: Timing,
        *,
        reason: str = "update",
    ) -> GateResult:
        """Store the plan's record as the next version of ``locked`` (its head, locked)."""
        expected = plan.request.expected_version
        new = next_version(plan, decision_id, locked)
        if not await store.close_head(conn, locked.id, new.id):
            raise VersionConflict(expected=expected, actual=None)
        ingested = await self._insert(conn, plan, new, decision_id, not_before=locked)
        await store.add_edge(
            conn,
            source=new.id,
            target=locked.id,
            kind=EdgeKind.SUPERSEDES,
            decision_id=decision_id,
            provenance={"reason": reason, "agent": plan.request.caller_identity.agent_id},
        )
        await self._links(conn, plan, ingested, decision_id)
        await self._publish(conn, "memory.updated", new, decision_id, plan)
        # A resolution resting on a claim its readers may no longer read is undone (ADR-010).
        await note_level_change(
            conn, self._events, before=locked, after=ingested, decision_id=decision_id
        )
        return await self._approve(
            conn,
            plan=plan,
            decision_id=decision_id,
            timing=timing,
            outcome=WriteOutcome.UPDATED,
            record=ingested,
        )

    async def _forget(
        self, conn: Connection, plan: Plan, decision_id: UUID, timing: Timing
    ) -> GateResult:
        expected = plan.request.expected_version
        locked = await self._lock_head(conn, plan)
        if not await store.forget_head(conn, locked.id):
            raise VersionConflict(expected=expected, actual=locked.version)
        forgotten = await store.head(conn, locked.record_id)
        await self._publish(conn, "memory.forgotten", locked, decision_id, plan)
        return await self._approve(
            conn,
            plan=plan,
            decision_id=decision_id,
            timing=timing,
            outcome=WriteOutcome.FORGOTTEN,
            record=forgotten or locked,
        )

    async def _reinforce(
        self, conn: Connection, plan: Plan, decision_id: UUID, timing: Timing
    ) -> GateResult:
        target = plan.target
        if target is None:  # the advisor named a record the Gate did not offer it
            raise RuntimeError("NOOP advice without a known target")
        # The advice is only as good as the version it saw: lock that record's head and make
        # sure it is still the same, live version (and, for UPDATE, the expected one).
        if plan.request.action is GateAction.CREATE:
            locked = await store.head(conn, target.record_id, lock=True)
            if locked is None or locked.status is not MemoryStatus.ACTIVE:
                raise StaleTarget(locked)
        else:
            locked = await self._lock_head(conn, plan)
        if locked.id != target.id:
            raise StaleTarget(locked)
        if (
            plan.request.decision_type is GateDecisionType.SELF_HEALING
            or plan.record.access_level.rank > target.access_level.rank
        ):
            # A repair, not a repetition: fill what a degraded write left out, count nothing.
            # Nor does a repetition above the record's level count: its readers may not read
            # it, so it must not change what they get (ADR-008; hostile pass J).
            if plan.vector is not None and plan.embedding_model is not None:
                await store.fill_embedding(
                    conn, target.id, embedding=plan.vector, embedding_model=plan.embedding_model
                )
        else:
            await store.reinforce(
                conn, target.id, embedding=plan.vector, embedding_model=plan.embedding_model
            )
        return await self._approve(
            conn,
            plan=plan,
            decision_id=decision_id,
            timing=timing,
            outcome=WriteOutcome.REINFORCED,
            record=target,
        )

    async def _insert(
        self,
        conn: Connection,
        plan: Plan,
        new: MemoryRecord,
        decision_id: UUID,
        *,
        not_before: MemoryRecord | None = None,
    ) -> MemoryRecord:
        if plan.advice is None:  # pragma: no cover - CREATE and UPDATE always have advice
            raise RuntimeError("a write without Layer 2 advice")
        return await store.insert_version(
            conn,
            new,
            decision_id=decision_id,
            decision_type=plan.request.decision_type,
            content_hash=plan.fingerprint,
            importance=plan.advice.importance,
            embedding=plan.vector,
            embedding_model=plan.embedding_model,
            not_before=None if not_before is None else not_before.ingestion_time,
            screened_with=plan.layer1.screened_with,
        )

    async def _links(
        self, conn: Connection, plan: Plan, new: MemoryRecord, decision_id: UUID
    ) -> None:
        await link_version(
            conn,
            self._events,
            request=plan.request,
            advice=plan.advice,
            new=new,
            evidence=plan.evidence,
            related=plan.related,
            decision_id=decision_id,
        )

    async def _publish(
        self, conn: Connection, name: str, record: MemoryRecord, decision_id: UUID, plan: Plan
    ) -> None:
        payload = record_event(record, plan, decision_id)
        await self._events.publish(conn, Event(name, record.record_id, payload))

    async def _approve(
        self,
        conn: Connection,
        *,
        plan: Plan,
        decision_id: UUID,
        timing: Timing,
        outcome: WriteOutcome,
        record: MemoryRecord,
    ) -> GateResult:
        reason = approval_reason(plan, outcome, record)
        entry = approval_entry(
            plan,
            decision_id=decision_id,
            timing=timing,
            outcome=outcome,
            reason=reason,
            record=record,
            # The version's own ingestion instant (its end, for FORGET), as the insert or
            # update returned it: the log and the versions then share one clock (ADR-014).
            occurred_at=(
                record.ingestion_time_end
                if outcome is WriteOutcome.FORGOTTEN
                else record.ingestion_time
                if outcome is not WriteOutcome.REINFORCED
                else None
            ),
        )
        await self._audit.append(conn, entry)
        return approved_result(
            plan, decision_id=decision_id, reason=reason, outcome=outcome, record=record
        )


async def result_from_audit(
    db: DatabaseAdapter, entry: AuditEntry, *, replayed: bool, degraded: bool = False
) -> GateResult:
    """The result of an evaluation recorded already, rebuilt from its audit row: a request id
    seen before (``replayed``), or a transaction whose COMMIT acknowledgement was lost."""
    record = None
    if entry.version_id is not None:
        record = await store.version_by_id(db, entry.version_id)
    checks = checks_from_json(entry.layer1_checks)
    return GateResult(
        decision=GateDecision(entry.decision),
        decision_id=entry.decision_id,
        reason=entry.reason,
        layer1_checks=checks,
        layer2_decision=advisor_decision_from_json(
            None if entry.layer2_decision is None else json.loads(entry.layer2_decision)
        ),
        modified_record=record,
        outcome=WriteOutcome(entry.outcome),
        record_id=entry.record_id,
        version=None if record is None else record.version,
        degraded=degraded,
        replayed=replayed,
        failed_checks=[c for c in checks if not c.passed],
    )
