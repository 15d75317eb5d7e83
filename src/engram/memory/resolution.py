"""Resolution of detected conflicts: recorded, never silent, always through the Gate.

The new record's own transaction already linked each conflict (``supersedes``,
``contradicts``, ``refines``; ``relates_to`` plus a ``memory.conflict_detected`` event for an
unresolvable one) and, for the state-changing classes, put ``memory.conflicts_found`` in the
outbox. When that is delivered (after the commit, at least once), the state changes are
proposed to the Gate as ``self_healing`` UPDATEs by the resolver's system identity, each
with a request id derived from the decision, so they are audited and idempotent:

* supersession: the older record gets a new version whose validity ends where the newer
  statement begins (``event_time_end``); what was believed before stays answerable;
* contradiction: both records get a new version marked ``challenged``;
* refinement and unresolvable: nothing changes state (the link, and the escalation to a
  person, are the resolution).

A resolution that finds the record moved on (another writer got there first) is skipped and
logged; the conflict stays linked.
"""

from __future__ import annotations

import uuid

from engram.memory.conflict import ConflictResult
from engram.memory.gate_io import GateRequest
from engram.memory.types import (
    CallerIdentity,
    ConflictClassification,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
)

RESOLVER = CallerIdentity.system("conflict-resolver")


def _restate(
    record: MemoryRecord, *, status: MemoryStatus | None, key: str, **changes: object
) -> GateRequest:
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
) -> list[GateRequest]:
    """The Gate requests that carry out one conflict's resolution (possibly none)."""
    key = f"resolve:{decision_id}:{conflict.existing_version_id}"
    keep = older.status if older.status is MemoryStatus.CHALLENGED else None
    if conflict.classification is ConflictClassification.SUPERSESSION:
        older_start = older.event_time or older.ingestion_time
        newer_start = newer.event_time or newer.ingestion_time
        return [
            _restate(
                older,
                status=keep,
                key=f"{key}:supersede",
                event_time_end=max(older_start, newer_start),
            )
        ]
    if conflict.classification is ConflictClassification.CONTRADICTION:
        return [
            _restate(older, status=MemoryStatus.CHALLENGED, key=f"{key}:challenge-older"),
            _restate(newer, status=MemoryStatus.CHALLENGED, key=f"{key}:challenge-newer"),
        ]
    return []
