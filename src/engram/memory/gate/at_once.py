"""The Gate's one-statement writes: a new record, or a record's next version, in one round
trip (ADR-016).

A CREATE that Layer 2 admitted as it stands (ADD) needs no read inside its transaction
unless a conflict it found may change another record (supersession, contradiction: their
resolution is planned against the older record as it is then). Otherwise its version row,
its edges (evidence, neighbours, conflicts), its events (``memory.conflict_detected`` for an
unresolvable conflict, then ``memory.created``) and its audit row are known before it
starts. They go to PostgreSQL as one statement (``write.sql``), which is its own
transaction, instead of BEGIN, four to six statements and COMMIT, each a round trip. What
is stored is what the transactional path (:mod:`~engram.memory.gate.write_path`) stores;
the audit row's hash is computed by the statement over the version's own ingestion time, as
the transactional path's is over the time its insert returned. When no subscriber of this
process waits for the write's events (a plain new record: ``memory.created`` has none), the
statement also announces them on the outbox's NOTIFY channel and writes their rows delivered:
a notification is sent only if the transaction commits, so nothing is left for a delivery
after it, which would cost four more round trips (ADR-016).

A caller's UPDATE that Layer 2 did not answer with NOOP, and none of whose recorded
conflicts needs a read, is written the same way (:func:`update_at_once`): the statement
closes the head the Gate planned against, inserts the next version from the closed row,
then writes the same edges (``supersedes`` first), events (``memory.updated``, then
``memory.level_changed`` when the level changed) and audit row. The transactional path
locks the head, checks it and writes in six to eight statements; the statement asks the
same of the head in its ``WHERE`` (still the live head, not forgotten, at the level the Gate
checked the caller against), and when it is not, writes nothing: the transactional path
then runs, and answers as it always has (a version conflict; or, for a head moved in place to
another level the writer may still read, the next version). A retry that finds no head to
close looks for its decision first, as one that meets a first attempt's keys does: the head
may have moved on to that attempt's own version.

Every other plan (a FORGET, a NOOP, a merge, a state-changing conflict, a group) takes the
transactional path. A retry after a lost connection first looks for its decision in the
log, as the transactional path does: a statement whose answer was lost is not run twice, and
a retry that meets the keys of a first attempt still running looks again once it has
committed. The audit row's ``duration_ms`` is taken just before the statement (on the
transactional path, before the audit append: after the version insert and its edges).
"""

from __future__ import annotations

import json
from datetime import datetime
from uuid import UUID

from engram.errors import UniqueViolation
from engram.infra.db import Connection, DatabaseAdapter
from engram.infra.events import EventBus
from engram.infra.sql import load_fragments, load_queries
from engram.memory import store
from engram.memory.audit.log import AuditLog, duplicate_request
from engram.memory.gate.advisor import AdvisorAction
from engram.memory.gate.links import new_edges
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
from engram.memory.gate.reopen import LEVEL_CHANGED, level_change
from engram.memory.gate.requests import GateResult, WriteOutcome
from engram.memory.gate.resolution import (
    Resolution,
    conflict_links,
    needs_reads,
    recorded_conflicts,
)
from engram.memory.types import EdgeKind, GateAction, MemoryRecord

SQL = load_queries("engram.memory.gate", "write.sql", shared=store.FRAGMENTS)
FRAGMENTS = load_fragments("engram.memory.gate", "write.sql")

#: The events a new record and a new version publish (the transactional path's names).
CREATED = "memory.created"
UPDATED = "memory.updated"

Events = list[tuple[str, dict[str, object]]]


class AlreadyWritten(Exception):
    """A retried write found its decision in the log: the first attempt committed (for the
    one-statement write and the transactional path alike)."""


def writes_at_once(plan: Plan) -> bool:
    """Whether ``plan`` can be written in one statement: a CREATE admitted as it stands
    (ADD) none of whose recorded conflicts needs a read to plan its resolution."""
    advice = plan.advice
    return (
        plan.request.action is GateAction.CREATE
        and advice is not None
        and advice.action is AdvisorAction.ADD
        and not (recorded_conflicts(plan.request, advice) and needs_reads(advice))
    )


def updates_at_once(plan: Plan) -> bool:
    """Whether ``plan`` can be written by :func:`update_at_once`: an UPDATE of a head the
    Gate read, not answered with NOOP, none of whose recorded conflicts needs a read."""
    advice = plan.advice
    return (
        plan.request.action is GateAction.UPDATE
        and plan.head is not None
        and advice is not None
        and advice.action is not AdvisorAction.NOOP
        and not (recorded_conflicts(plan.request, advice) and needs_reads(advice))
    )


async def create_at_once(
    db: DatabaseAdapter,
    audit: AuditLog,
    bus: EventBus,
    plan: Plan,
    *,
    decision_id: UUID,
    timing: Timing,
) -> tuple[GateResult, bool]:
    """Write an admitted CREATE (:func:`writes_at_once`) in one statement, with whether its
    events were announced by the statement itself (nothing left for the outbox to deliver:
    :meth:`~engram.infra.events.EventBus.announcing_channel`). Raises :class:`AlreadyWritten`
    when a retry finds the first attempt committed, and the version store's or the log's
    typed errors (:class:`~engram.errors.AlreadyExists`,
    :class:`~engram.errors.DuplicateRequest`) as the transactional path does."""
    new = created_version(plan, decision_id)
    written = await _write(
        db,
        audit,
        bus,
        plan,
        "create_at_once",
        new=new,
        outcome=WriteOutcome.CREATED,
        decision_id=decision_id,
        timing=timing,
        leading=[],
        trailing=[(CREATED, record_event(new, plan, decision_id))],
        head=(),
    )
    if written is None:  # pragma: no cover - INSERT ... RETURNING always returns the row
        raise RuntimeError("create_at_once returned no row")
    return written


async def update_at_once(
    db: DatabaseAdapter,
    audit: AuditLog,
    bus: EventBus,
    plan: Plan,
    *,
    decision_id: UUID,
    timing: Timing,
) -> tuple[GateResult, bool] | None:
    """Write an UPDATE (:func:`updates_at_once`) as the next version of the head it was
    planned against, in one statement; None, with nothing written, when that head is no
    longer the record's live head at the level it had (the transactional path is then to
    run). Raises as :func:`create_at_once` does."""
    head = plan.head
    if head is None:  # pragma: no cover - updates_at_once checked it
        raise RuntimeError("an UPDATE without the head it was planned against")
    new = next_version(plan, decision_id, head)
    # As the transactional path's _new_version: the edge to the head first, the level's
    # event after the record's.
    supersedes = store.NewEdge(
        head.id,
        EdgeKind.SUPERSEDES,
        provenance={"reason": "update", "agent": plan.request.caller_identity.agent_id},
    )
    trailing: Events = [(UPDATED, record_event(new, plan, decision_id))]
    moved = level_change(before=head, after=new, decision_id=decision_id)
    if moved is not None:
        trailing.append((LEVEL_CHANGED, moved))
    return await _write(
        db,
        audit,
        bus,
        plan,
        "update_at_once",
        new=new,
        outcome=WriteOutcome.UPDATED,
        decision_id=decision_id,
        timing=timing,
        leading=[supersedes],
        trailing=trailing,
        head=(head.id, head.access_level.value),
        not_before=head.ingestion_time,
    )


async def _write(
    db: DatabaseAdapter,
    audit: AuditLog,
    bus: EventBus,
    plan: Plan,
    statement: str,
    *,
    new: MemoryRecord,
    outcome: WriteOutcome,
    decision_id: UUID,
    timing: Timing,
    leading: list[store.NewEdge],
    trailing: Events,
    head: tuple[object, ...],
    not_before: datetime | None = None,
) -> tuple[GateResult, bool] | None:
    """Run one of the statements for ``new``: its edges are ``leading``, then the evidence
    and neighbours' (:func:`~engram.memory.gate.links.new_edges`), then the conflicts';
    its events the conflicts', then ``trailing``. ``head`` are the parameters after $47."""
    if plan.advice is None:  # pragma: no cover - the callers' predicates checked it
        raise RuntimeError("a write without Layer 2 advice")
    reason = approval_reason(plan, outcome, new)
    entry = approval_entry(
        plan, decision_id=decision_id, timing=timing, outcome=outcome, reason=reason, record=new
    )
    before, after = entry.payload_around_occurred_at()
    edges = leading + new_edges(
        request=plan.request,
        advice=plan.advice,
        new_id=new.id,
        evidence=plan.evidence,
        related=plan.related,
    )
    events: Events = []
    if recorded_conflicts(plan.request, plan.advice):
        links = conflict_links(
            [(c, Resolution(())) for c in plan.advice.conflicts],
            advice=plan.advice,
            new=new,
            decision_id=decision_id,
        )
        edges += links.edges
        events += links.events
    events += trailing
    channel = bus.announcing_channel([name for name, _ in events])
    args = (
        *store.version_row(
            new,
            decision_id=decision_id,
            decision_type=plan.request.decision_type,
            content_hash=plan.fingerprint,
            importance=plan.advice.importance,
            embedding=plan.vector,
            embedding_model=plan.embedding_model,
            not_before=not_before,
            screened_with=plan.layer1.screened_with,
        ),
        *store.edge_arrays(edges),
        [name for name, _ in events],
        [json.dumps(payload, sort_keys=True) for _, payload in events],
        entry.request_id,
        entry.action,
        entry.decision,
        entry.outcome,
        entry.reason,
        entry.agent_id,
        entry.caller,
        entry.input_snapshot,
        entry.layer1_checks,
        entry.layer2_decision,
        entry.decision_source,
        entry.duration_ms,
        entry.lane,
        before,
        after,
        channel,
        *head,
    )
    attempts = 0

    async def body(conn: Connection) -> MemoryRecord | None:
        nonlocal attempts
        attempts += 1
        if attempts > 1 and await audit.audited(conn, decision_id):
            raise AlreadyWritten
        try:
            row = await conn.fetchrow(SQL[statement], *args)
        except UniqueViolation as exc:
            # A retry can meet its own first attempt: one whose answer timed out while it
            # still ran, and which committed while the retry waited on its keys.
            if attempts > 1 and await audit.audited(conn, decision_id):
                raise AlreadyWritten from exc
            refused = store.insert_refused(exc, new) or duplicate_request(exc, entry)
            if refused is not None:
                raise refused from exc
            raise
        if row is None:  # an update whose head moved on: nothing written
            # A retry's head may have moved on to its own first attempt: a statement the
            # server finished and committed after the connection that sent it was lost.
            if attempts > 1 and await audit.audited(conn, decision_id):
                raise AlreadyWritten
            return None
        audit.appended(int(row["audit_seq"]))
        return store.record_from_row(row)

    stored = await db.run(body)
    if stored is None:
        return None
    result = approved_result(
        plan, decision_id=decision_id, reason=reason, outcome=outcome, record=stored
    )
    return result, channel is not None
