"""The Gate requests that undo what a consolidation batch did, and its rows read back.

An item is undone by forgetting the consolidated record it made and restating each source it
consumed as ``active`` again (:func:`item_requests`); every such request is a consolidation
UPDATE or FORGET by :data:`CONSOLIDATOR`, judged by the Gate like any other write. Rollback,
release and the give-back of sources below a raised summary (:mod:`.reversal`) build on them.
"""

from __future__ import annotations

import uuid
from uuid import UUID

from engram.infra.db import Row
from engram.memory.consolidation.model import BatchItem, BatchReport
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    CallerIdentity,
    ConsolidationTrigger,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
)

CONSOLIDATOR = CallerIdentity.system("consolidation")


def restate(head: MemoryRecord, status: MemoryStatus, *, request_id: str) -> GateRequest:
    """A consolidation UPDATE that gives ``head``'s content a new status."""
    return GateRequest(
        GateAction.UPDATE,
        head.model_copy(update={"id": uuid.uuid4(), "status": status}),
        CONSOLIDATOR,
        GateDecisionType.CONSOLIDATION,
        expected_version=head.version,
        request_id=request_id,
        status=status,
    )


def item_requests(
    item: BatchItem,
    summary: MemoryRecord | None,
    heads: dict[UUID, MemoryRecord | None],
    own: set[UUID],
    key: str,
) -> tuple[list[GateRequest], list[UUID]]:
    """The requests that undo one item: forget its record (when it stands), restore each
    source whose head is still consolidated by the batch (the version the batch made, or one
    an internal writer restated since, such as a PII rescan raising its level: an agent's
    change is left alone); and the sources restored. A compression a resolution challenged in
    its one source's place (ADR-010's seventh amendment) gives that source back
    ``challenged``: undoing the batch does not undo the dispute."""
    group: list[GateRequest] = []
    disputed = (
        summary is not None and summary.status is MemoryStatus.CHALLENGED and len(item.sources) == 1
    )
    back = MemoryStatus.CHALLENGED if disputed else MemoryStatus.ACTIVE
    if summary is not None and summary.status is not MemoryStatus.FORGOTTEN:
        group.append(
            GateRequest.forget(
                summary,
                CONSOLIDATOR,
                GateDecisionType.CONSOLIDATION,
                expected_version=summary.version,
                request_id=f"{key}:{item.record_id}:{summary.version}",
            )
        )
    restored = []
    for source_id in item.sources:
        head = heads.get(source_id)
        if (
            head is None
            or head.status is not MemoryStatus.CONSOLIDATED
            or (
                head.gate_decision_id not in own
                and head.gate_decision_type is GateDecisionType.EXTERNAL
            )
        ):
            continue
        # the version in the key: an attempt after a refused one is a new request
        key_of = f"{key}:{source_id}:{head.version}"
        group.append(restate(head, back, request_id=key_of))
        restored.append(source_id)
    return group, restored


def batch_from_row(row: Row) -> BatchReport:
    items, skipped = row["items"], row["skipped"]  # jsonb: Python objects
    return BatchReport(
        batch_id=row["id"],
        items=tuple(BatchItem.from_json(item) for item in items),
        skipped=dict(skipped),
        committed=True,
        created_at=row["created_at"],
        trigger=ConsolidationTrigger(row["trigger"]),
        rolled_back_at=row["rolled_back_at"],
    )


__all__ = ["CONSOLIDATOR", "batch_from_row", "item_requests", "restate"]
