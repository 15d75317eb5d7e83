"""Admin endpoints: the audit log, the quarantine desk and open escalations (403 for agents
without the admin flag)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from engram.errors import ValidationFailed
from engram.memory.admin.quarantine import MAX_REASON, parse_cursor
from engram.memory.admin.redaction import redact_audit_row, redact_record
from engram.protocols.http.auth import Admin, KernelDep
from engram.protocols.http.memories import IfMatch, expected_version
from engram.protocols.http.models import (
    NO_NUL,
    PG_BIGINT_MAX,
    AuditAction,
    AuditDecision,
    AuditPage,
    ConflictsView,
    QuarantinePage,
    ReleaseBody,
    ReleaseView,
)
from engram.protocols.http.problems import problem_responses
from engram.protocols.inprocess import Instant
from engram.protocols.views import record_view

router = APIRouter(prefix="/v1", tags=["admin"])

Limit = Annotated[int, Query(ge=1, le=1000, description="Most entries to return.")]

Reveal = Annotated[
    bool, Query(description="Show flagged content; needs `reason`, and is audited (REVEAL).")
]
RevealReason = Annotated[
    str | None,
    Query(max_length=MAX_REASON, pattern=NO_NUL, description="Why the content must be seen."),
]


@router.get(
    "/audit",
    summary="Search the audit log",
    response_model=None,
    responses={200: {"model": AuditPage}, **problem_responses(401, 403, 422)},
)
async def audit(
    *,
    kernel: KernelDep,
    principal: Admin,
    since: Annotated[Instant | None, Query(description="From this instant (inclusive).")] = None,
    until: Annotated[Instant | None, Query(description="Before this instant.")] = None,
    agent: Annotated[
        str | None, Query(min_length=1, max_length=200, pattern=NO_NUL, description="Agent id.")
    ] = None,
    decision: Annotated[AuditDecision | None, Query()] = None,
    action: Annotated[AuditAction | None, Query()] = None,
    cursor: Annotated[
        int, Query(ge=0, le=PG_BIGINT_MAX, description="The last seq seen (next_cursor).")
    ] = 0,
    limit: Limit = 100,
    reveal: Reveal = False,
    reason: RevealReason = None,
) -> JSONResponse:
    """Decisions in log order after ``cursor``, filtered; ``next_cursor`` is null at the end.
    Rows about records the PII check flagged are redacted unless ``reveal`` with a ``reason``
    (audited first, as ``engram audit export --reveal`` is)."""
    why = _reveal_reason(reveal, reason)
    flagged = await kernel.quarantine.flagged()
    if why is not None and flagged:
        await kernel.quarantine.reveal(
            admin=principal.caller, shown="GET /v1/audit", reason=why, record_ids=sorted(flagged)
        )
    entries = await kernel.audit.search(
        after_seq=cursor,
        since=since,
        until=until,
        agent_id=agent,
        decision=decision,
        action=action,
        limit=limit + 1,  # one more than shown: whether another page follows
    )
    more = len(entries) > limit
    entries = entries[:limit]
    shown = entries if why is not None else [redact_audit_row(e, flagged) for e in entries]
    return JSONResponse(
        {"entries": shown, "next_cursor": int(entries[-1]["seq"]) if more else None}
    )


@router.get(
    "/quarantine",
    summary="Records quarantined by the PII check",
    response_model=None,
    responses={200: {"model": QuarantinePage}, **problem_responses(401, 403, 422)},
)
async def quarantine(
    *,
    kernel: KernelDep,
    principal: Admin,
    cursor: Annotated[
        str | None,
        Query(
            max_length=64,
            description=(
                "The `next_cursor` of the page before (the audit seq of its last record's "
                "quarantine decision). An ingestion time, this list's cursor before it paged "
                "by seq, is a 422 `stale-cursor`: list again without one."
            ),
        ),
    ] = None,
    limit: Limit = 100,
    reveal: Reveal = False,
    reason: RevealReason = None,
) -> JSONResponse:
    """Quarantined records in the order of their quarantine decisions, oldest first; their
    content and metadata are left out unless ``reveal`` with a ``reason`` (audited first, as
    ``engram quarantine list --reveal`` is)."""
    why = _reveal_reason(reveal, reason)
    after = 0 if cursor is None else parse_cursor(cursor)
    page = await kernel.quarantine.pending(after=after, limit=limit)
    if why is not None and page.records:
        await kernel.quarantine.reveal(
            admin=principal.caller,
            shown="GET /v1/quarantine",
            reason=why,
            record_ids=[r.record_id for r in page.records],
        )
    views = [record_view(r) for r in page.records]
    shown = views if why is not None else [redact_record(v) for v in views]
    return JSONResponse({"records": shown, "next_cursor": page.next_cursor})


def _reveal_reason(reveal: bool, reason: str | None) -> str | None:
    """The audited reason of a reveal; 422 when it is asked for without one."""
    if not reveal:
        return None
    if reason is None or not reason.strip():
        raise ValidationFailed(errors=["reason: revealing quarantined content must say why"])
    return reason


@router.post(
    "/quarantine/{record_id}/release",
    summary="Release a quarantined record",
    response_model=None,
    responses={200: {"model": ReleaseView}, **problem_responses(401, 403, 404, 409, 422)},
)
async def release(
    record_id: UUID,
    body: ReleaseBody,
    kernel: KernelDep,
    principal: Admin,
    if_match: IfMatch = None,
) -> JSONResponse:
    """Move a quarantined record below ``sensitive``; the release is audited with the reason.
    With ``If-Match`` (the version reviewed), a record that moved on since is a 409."""
    record, decision_id = await kernel.quarantine.release(
        record_id,
        admin=principal.caller,
        reason=body.reason,
        level=body.level,
        expected_version=expected_version(if_match, required=False),
    )
    return JSONResponse({"decision_id": str(decision_id), "record": record_view(record)})


@router.get(
    "/conflicts",
    summary="Open escalations",
    response_model=None,
    responses={200: {"model": ConflictsView}, **problem_responses(401, 403, 422)},
)
async def conflicts(kernel: KernelDep, _: Admin, limit: Limit = 100) -> JSONResponse:
    """Conflicts the Gate could not resolve, waiting for a person (oldest first)."""
    rows = await kernel.admin_queue.pending(limit=limit)
    return JSONResponse({"conflicts": [_escalation(row) for row in rows]})


def _escalation(row: Any) -> dict[str, Any]:
    return {
        "id": int(row["id"]),
        "kind": str(row["kind"]),
        "record_id": str(row["record_id"]),
        "payload": dict(row["payload"]),
        "created_at": row["created_at"].isoformat(),
    }
