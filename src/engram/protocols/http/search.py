"""``/v1/search`` and ``/v1/feedback``: retrieval over the records the caller may read."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from engram.protocols.http.auth import Caller, KernelDep
from engram.protocols.http.memories import IdempotencyKey, request_id
from engram.protocols.http.models import FeedbackBody, SearchBody
from engram.protocols.http.problems import problem_responses
from engram.protocols.views import FeedbackView, SearchView, feedback_view, search_view

router = APIRouter(prefix="/v1", tags=["search"])


@router.post(
    "/search",
    summary="Search by meaning, lifted by the query's rarer words",
    response_model=None,
    responses={200: {"model": SearchView}, **problem_responses(401, 422)},
)
async def search(body: SearchBody, kernel: KernelDep, principal: Caller) -> JSONResponse:
    """The best records for a query; as of an instant with ``as_of_event``/``as_of_ingestion``."""
    return JSONResponse(search_view(await body.run(kernel, principal.caller)))


@router.post(
    "/feedback",
    summary="Rate a retrieved record",
    response_model=None,
    responses={200: {"model": FeedbackView}, **problem_responses(401, 403, 404, 422, 429)},
)
async def feedback(
    body: FeedbackBody,
    kernel: KernelDep,
    principal: Caller,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """Store whether a record helped (a useful record also counts as read, for decay); a
    retry under the same ``Idempotency-Key`` stores nothing and answers with the first."""
    receipt = await kernel.retrieval.feedback(
        principal.caller,
        body.record_id,
        useful=body.useful,
        signal=body.signal,
        request_id=request_id(principal, idempotency_key),
    )
    return JSONResponse(feedback_view(receipt))
