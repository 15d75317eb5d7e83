"""The HTTP server: the REST API under ``/v1`` (:mod:`engram.protocols.http.api`), the MCP
endpoint at ``/mcp`` (:mod:`engram.protocols.mcp.http`), and ``/healthz`` (liveness),
``/readyz`` (readiness) and ``/metrics`` (:mod:`engram.protocols.http.operations`, which says
who may see what there). Every request is counted and timed by route template
(:mod:`engram.protocols.http.telemetry`).

The kernel is opened in the application's lifespan and closed when the server stops; its
scheduler runs the background jobs meanwhile unless ``ENGRAM_SCHEDULER`` is off. No
request body may exceed :data:`MAX_BODY_BYTES` (``/mcp`` included): a larger one is refused
with a 413 problem as soon as its Content-Length (or the bytes read so far) says so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram import __version__
from engram.config import EngramSettings
from engram.errors import EngramError
from engram.kernel import Kernel, open_kernel
from engram.protocols.http import operations
from engram.protocols.http.api import install_api
from engram.protocols.http.bootstrap import Announce, announce_first_agent, to_stdout
from engram.protocols.http.encoding import Utf8Bodies
from engram.protocols.http.problems import BodyLimit
from engram.protocols.http.telemetry import RequestMetrics
from engram.protocols.mcp.http import McpEndpoint

#: The largest request body the server reads. A proposal is at most 256 KiB as JSON
#: (``MAX_INPUT_BYTES``); the margin lets a larger one be refused *and audited* as input,
#: while nothing near a client's memory-exhausting upload is ever buffered.
MAX_BODY_BYTES = 1024 * 1024


def create_app(
    settings: EngramSettings | None = None,
    *,
    kernel: Kernel | None = None,
    announce: Announce = to_stdout,
) -> FastAPI:
    """Build the ASGI application; it opens its own kernel unless one is passed in.

    On an empty agent registry the lifespan creates an admin agent and passes its token
    (shown once) to ``announce``.
    """
    mcp_endpoint = McpEndpoint()  # MCP streamable HTTP at /mcp (engram.protocols.mcp.http)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if kernel is not None:
            app.state.kernel = kernel
            await announce_first_agent(kernel, announce)
            async with mcp_endpoint.serving(kernel):
                yield
            return
        async with AsyncExitStack() as stack:
            try:
                opened = await stack.enter_async_context(open_kernel(settings=settings))
                app.state.kernel = opened
                await announce_first_agent(opened, announce)
                if opened.settings.scheduler:  # the background jobs (ENGRAM_SCHEDULER)
                    await stack.enter_async_context(opened.scheduler.serving())
            except EngramError as exc:
                app.state.startup_error = exc  # for `engram serve` to say, in one line
                raise
            async with mcp_endpoint.serving(opened):
                yield

    app = FastAPI(title="engram", version=__version__, lifespan=lifespan)
    mcp_endpoint.mount(app)
    install_api(app)  # the REST API under /v1 (engram.protocols.http.api)
    app.include_router(operations.router)  # /healthz, /readyz, /metrics
    app.add_middleware(Utf8Bodies)  # /v1 bodies are UTF-8 JSON text, as on /mcp
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)  # every route, /mcp included
    app.add_middleware(HeadAsGet)  # HEAD on every route that answers GET
    app.add_middleware(RequestMetrics)  # counts what BodyLimit refuses too
    app.add_middleware(StartupFailure)  # outermost: only the lifespan's messages

    return app


class HeadAsGet:
    """ASGI middleware: a HEAD request is answered as its GET would be, without the body.

    RFC 9110 (section 9.1) has every general-purpose server support GET and HEAD; FastAPI's
    routes answered HEAD ``405``, so a load balancer or an uptime check probing ``/healthz``
    with HEAD saw the server down. The status and headers (``Content-Length``, ``ETag``) are
    those of the GET; a route without GET still answers ``405`` with its ``Allow``.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def bodiless(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, bodiless)


class StartupFailure:
    """ASGI middleware: a start-up that failed with an engram error is reported as that
    error's sentence, not as the traceback Starlette attaches to ``lifespan.startup.failed``
    (which the server would log whole). Any other exception keeps its traceback: it is a bug.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        state = scope["app"].state

        async def plain(message: Message) -> None:
            error = getattr(state, "startup_error", None)
            if message["type"] == "lifespan.startup.failed" and isinstance(error, EngramError):
                message = {**message, "message": f"engram could not start: {error.message}"}
            await send(message)

        await self.app(scope, receive, plain)
