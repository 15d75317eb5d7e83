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
    for target in sorted(set(evidence.values())):
        if target != new.id:
            await store.add_edge(
                conn,
                source=new.id,
                target=target,
                kind=EdgeKind.DERIVED_FROM,
                decision_id=decision_id,
                provenance={"reason": "evidence_links"},
            )
    if related and request.decision_type is GateDecisionType.EXTERNAL:
        # A neighbour it conflicts with gets the conflict's edge, which says more.
        conflicting = {c.existing_version_id for c in advice.conflicts} if advice else set()
        await store.add_related(
            conn,
            source=new.id,
            targets=[(t, w) for t, w in related if t != new.id and t not in conflicting],
            decision_id=decision_id,
        )
    await link_conflicts(
        conn, events, request=request, advice=advice, new=new, decision_id=decision_id
    )
