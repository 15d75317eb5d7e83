"""The operations endpoints: ``/healthz`` (liveness), ``/readyz`` (readiness) and ``/metrics``
(Prometheus), outside ``/v1`` and outside its agent-token rule (ADR-022).

- ``/healthz`` needs no token and tells nothing but that the process answers.
- ``/readyz`` needs no token: each check's name and whether it passed, failed or ran out of
  time. A failing check's reason (hosts, ports, socket paths, driver messages, how many
  records await consolidation) goes to the log, and to callers that present what
  ``/metrics`` accepts.
- ``/metrics`` counts records, decisions and flags of every access level, so it answers only
  the metrics token (``ENGRAM_METRICS_TOKEN``, which grants nothing else) or an agent
  cleared to read every access level: 401 for no token or any other, 403 for an agent
  without that clearance.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from engram.errors import EngramError
from engram.observability.health import CheckOutcome, ProbeOverran, bounded
from engram.protocols.http.auth import Credentials, Scraper, detail_reader, kernel_of
from engram.protocols.http.problems import problem_responses

router = APIRouter(tags=["operations"])

#: How long a scrape waits for the database-wide gauges before it serves the ones it has
#: (Prometheus gives a scrape 10 s by default).
GAUGES_SECONDS = 2.0


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Liveness: the process is up and its event loop answers."""
    return {"status": "ok"}


def _check(outcome: CheckOutcome, *, detailed: bool) -> dict[str, Any]:
    if not detailed:
        return {"ok": outcome.ok, "detail": outcome.summary}
    return {
        "ok": outcome.ok,
        "detail": outcome.detail,
        "duration_ms": round(outcome.duration_ms, 2),
    }


@router.get("/readyz", responses=problem_responses(401, 403))
async def readyz(request: Request, credentials: Credentials) -> JSONResponse:
    """Readiness: database, migrations, embedding model, and the specification's checks
    (a synthetic Gate decision, an audit write rolled back, the consolidation backlog).
    Each failure's reason only for the metrics token or a cleared agent's token."""
    # the token is checked while the checks run: a database that hangs delays the answer
    # by the slowest check's limit once, not twice
    outcomes, detailed = await asyncio.gather(
        kernel_of(request).health.run(), detail_reader(request, credentials)
    )
    ready = all(outcome.ok for outcome in outcomes)
    body: dict[str, Any] = {
        "status": "ready" if ready else "not_ready",
        "checks": {outcome.name: _check(outcome, detailed=detailed) for outcome in outcomes},
    }
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get(
    "/metrics",
    responses=problem_responses(401, 403),
    response_class=Response,
)
async def metrics(request: Request, _: Scraper) -> Response:
    """Prometheus metrics in the text exposition format (database-wide gauges refreshed at
    most every 15 s), for the metrics token or an agent cleared to read every access level."""
    kernel = kernel_of(request)
    # a scrape still answers while the database is down or hangs: with the gauges it has
    with contextlib.suppress(EngramError, ProbeOverran):
        await bounded(kernel.refresh_gauges(), GAUGES_SECONDS)
    payload, content_type = kernel.metrics.exposition()
    return Response(content=payload, media_type=content_type)
