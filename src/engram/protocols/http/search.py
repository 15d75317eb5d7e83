"""``/v1/search`` and ``/v1/feedback``: retrieval over the records the caller may read."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from engram.protocols.http.auth import Caller, KernelDep
from engram.protocols.http.models import FeedbackBody, FeedbackView, SearchBody, SearchView
from engram.protocols.http.problems import problem_responses
from engram.protocols.views import search_view

router = APIRouter(prefix="/v1", tags=["search"])


@router.post(
    "/search",
    summary="Hybrid search (vector + full text, fused by rank)",
    response_model=None,
    responses={200: {"model": SearchView}, **problem_responses(401, 422)},
)
async def search(body: SearchBody, kernel: KernelDep, principal: Caller) -> JSONResponse:
    """The best records for a query; as of an instant with ``as_of_event``/``as_of_ingestion``."""
    result = await kernel.retrieval.search(
        principal.caller,
        body.query,
        types=body.types,
        limit=body.limit,
        as_of_event=body.as_of_event,
        as_of_ingestion=body.as_of_ingestion,
        include_superseded=body.include_superseded,
        include_consolidated=body.include_consolidated,
        namespace=body.namespace,
    )
    return JSONResponse(search_view(result))


@router.post(
    "/feedback",
    summary="Rate a retrieved record",
    response_model=None,
    responses={200: {"model": FeedbackView}, **problem_responses(401, 403, 404, 422)},
)
async def feedback(body: FeedbackBody, kernel: KernelDep, principal: Caller) -> JSONResponse:
    """Store whether a record helped (a useful record also counts as read, for decay)."""
    receipt = await kernel.retrieval.feedback(
        principal.caller, body.record_id, useful=body.useful, signal=body.signal
    )
    return JSONResponse(
        {
            "id": receipt.id,
            "record_id": str(receipt.record_id),
            "version_id": str(receipt.version_id),
            "useful": receipt.useful,
            "signal": receipt.signal,
            "created_at": receipt.created_at.isoformat(),
        }
    )
