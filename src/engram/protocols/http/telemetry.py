"""Request metrics: every HTTP request counted by route template, method and status, and timed.

The route label is the template a request matched (``/v1/memories/{record_id}``), never the
path it asked for, so record ids do not make a series each; a path no route knows is
``unmatched``, and a method outside the standard ones is ``other``.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.observability.metrics import EngramMetrics

UNMATCHED = "unmatched"
OTHER_METHOD = "other"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestMetrics:
    """ASGI middleware recording ``engram_http_requests_total`` and
    ``engram_http_request_seconds`` in the metrics of the application's kernel.

    It sits outside the other middleware, so a request they answer themselves (a body over
    the limit) is counted too; a request that ends in an exception counts as a 500.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            metrics = _metrics(scope)
            if metrics is not None:
                route, method = route_template(scope), _method(scope)
                metrics.http_requests.labels(route=route, method=method, status=str(status)).inc()
                metrics.http_request_seconds.labels(route=route, method=method).observe(
                    time.perf_counter() - started
                )


def route_template(scope: Scope) -> str:
    """The template of the route ``scope`` matched (the router notes it in the scope), or of
    the first route that would match it when a middleware answered before routing."""
    route: Any = scope.get("route")
    if route is None:
        app: Any = scope.get("app")
        route = _first_match(getattr(getattr(app, "router", None), "routes", ()), scope)
    path = getattr(route, "path", None)
    return path if isinstance(path, str) and path else UNMATCHED


def _first_match(routes: Any, scope: Scope) -> Any:
    """The first route of ``routes`` that matches ``scope``, looking into included routers
    (recent FastAPI keeps ``include_router``'s routes behind one entry without a path)."""
    for candidate in routes:
        match, _ = candidate.matches(scope)
        if match is Match.NONE:
            continue
        included = getattr(getattr(candidate, "original_router", None), "routes", None)
        if getattr(candidate, "path", None) is None and included is not None:
            inner = _first_match(included, scope)
            if inner is not None:
                return inner
            continue
        return candidate
    return None


def _method(scope: Scope) -> str:
    method = str(scope.get("method", "")).upper()
    return method if method in _METHODS else OTHER_METHOD


def _metrics(scope: Scope) -> EngramMetrics | None:
    """The metrics of the kernel serving this application (none before its lifespan began)."""
    app: Any = scope.get("app")
    kernel = getattr(getattr(app, "state", None), "kernel", None)
    metrics = getattr(kernel, "metrics", None)
    return metrics if isinstance(metrics, EngramMetrics) else None
