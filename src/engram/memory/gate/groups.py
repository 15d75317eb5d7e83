"""Internal requests decided one by one and committed together: consolidation's batches.

A *group* is the requests that only make sense together (a summary and the status change of
each of its sources). Every request of every group is screened (Layer 1) and planned (Layer 2)
as :meth:`~engram.memory.gate.librarian.LibrarianGate.evaluate` would; then one transaction
commits all groups that are still valid:

* a group whose request the Gate rejects (``rejected``) or finds stale (``source_changed``)
  is left out; the refused request is audited as usual (its own row), the others of the
  group are withdrawn unwritten;
* before a group is written, the current version of every record it updates or forgets is
  locked (``SELECT … FOR UPDATE``, in record-id order) and compared with the version the
  request expects; when one moved on, the whole group is skipped (``source_changed``) and
  nothing of it is written: it is left for the next run, never overwritten;
* every decision takes an id of the audit lane kept for batches
  (:data:`~engram.memory.audit.entry.BATCH_LANE`), which no other decision uses: the long
  transaction holds that one lane lock, and agents' writes never wait for it;
* ``finish`` runs last in the same transaction (the batch's own bookkeeping); when it, or any
  write, raises, the transaction rolls back and nothing of any group remains.

ADR-018 gives the reasons.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from engram.infra.db import Connection, DatabaseAdapter
from engram.memory import store
from engram.memory.audit.entry import BATCH_LANE, decision_id_in_lane
from engram.memory.audit.log import AuditLog
from engram.memory.gate.checks import Layer1Outcome
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.gate.signals import GateSignals
from engram.memory.gate.write_path import Plan, Timing, WritePath, result_from_audit
from engram.memory.types import GateAction, GateDecision, MemoryRecord, MemoryStatus

#: Requests planned at once (each waits for the database and, for a CREATE, the model).
PLANNING_CONCURRENCY = 8


class Skip:
    """Why a group was not written."""

    REJECTED = "rejected"
    SOURCE_CHANGED = "source_changed"


@dataclass(frozen=True, slots=True)
class GroupOutcome:
    """What happened to one group: its results in request order when written, else why not
    (``skipped``) and the results of the requests the Gate refused (audited)."""

    written: bool
    results: tuple[GateResult, ...] = ()
    skipped: str | None = None
    detail: str = ""


GroupsFinish = Callable[[Connection, Sequence[GroupOutcome]], Awaitable[None]]

Screen = Callable[
    [GateRequest, UUID, Timing],
    Awaitable[tuple[Layer1Outcome, MemoryRecord | None, Mapping[UUID, UUID]] | GateResult],
]
PlanOne = Callable[
    [GateRequest, Layer1Outcome, MemoryRecord | None, Mapping[UUID, UUID], Timing],
    Awaitable[tuple[Plan, Timing]],
]


@dataclass(frozen=True, slots=True)
class _Planned:
    plan: Plan
    decision_id: UUID
    timing: Timing


@dataclass(frozen=True, slots=True)
class PlannedGroup:
    """A group whose every request was planned (``planned``) or that was refused already."""

    planned: tuple[_Planned, ...]
    refused: tuple[GateResult, ...] = ()


async def evaluate_groups(
    groups: Sequence[Sequence[GateRequest]],
    *,
    screen: Screen,
    plan: PlanOne,
    commit: Callable[[Sequence[PlannedGroup]], Awaitable[list[GroupOutcome]]],
    signals: GateSignals,
    committed: Callable[[], None],
) -> list[GroupOutcome]:
    """Screen and plan every request (bounded concurrency), commit the groups, signal."""
    gate = asyncio.Semaphore(PLANNING_CONCURRENCY)

    async def one(request: GateRequest) -> _Planned | GateResult:
        async with gate:
            decision_id = decision_id_in_lane(BATCH_LANE)
            timing = Timing(started=time.perf_counter())
            screened = await screen(request, decision_id, timing)
            if isinstance(screened, GateResult):
                return screened
            layer1, head, evidence = screened
            made, timing = await plan(request, layer1, head, evidence, timing)
            return _Planned(made, decision_id, timing)

    planned_groups: list[PlannedGroup] = []
    for group in groups:
        done = await asyncio.gather(*(one(request) for request in group))
        refused = tuple(r for r in done if isinstance(r, GateResult))
        planned = tuple(p for p in done if isinstance(p, _Planned))
        planned_groups.append(PlannedGroup(() if refused else planned, refused))
    outcomes = await commit(planned_groups)
    if any(outcome.written for outcome in outcomes):
        committed()
    for planned_group, outcome in zip(planned_groups, outcomes, strict=True):
        if not outcome.written:
            continue
        for item, result in zip(planned_group.planned, outcome.results, strict=True):
            evaluation = time.perf_counter() - item.timing.started
            signals.write(item.plan.request, result, item.plan, evaluation, item.timing)
    return outcomes


async def commit_groups(
    db: DatabaseAdapter,
    writes: WritePath,
    audit: AuditLog,
    groups: Sequence[PlannedGroup],
    *,
    finish: GroupsFinish | None,
) -> list[GroupOutcome]:
    """Write every valid group in one transaction (see the module docstring)."""

    async def body(conn: Connection) -> list[GroupOutcome]:
        # A retry after a COMMIT whose acknowledgement was lost finds its decisions audited.
        first = next((p for g in groups for p in g.planned), None)
        if first is not None and await audit.audited(conn, first.decision_id):
            return await _recorded(db, audit, groups)
        outcomes = [await _write_group(conn, writes, group) for group in groups]
        if finish is not None:
            await finish(conn, outcomes)
        return outcomes

    return await db.run_in_transaction(body)


async def _write_group(conn: Connection, writes: WritePath, group: PlannedGroup) -> GroupOutcome:
    if group.refused or not group.planned:
        reasons = "; ".join(r.reason for r in group.refused)
        stale = any(r.decision is GateDecision.CONFLICT for r in group.refused)
        return GroupOutcome(
            written=False,
            results=group.refused,
            skipped=Skip.SOURCE_CHANGED if stale else Skip.REJECTED,
            detail=reasons,
        )
    moved = await _moved(conn, [p.plan.request for p in group.planned])
    if moved is not None:
        return GroupOutcome(written=False, skipped=Skip.SOURCE_CHANGED, detail=moved)
    results = [
        await writes.apply(conn, item.plan, item.decision_id, item.timing) for item in group.planned
    ]
    return GroupOutcome(written=True, results=tuple(results))


async def _moved(conn: Connection, requests: Sequence[GateRequest]) -> str | None:
    """Lock the heads the requests change (record-id order, so two batches cannot deadlock)
    and say which one is no longer the version it was expected to be (None: all are)."""
    expected = {
        r.record.record_id: r.expected_version
        for r in requests
        if r.action is not GateAction.CREATE and r.expected_version is not None
    }
    for record_id in sorted(expected):
        head = await store.head(conn, record_id, lock=True)
        if head is None or head.status is MemoryStatus.FORGOTTEN:
            return f"record {record_id} was forgotten"
        if head.version != expected[record_id]:
            return f"record {record_id} is at version {head.version}, not {expected[record_id]}"
    return None


async def _recorded(
    db: DatabaseAdapter, audit: AuditLog, groups: Sequence[PlannedGroup]
) -> list[GroupOutcome]:
    """The outcomes of a transaction that committed already, rebuilt from its audit rows."""
    outcomes = []
    for group in groups:
        results = []
        for item in group.planned:
            entry = await audit.by_decision(item.decision_id)
            if entry is None:
                break
            results.append(await result_from_audit(db, entry, replayed=False))
        if group.planned and len(results) == len(group.planned):
            outcomes.append(GroupOutcome(written=True, results=tuple(results)))
        else:
            outcomes.append(
                GroupOutcome(written=False, skipped=Skip.SOURCE_CHANGED, detail="retried")
            )
    return outcomes
