"""Resolution of detected conflicts: recorded, never silent, always through the Gate.

The new record's own transaction links each conflict (:func:`link_conflicts`) and decides,
for the state-changing classes, which records the resolution will change. A resolution is
written on behalf of the agent whose write found the conflict, so it may change a record only
when that agent could (:func:`~engram.memory.gate.access.resolution_denial`): the access matrix
allows it, the record's standing (the tier of the agent that wrote its content) is not above
the writer's tier, and the newer record is visible to every reader of the older one (for
internal writers too: what a reader sees never changes on grounds hidden from it). The steps
it may take go into ``memory.conflicts_found`` in the outbox; when that is delivered (after
the commit, at least once, :mod:`~engram.memory.gate.resolver`) each step is proposed to the
Gate as a ``self_healing`` UPDATE by the resolver's system identity, with a request id derived
from the decision, so it is audited and idempotent:

* supersession: the older record gets a new version whose validity ends where the newer
  statement begins (``event_time_end``); what was believed before stays answerable;
* contradiction: both records get a new version marked ``challenged``;
* refinement and unresolvable: nothing changes state (the link, and the escalation to a
  person, are the resolution).

A conflict whose older record the writer may not change is **escalated** instead: it is linked
as ``contradicts`` (never ``supersedes``), only the writer's own new record is marked
``challenged`` (when the writer may change it), and ``memory.conflict_detected`` puts the
dispute in front of a person. A resolution that finds either claim no longer standing (forgotten,
or its content changed by another writer) is skipped and logged; the conflict stays linked.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from engram.infra.db import Connection, DatabaseAdapter
from engram.infra.events import Event, EventBus
from engram.memory import store
from engram.memory.conflict.detection import ConflictResult
from engram.memory.gate.access import resolution_denial, write_denial
from engram.memory.gate.advisor import AdvisorDecision
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    CallerIdentity,
    ConflictClassification,
    ConsolidationPath,
    EdgeKind,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    TrustLevel,
)

RESOLVER = CallerIdentity.system("conflict-resolver")

#: The event whose delivery carries out the resolutions of one write's conflicts.
CONFLICTS_FOUND = "memory.conflicts_found"
#: The event that puts a conflict in front of a person (notifications).
CONFLICT_DETECTED = "memory.conflict_detected"
#: Conflict classes whose resolution writes new versions (the others are links only).
STATE_CHANGING = frozenset(
    {ConflictClassification.SUPERSESSION, ConflictClassification.CONTRADICTION}
)
#: The edge each conflict class leaves between the new version and the existing one.
CONFLICT_EDGES = {
    ConflictClassification.CONTRADICTION: EdgeKind.CONTRADICTS,
    ConflictClassification.SUPERSESSION: EdgeKind.SUPERSEDES,
    ConflictClassification.REFINEMENT: EdgeKind.REFINES,
    ConflictClassification.UNRESOLVABLE: EdgeKind.RELATES_TO,
}


#: Statuses the supersession of a record keeps (any other head is ``active``).
_KEPT_BY_SUPERSESSION = frozenset({MemoryStatus.CHALLENGED, MemoryStatus.CONSOLIDATED})

#: Times a step is tried again after its record moved on under it.
RETRIES_AFTER_MOVE = 3


class Step(StrEnum):
    """One state change a resolution makes."""

    SUPERSEDE_OLDER = "supersede_older"
    CHALLENGE_OLDER = "challenge_older"
    CHALLENGE_NEWER = "challenge_newer"


#: What each state-changing class does when the writer may change both records.
FULL_STEPS = {
    ConflictClassification.SUPERSESSION: (Step.SUPERSEDE_OLDER,),
    ConflictClassification.CONTRADICTION: (Step.CHALLENGE_OLDER, Step.CHALLENGE_NEWER),
}


@dataclass(frozen=True, slots=True)
class Resolution:
    """What the resolution of one conflict will change, and why it was escalated (if so)."""

    steps: tuple[Step, ...]
    escalated: str | None = None


def plan_resolution(
    conflict: ConflictResult,
    *,
    writer: CallerIdentity,
    decision_type: GateDecisionType,
    older: MemoryRecord | None,
    standing: TrustLevel,
    newer: MemoryRecord,
    made: MemoryRecord | None = None,
) -> Resolution:
    """The steps a resolution on ``writer``'s behalf may take (see the module docstring).
    ``made``: the version that gave ``older`` its content (:func:`narrated_sources`)."""
    wanted = FULL_STEPS.get(conflict.classification, ())
    if not wanted:
        return Resolution(())
    if older is None:
        return Resolution((), escalated="the existing record is gone")
    merged = narrated_sources(older, made)
    denial: str | None
    if merged > 1:
        denial = (
            f"the existing record tells {merged} records' accounts together; ending or "
            "challenging it would retire what the others state"
        )
        if decision_type is not GateDecisionType.EXTERNAL:
            return Resolution((), escalated=denial)
    else:
        if decision_type is not GateDecisionType.EXTERNAL:
            # Internal writers may change any record, but not on grounds hidden from its
            # readers.
            if older.access_level.allows(newer.access_level):
                return Resolution(_shown_to_newer(wanted, older=older, newer=newer))
            writer = RESOLVER
        denial = resolution_denial(writer, older, standing=standing, newer=newer)
    # The newer record is restated only on grounds its own readers may read (ADR-008).
    may_change_newer = write_denial(
        writer, newer, existing=newer
    ) is None and newer.access_level.allows(older.access_level)
    if denial is None:
        steps = tuple(s for s in wanted if s is not Step.CHALLENGE_NEWER or may_change_newer)
        return Resolution(steps)
    return Resolution((Step.CHALLENGE_NEWER,) if may_change_newer else (), escalated=denial)


def merged_sources(record: MemoryRecord) -> int:
    """How many records' accounts a consolidated narrative (a ``merge``) tells together; 1
    for any other record. A later claim may change one of those accounts, never all of
    them, so a resolution does not end or challenge such a record: it is escalated."""
    if record.consolidation_path is not ConsolidationPath.SLOW:
        return 1
    made = record.metadata.get("consolidation")
    if not isinstance(made, dict) or made.get("action") != "merge":
        return 1
    sources = made.get("sources")
    return sources if isinstance(sources, int) and sources > 1 else 1


def narrated_sources(older: MemoryRecord, made: MemoryRecord | None) -> int:
    """:func:`merged_sources` of the version that gave ``older`` its content (``made``; None:
    ``older`` itself). A narrative is what consolidation wrote: an agent's update of it stays
    on the slow path and may keep or drop its note, but a new content is the agent's claim
    (resolved as any other), and a new note alone leaves the narrative what it was."""
    if made is None:
        return merged_sources(older)
    if made.gate_decision_type is not GateDecisionType.CONSOLIDATION:
        return 1
    return merged_sources(made)


def _shown_to_newer(
    steps: tuple[Step, ...], *, older: MemoryRecord, newer: MemoryRecord
) -> tuple[Step, ...]:
    """``steps`` without challenging the newer record when its readers may not read the
    older one: they would see it change on grounds they may not read (ADR-008)."""
    if newer.access_level.allows(older.access_level):
        return steps
    return tuple(s for s in steps if s is not Step.CHALLENGE_NEWER)


@dataclass(frozen=True, slots=True)
class ConflictLinks:
    """What a write records of its conflicts: edges from the new version, and outbox events
    (name, payload) in the order they are published."""

    edges: list[store.NewEdge]
    events: list[tuple[str, dict[str, Any]]]


def needs_reads(advice: AdvisorDecision | None) -> bool:
    """Whether linking the conflicts of ``advice`` reads records inside the write (a
    state-changing class needs the older record and its standing to plan its resolution)."""
    return advice is not None and any(c.classification in STATE_CHANGING for c in advice.conflicts)


def conflict_links(
    resolved: Sequence[tuple[ConflictResult, Resolution]],
    *,
    advice: AdvisorDecision,
    new: MemoryRecord,
    decision_id: uuid.UUID,
) -> ConflictLinks:
    """The edges and events of a write's conflicts, each with its planned resolution."""
    edges: list[store.NewEdge] = []
    events: list[tuple[str, dict[str, Any]]] = []
    found: list[dict[str, Any]] = []
    for conflict, resolution in resolved:
        if resolution.steps:
            found.append({**_identifiers(conflict), "steps": [s.value for s in resolution.steps]})
        provenance: dict[str, Any] = {
            "classification": conflict.classification.value,
            "reason": conflict.reason,
            "rule": advice.source,
        }
        kind = CONFLICT_EDGES[conflict.classification]
        if resolution.escalated is not None:
            kind = EdgeKind.CONTRADICTS
            provenance |= {"resolution": "escalated", "escalated": resolution.escalated}
        edges.append(
            store.NewEdge(conflict.existing_version_id, kind, conflict.similarity, provenance)
        )
        if (
            conflict.classification is ConflictClassification.UNRESOLVABLE
            or resolution.escalated is not None
        ):
            payload: dict[str, Any] = {
                **_identifiers(conflict),
                "record_id": str(new.record_id),
                "version_id": str(new.id),
                "decision_id": str(decision_id),
                "type": new.type.value,
                "namespace": new.namespace,
            }
            if resolution.escalated is not None:
                payload["escalated"] = resolution.escalated
            events.append((CONFLICT_DETECTED, payload))
    if found:
        body = {
            "record_id": str(new.record_id),
            "version_id": str(new.id),
            "decision_id": str(decision_id),
            "conflicts": found,
        }
        events.append((CONFLICTS_FOUND, body))
    return ConflictLinks(edges, events)


def recorded_conflicts(request: GateRequest, advice: AdvisorDecision | None) -> bool:
    """Whether a write records its conflicts at all: self-healing writes (among them the
    resolutions themselves) record none, as they restate records whose conflicts were
    recorded already."""
    return (
        advice is not None
        and bool(advice.conflicts)
        and request.decision_type is not GateDecisionType.SELF_HEALING
    )


async def link_conflicts(
    conn: Connection,
    events: EventBus,
    *,
    request: GateRequest,
    advice: AdvisorDecision | None,
    new: MemoryRecord,
    decision_id: uuid.UUID,
) -> None:
    """Record each conflict Layer 2 found as an edge from the new version, inside the write's
    transaction; put the state changes the writer may make in ``memory.conflicts_found`` and
    an unresolvable or escalated conflict in ``memory.conflict_detected`` (ADR-010)."""
    if advice is None or not recorded_conflicts(request, advice):
        return
    resolved: list[tuple[ConflictResult, Resolution]] = []
    for conflict in advice.conflicts:
        resolution = Resolution(())
        if conflict.classification in STATE_CHANGING:
            older = await store.version_by_id(conn, conflict.existing_version_id)
            standing = await store.standing(conn, conflict.existing_record_id)
            resolution = plan_resolution(
                conflict,
                writer=request.caller_identity,
                decision_type=request.decision_type,
                older=older,
                standing=standing,
                newer=new,
                made=await store.content_version(conn, conflict.existing_record_id),
            )
        resolved.append((conflict, resolution))
    links = conflict_links(resolved, advice=advice, new=new, decision_id=decision_id)
    await store.add_edges(conn, source=new.id, edges=links.edges, decision_id=decision_id)
    for name, payload in links.events:
        await events.publish(conn, Event(name, new.record_id, payload))


async def publish_escalation(
    db: DatabaseAdapter, events: EventBus, record_id: uuid.UUID, payload: dict[str, Any]
) -> None:
    """Put one conflict found after its write in front of a person (:data:`CONFLICT_DETECTED`,
    its own transaction, delivered after the commit)."""
    async with db.transaction() as conn:
        await events.publish(conn, Event(CONFLICT_DETECTED, record_id, payload))
    events.committed()


def _identifiers(conflict: ConflictResult) -> dict[str, Any]:
    """A conflict as the outbox carries it: identifiers and class, never content."""
    return {
        "classification": conflict.classification.value,
        "existing_record_id": str(conflict.existing_record_id),
        "existing_version_id": str(conflict.existing_version_id),
        "similarity": conflict.similarity,
        "reason": conflict.reason,
    }


def restatement(
    record: MemoryRecord, *, status: MemoryStatus | None, key: str, **changes: object
) -> GateRequest:
    """A ``self_healing`` UPDATE by the resolver restating ``record`` (its head) with
    ``changes`` (and ``status``: None keeps none, so the new version is ``active``), under the
    request id ``key``."""
    if status is not None:
        changes["status"] = status
    proposal = record.model_copy(update={"id": uuid.uuid4(), **changes})
    return GateRequest(
        GateAction.UPDATE,
        proposal,
        RESOLVER,
        GateDecisionType.SELF_HEALING,
        expected_version=record.version,
        request_id=key,
        status=status,
    )


def resolution_requests(
    conflict: ConflictResult,
    *,
    newer: MemoryRecord,
    older: MemoryRecord,
    decision_id: uuid.UUID,
    steps: Sequence[Step] | None = None,
    revision: int | None = None,
    summary: uuid.UUID | None = None,
) -> list[GateRequest]:
    """The Gate requests that carry out one conflict's resolution (possibly none).

    ``steps`` are those :func:`plan_resolution` allowed; events queued before steps were
    recorded carry none and get every step of their class. ``revision``: the version a step
    is retried against after its record moved on (a request id of its own, see
    :mod:`~engram.memory.gate.resolver`). ``summary``: the consolidated record a step is
    carried out on in place of a record a batch consumed (passed as that record; a request
    id of its own, :mod:`~engram.memory.gate.consumed`).
    """
    key = f"resolve:{decision_id}:{conflict.existing_version_id}"
    if summary is not None:
        key = f"{key}:summary:{summary}"
    at = "" if revision is None else f"@{revision}"
    allowed = set(FULL_STEPS.get(conflict.classification, ()) if steps is None else steps)
    # Ending a claim's validity changes no status: a challenged record stays challenged, and
    # a source a batch consumed since the write stays consolidated under its summary.
    keep = older.status if older.status in _KEPT_BY_SUPERSESSION else None
    requests = []
    if Step.SUPERSEDE_OLDER in allowed:
        older_start = older.event_time or older.ingestion_time
        newer_start = newer.event_time or newer.ingestion_time
        requests.append(
            restatement(
                older,
                status=keep,
                key=f"{key}:supersede{at}",
                event_time_end=max(older_start, newer_start),
            )
        )
    if Step.CHALLENGE_OLDER in allowed:
        requests.append(
            restatement(older, status=MemoryStatus.CHALLENGED, key=f"{key}:challenge-older{at}")
        )
    if Step.CHALLENGE_NEWER in allowed:
        requests.append(
            restatement(newer, status=MemoryStatus.CHALLENGED, key=f"{key}:challenge-newer{at}")
        )
    return requests


def in_effect(step: Step, head: MemoryRecord, proposal: MemoryRecord) -> bool:
    """Whether ``head`` already says what ``step`` would write (``proposal``)."""
    if step is Step.SUPERSEDE_OLDER:
        return head.event_time_end is not None and head.event_time_end <= (
            proposal.event_time_end or head.event_time_end
        )
    return head.status is MemoryStatus.CHALLENGED
