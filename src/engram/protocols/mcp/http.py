"""MCP over streamable HTTP at ``/mcp`` of the engram HTTP server.

Each request carries ``Authorization: Bearer <agent token>``; the endpoint authenticates it
before the SDK sees the request (401 without a valid token) and attaches the principal to the
request's ASGI scope, where the tool handler finds it. So every request acts for the agent
whose token it carries, whatever came before.

The SDK's session manager runs stateless with JSON responses (ADR-013): no session state on
the server, one JSON body per request, nothing to resume after a restart.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import structlog
from mcp.server import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from engram.agents.registry import Principal
from engram.errors import EngramError, Unauthenticated
from engram.kernel import Kernel
from engram.protocols.mcp.depth import readable_bytes
from engram.protocols.mcp.server import build_server, message_problem
from engram.protocols.mcp.tools import EngramTools

log = structlog.get_logger("engram.mcp")

PATH = "/mcp"
#: Key of the authenticated principal in the ASGI scope handed to the SDK.
PRINCIPAL_KEY = "engram.principal"


def principal_from_request(ctx: ServerRequestContext[Any, Any]) -> Principal | None:
    """The principal the endpoint attached to this request (None if there is none)."""
    request = ctx.request
    if not isinstance(request, Request):
        return None
    principal = request.scope.get(PRINCIPAL_KEY)
    return principal if isinstance(principal, Principal) else None


def _bearer(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


class McpEndpoint:
    """The ASGI endpoint at ``/mcp``; serves while :meth:`serving` is active."""

    def __init__(self) -> None:
        self._kernel: Kernel | None = None
        self._manager: StreamableHTTPSessionManager | None = None

    def mount(self, app: Starlette) -> None:
        """Route ``/mcp`` (every method) of ``app`` to this endpoint."""
        app.router.routes.append(Route(PATH, endpoint=self, include_in_schema=False))

    @asynccontextmanager
    async def serving(self, kernel: Kernel) -> AsyncIterator[None]:
        """Run the SDK's session manager for ``kernel`` (inside the application's lifespan)."""
        manager = StreamableHTTPSessionManager(
            app=build_server(EngramTools(kernel), principal_from_request),
            json_response=True,
            stateless=True,
        )
        async with manager.run():
            self._kernel, self._manager = kernel, manager
            try:
                yield
            finally:
                self._kernel = self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kernel, manager = self._kernel, self._manager
        if kernel is None or manager is None:
            response = JSONResponse({"error": "the MCP endpoint is not running"}, status_code=503)
            await response(scope, receive, send)
            return
        if scope.get("method") != "POST":
            # Stateless, JSON responses (ADR-013): no event stream to open (GET), no session
            # to end (DELETE). The SDK would hold a GET's stream open, sending nothing.
            response = JSONResponse(
                {"error": "method-not-allowed", "message": "send JSON-RPC requests by POST"},
                status_code=405,
                headers={"Allow": "POST"},
            )
            await response(scope, receive, send)
            return
        body = await _read_body(receive)
        if body is None:
            return  # the client went away
        # nesting or integers past what the SDK's parser reads are made readable, so the Gate
        # refuses them (audited)
        body = readable_bytes(body) or body
        receive = _replay(body, receive)
        try:
            principal = await kernel.agents.authenticate(_bearer(scope))
        except Unauthenticated as exc:
            response = JSONResponse(
                {"error": "unauthenticated", "message": exc.message},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="engram"'},
            )
            await response(scope, receive, send)
            return
        except EngramError as exc:
            log.warning("mcp.authentication_failed", error=type(exc).__name__)
            response = JSONResponse(
                {"error": "unavailable", "message": "cannot check the token right now"},
                status_code=503,
            )
            await response(scope, receive, send)
            return
        # after the token: nothing is parsed for a stranger
        status, problem = 415, _media_problem(scope)
        if problem is None:
            status, problem = 400, envelope_problem(body)
        if problem is not None:
            code, message = problem
            refused = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
            await JSONResponse(refused, status_code=status)(scope, receive, send)
            return
        await manager.handle_request({**scope, PRINCIPAL_KEY: principal}, receive, send)


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body (the application's body limit bounds it), or None if the client
    disconnected first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the SDK the body already read, then the connection's own."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _media_problem(scope: Scope) -> tuple[int, str] | None:
    """The JSON-RPC error of a request whose body is not declared JSON (the SDK answers one
    with a plain-text 400)."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-type":
            media = value.decode("latin-1").partition(";")[0].strip().lower()
            if media == "application/json":
                return None
    return -32600, "send the request with Content-Type: application/json"


def envelope_problem(body: bytes) -> tuple[int, str] | None:
    """The JSON-RPC error of a message (or batch) the SDK would not answer, or answer without
    a reason (:func:`engram.protocols.mcp.server.message_problem`). Bodies that are not JSON
    are left to the SDK (it answers -32700)."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return message_problem(parsed)
