"""Admin endpoints: the audit log, the quarantine desk and open escalations (403 for agents
without the admin flag)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from engram.protocols.http.auth import Admin, KernelDep
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


@router.get(
    "/audit",
    summary="Search the audit log",
    response_model=None,
    responses={200: {"model": AuditPage}, **problem_responses(401, 403, 422)},
)
async def audit(
    *,
    kernel: KernelDep,
    _: Admin,
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
) -> JSONResponse:
    """Decisions in log order after ``cursor``, filtered; ``next_cursor`` is null at the end."""
    entries = await kernel.audit.search(
        after_seq=cursor,
        since=since,
        until=until,
        agent_id=agent,
        decision=decision,
        action=action,
        limit=limit,
    )
    more = len(entries) == limit and entries
    return JSONResponse(
        {"entries": entries, "next_cursor": int(entries[-1]["seq"]) if more else None}
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
    _: Admin,
    cursor: Annotated[
        Instant | None, Query(description="Ingestion time of the last record seen.")
    ] = None,
    limit: Limit = 100,
) -> JSONResponse:
    """Quarantined records, oldest first."""
    records = await kernel.quarantine.pending(after=cursor, limit=limit)
    last = records[-1].ingestion_time.isoformat() if len(records) == limit and records else None
    return JSONResponse({"records": [record_view(r) for r in records], "next_cursor": last})


@router.post(
    "/quarantine/{record_id}/release",
    summary="Release a quarantined record",
    response_model=None,
    responses={200: {"model": ReleaseView}, **problem_responses(401, 403, 404, 409, 422)},
)
async def release(
    record_id: UUID, body: ReleaseBody, kernel: KernelDep, principal: Admin
) -> JSONResponse:
    """Move a quarantined record below ``sensitive``; the release is audited with the reason."""
    record, decision_id = await kernel.quarantine.release(
        record_id, admin=principal.caller, reason=body.reason, level=body.level
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
