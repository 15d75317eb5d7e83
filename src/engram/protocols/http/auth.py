"""Who is calling: the bearer token, checked by the kernel's agent registry."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from engram.agents.registry import Principal
from engram.errors import Forbidden
from engram.kernel import Kernel

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AgentToken",
    description="An agent token (`engram_…`), sent as `Authorization: Bearer <token>`.",
)


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


async def administrator(principal: Annotated[Principal, Depends(authenticated)]) -> Principal:
    """An authenticated admin agent (403 for any other agent)."""
    if not principal.admin:
        raise Forbidden("this endpoint is for admin agents")
    return principal


KernelDep = Annotated[Kernel, Depends(kernel_of)]
Caller = Annotated[Principal, Depends(authenticated)]
Admin = Annotated[Principal, Depends(administrator)]
