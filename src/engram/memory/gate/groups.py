"""Internal requests decided one by one and committed together: consolidation's batches.

A *group* is the requests that only make sense together (a summary and the status change of
each of its sources). Every request of every group is screened (Layer 1) and planned (Layer 2)
as :meth:`~engram.memory.gate.librarian.LibrarianGate.evaluate` would; then one transaction
commits all groups that are still valid:

* a group whose request the Gate rejects (``rejected``) or finds stale (``source_changed``)
  is left out; the refused request is audited as usual (its own row), the others of the
  group are withdrawn unwritten;
* before anything is written, the head of every record any group updates or forgets is
  locked (``SELECT … FOR NO KEY UPDATE``, all in record-id order, so two such transactions
  cannot deadlock); each group is then compared with the versions its requests expect, and
  when one moved on the whole group is skipped (``source_changed``) and nothing of it is
  written: it is left for the next run, never overwritten. A head moved on also when its
  access level is no longer the one its request restates it at: an admin's release lowers
  the level in place (the version stays), and a group planned before it would otherwise
  write the record back at its old level, undoing the release;
* a group one of whose records Layer 1 would store above the level it was planned at (the
  PII check quarantining a summary of sources an admin released) is skipped
  (``quarantined``) and nothing of it is written: its sources' readers would find them
  consolidated into a record they may not read;
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
from engram.memory.gate.plan import Plan, Timing
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.gate.signals import GateSignals
from engram.memory.gate.write_path import WritePath, result_from_audit
from engram.memory.types import (
    AccessLevel,
    GateAction,
    GateDecision,
    MemoryRecord,
    MemoryStatus,
)

#: Requests planned at once (each waits for the database and, for a CREATE, the model).
PLANNING_CONCURRENCY = 8


class Skip:
    """Why a group was not written."""

    REJECTED = "rejected"
    SOURCE_CHANGED = "source_changed"
    QUARANTINED = "quarantined"


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
    attempts = 0

    async def body(conn: Connection) -> list[GroupOutcome]:
        nonlocal attempts
        attempts += 1
        # A retry after a COMMIT whose acknowledgement was lost finds its decisions audited.
        if attempts > 1 and await _committed_before(conn, audit, groups):
            return await _recorded(db, audit, groups)
        heads = await _lock_heads(conn, groups)
        outcomes = [await _write_group(conn, writes, group, heads) for group in groups]
        if finish is not None:
            await finish(conn, outcomes)
        return outcomes

    return await db.run_in_transaction(body)


def _refused(group: PlannedGroup) -> GroupOutcome:
    """The outcome of a group the Gate refused a request of (stale: ``source_changed``)."""
    stale = any(r.decision is GateDecision.CONFLICT for r in group.refused)
    return GroupOutcome(
        written=False,
        results=group.refused,
        skipped=Skip.SOURCE_CHANGED if stale else Skip.REJECTED,
        detail="; ".join(r.reason for r in group.refused),
    )


def _expected(group: PlannedGroup) -> dict[UUID, tuple[int, AccessLevel]]:
    """The stored version each record the group updates or forgets is expected to be at,
    and the access level the group writes it at (a group's requests keep a record's level)."""
    return {
        p.plan.request.record.record_id: (
            p.plan.expected_version,
            p.plan.request.record.access_level,
        )
        for p in group.planned
        if p.plan.request.action is not GateAction.CREATE and p.plan.expected_version is not None
    }


async def _lock_heads(
    conn: Connection, groups: Sequence[PlannedGroup]
) -> dict[UUID, MemoryRecord | None]:
    """Lock the head of every record any group changes, all in record-id order before any
    write, so two transactions of groups (or one and an agent's write) cannot deadlock."""
    wanted = sorted({r for g in groups if not g.refused for r in _expected(g)})
    return {r: await store.head(conn, r, lock=True) for r in wanted}


async def _write_group(
    conn: Connection,
    writes: WritePath,
    group: PlannedGroup,
    heads: Mapping[UUID, MemoryRecord | None],
) -> GroupOutcome:
    if group.refused or not group.planned:
        return _refused(group)
    raised = _raised(group)
    if raised is not None:
        return GroupOutcome(written=False, skipped=Skip.QUARANTINED, detail=raised)
    moved = _moved(_expected(group), heads)
    if moved is not None:
        return GroupOutcome(written=False, skipped=Skip.SOURCE_CHANGED, detail=moved)
    results = [
        await writes.apply(conn, item.plan, item.decision_id, item.timing) for item in group.planned
    ]
    return GroupOutcome(written=True, results=tuple(results))


def _raised(group: PlannedGroup) -> str | None:
    """Which request of ``group`` Layer 1 left above the level it was planned at (None:
    none)."""
    for item in group.planned:
        planned, screened = item.plan.request.record, item.plan.layer1.record
        if screened.access_level.rank > planned.access_level.rank:
            return (
                f"{item.plan.request.action.value} of record {planned.record_id} would be "
                f"stored at {screened.access_level.value}, not {planned.access_level.value}"
            )
    return None


def _moved(
    expected: Mapping[UUID, tuple[int, AccessLevel]], heads: Mapping[UUID, MemoryRecord | None]
) -> str | None:
    """Which locked head is no longer the version it was expected to be, or no longer at the
    level its request writes it at (None: all are)."""
    for record_id, (version, level) in sorted(expected.items()):
        head = heads.get(record_id)
        if head is None or head.status is MemoryStatus.FORGOTTEN:
            return f"record {record_id} was forgotten"
        if head.version != version:
            return f"record {record_id} is at version {head.version}, not {version}"
        if head.access_level is not level:
            return f"record {record_id} was moved to another access level"
    return None


async def _committed_before(
    conn: Connection, audit: AuditLog, groups: Sequence[PlannedGroup]
) -> bool:
    """True when an earlier attempt of this transaction committed: a decision of any group
    is audited (the first group may have been skipped, so every group is asked)."""
    for group in groups:
        if group.planned and await audit.audited(conn, group.planned[0].decision_id):
            return True
    return False


async def _recorded(
    db: DatabaseAdapter, audit: AuditLog, groups: Sequence[PlannedGroup]
) -> list[GroupOutcome]:
    """The outcomes of a transaction that committed already, rebuilt from its audit rows."""
    outcomes = []
    for group in groups:
        if group.refused or not group.planned:
            outcomes.append(_refused(group))
            continue
        results = []
        for item in group.planned:
            entry = await audit.by_decision(item.decision_id)
            if entry is None:
                break
            results.append(await result_from_audit(db, entry, replayed=False))
        if len(results) == len(group.planned):
            outcomes.append(GroupOutcome(written=True, results=tuple(results)))
        else:  # skipped in the attempt that committed: a source had moved
            outcomes.append(
                GroupOutcome(written=False, skipped=Skip.SOURCE_CHANGED, detail="moved")
            )
    return outcomes
