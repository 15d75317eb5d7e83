"""The edges a new version gets in its write's transaction.

- ``derived_from`` to every version it cites as evidence;
- ``relates_to`` to its close neighbours: the active records Layer 2 counted as related
  (cosine similarity ≥ :data:`~engram.memory.gate.advisor.RELATED`, among those the writer
  may read), weight = similarity. They make a topic visible as it accumulates, which is what
  the event-driven consolidation trigger watches (ADR-019); a neighbour it conflicts with
  gets the conflict's edge instead;
- the conflicts Layer 2 found (:func:`~engram.memory.gate.resolution.link_conflicts`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

from engram.infra.db import Connection
from engram.infra.events import EventBus
from engram.memory import store
from engram.memory.gate.advisor import AdvisorDecision
from engram.memory.gate.requests import GateRequest
from engram.memory.gate.resolution import link_conflicts
from engram.memory.types import EdgeKind, GateDecisionType, MemoryRecord


def new_edges(
    *,
    request: GateRequest,
    advice: AdvisorDecision | None,
    new_id: UUID,
    evidence: Mapping[UUID, UUID],
    related: Sequence[tuple[UUID, float]],
) -> list[store.NewEdge]:
    """The ``derived_from`` and ``relates_to`` edges of a new version (see the module
    docstring); the conflicts' edges are :func:`link_conflicts`' own."""
    edges = [
        store.NewEdge(target, EdgeKind.DERIVED_FROM, provenance={"reason": "evidence_links"})
        for target in sorted(set(evidence.values()))
        if target != new_id
    ]
    if related and request.decision_type is GateDecisionType.EXTERNAL:
        # A neighbour it conflicts with gets the conflict's edge, which says more.
        conflicting = {c.existing_version_id for c in advice.conflicts} if advice else set()
        edges += [
            store.NewEdge(target, EdgeKind.RELATES_TO, weight, {"reason": "similar"})
            for target, weight in related
            if target != new_id and target not in conflicting
        ]
    return edges


async def link_version(
    conn: Connection,
    events: EventBus,
    *,
    request: GateRequest,
    advice: AdvisorDecision | None,
    new: MemoryRecord,
    evidence: Mapping[UUID, UUID],
    related: Sequence[tuple[UUID, float]],
    decision_id: UUID,
) -> None:
    """Every edge of ``new`` (see the module docstring)."""
    edges = new_edges(
        request=request, advice=advice, new_id=new.id, evidence=evidence, related=related
    )
    await store.add_edges(conn, source=new.id, edges=edges, decision_id=decision_id)
    await link_conflicts(
        conn, events, request=request, advice=advice, new=new, decision_id=decision_id
    )
