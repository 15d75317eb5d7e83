"""Who is calling: the bearer token, checked by the kernel's agent registry, or for the
operations endpoints the scrape-only metrics token (``ENGRAM_METRICS_TOKEN``, ADR-022)."""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated

import structlog
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from engram.agents.registry import Principal
from engram.errors import Forbidden, InfrastructureError, Unauthenticated
from engram.kernel import Kernel
from engram.memory.types import AccessLevel
from engram.observability.health import ProbeOverran, bounded

log = structlog.get_logger("engram.http")

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AgentToken",
    description="An agent token (`engram_…`), sent as `Authorization: Bearer <token>`.",
)
#: What a caller without the metrics token or a cleared agent token is told (the same for a
#: missing, malformed, unknown or revoked token: which of them it was is not said).
SCRAPE_REQUIRED = (
    "the metrics token (ENGRAM_METRICS_TOKEN) or the token of an agent cleared to read "
    "every access level is required"
)


#: How long ``/readyz`` waits for the database to check a token before it answers without
#: reasons: as long as its slowest check may take (a hung database must not hang readiness).
TOKEN_CHECK_SECONDS = 5.0


def kernel_of(request: Request) -> Kernel:
    """The kernel the application's lifespan opened."""
    kernel: Kernel = request.app.state.kernel
    return kernel


async def authenticated(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """The agent holding the bearer token (401 without a valid one)."""
    token = None if credentials is None else credentials.credentials
    return await kernel_of(request).agents.authenticate(token)


def _digest(token: str) -> bytes:
    # Header values arrive decoded as Latin-1, so every one of them encodes.
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def is_metrics_token(kernel: Kernel, token: str) -> bool:
    """True when ``token`` is the configured metrics token. The digests are compared in
    constant time, so neither the token's length nor its first characters show in timing."""
    expected = kernel.settings.metrics_token
    if expected is None:
        return False
    return hmac.compare_digest(_digest(token), _digest(expected.get_secret_value()))


def cleared_for_everything(principal: Principal) -> bool:
    """True for an agent that may read records of every access level: what the operational
    figures count (records, decisions, flags) is then nothing it could not read anyway."""
    return all(principal.caller.max_read_level.allows(level) for level in AccessLevel)


async def administrator(principal: Annotated[Principal, Depends(authenticated)]) -> Principal:
    """An authenticated admin agent cleared to read every access level (403 for any other
    agent). The admin endpoints show every level's records: the audit log's snapshots, the
    quarantine's flagged content on ``reveal``, the escalations' ids; an admin narrowed
    below ``sensitive`` would read there what it may not read anywhere else (ADR-022)."""
    if not principal.admin:
        raise Forbidden("this endpoint is for admin agents")
    if not cleared_for_everything(principal):
        raise Forbidden("this endpoint is for admin agents cleared to read every access level")
    return principal


async def scraper(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """The metrics token, or an agent cleared to read every access level: 401 for no token
    or one that is neither, 403 for a valid agent token without that clearance."""
    kernel = kernel_of(request)
    token = None if credentials is None else credentials.credentials
    if token is None:
        raise Unauthenticated(SCRAPE_REQUIRED)
    if is_metrics_token(kernel, token):
        return
    try:
        principal = await kernel.agents.authenticate(token)
    except Unauthenticated as exc:
        raise Unauthenticated(SCRAPE_REQUIRED) from exc
    if not cleared_for_everything(principal):
        raise Forbidden(
            "this endpoint is for the metrics token or agents cleared to read every access level"
        )


async def detail_reader(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> bool:
    """Whether the caller of ``/readyz`` sees each check's reason: without a token it does
    not; with one, the token must be what ``/metrics`` accepts (401 and 403 as there). When
    the database cannot say whose agent token it is, the caller gets the answer without
    reasons (readiness must answer then above all)."""
    if credentials is None:
        return False
    try:
        await bounded(scraper(request, credentials), TOKEN_CHECK_SECONDS)
    except (InfrastructureError, ProbeOverran) as exc:
        log.warning("http.readyz_token_unchecked", error=type(exc).__name__)
        return False
    return True


KernelDep = Annotated[Kernel, Depends(kernel_of)]
Caller = Annotated[Principal, Depends(authenticated)]
Admin = Annotated[Principal, Depends(administrator)]
Scraper = Annotated[None, Depends(scraper)]
#: The bearer credentials as sent (``/readyz`` checks them beside its checks).
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
