"""Errors as RFC 9457 problem details, and the one table from engram errors to HTTP statuses.

Every error the API answers is ``application/problem+json``: ``type`` (a stable URN naming the
kind of problem), ``title``, ``status`` and ``detail``, plus extension members where they help
a client act (``errors``, ``failed_checks``, ``current_version``, ``retry_after_seconds``).
Messages never carry memory content: kernel errors name ids and fields, and an unexpected
exception is logged by type only. A problem may name a client's field, which can hold what
JSON text cannot carry as UTF-8 (a lone surrogate): every body is made JSON-safe first.

Status rules for input: a body that is not JSON, or an If-Match that names no version, is a
400 (a malformed request); JSON that is well formed but not acceptable is a 422 (with
``errors``, or the Gate's ``failed_checks``); a body over the server's size limit is a 413
(``max_bytes``), refused before it is read and not audited.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram.errors import (
    AlreadyExists,
    BusinessError,
    CircuitOpen,
    ConfigurationError,
    DatabaseError,
    DatabaseInterrupted,
    DatabaseUnavailable,
    EmbeddingError,
    EngramError,
    Forbidden,
    InfrastructureError,
    MigrationError,
    NotFound,
    PermissionDenied,
    Quarantine,
    RateLimited,
    StaleCursor,
    TransientDatabaseError,
    Unauthenticated,
    UniqueViolation,
    ValidationFailed,
    VersionConflict,
)
from engram.memory.storable import json_safe
from engram.protocols.errors import lookup, problems_of

log = structlog.get_logger("engram.http")

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:engram:problem:"
#: Seconds a client is told to wait when a dependency is down and no better figure is known.
DEFAULT_RETRY_AFTER = 5
WWW_AUTHENTICATE = 'Bearer realm="engram"'

#: The status and problem type of each engram error; a subclass not listed takes the entry of
#: its nearest listed ancestor (:func:`engram.protocols.errors.lookup`). The only place the API
#: decides what an error means in HTTP.
ERROR_STATUS: dict[type[EngramError], tuple[int, str]] = {
    Unauthenticated: (401, "unauthenticated"),
    Forbidden: (403, "forbidden"),
    RateLimited: (429, "rate-limited"),
    NotFound: (404, "not-found"),
    AlreadyExists: (409, "already-exists"),
    VersionConflict: (409, "version-conflict"),
    UniqueViolation: (409, "conflict"),  # e.g. two first uses of one Idempotency-Key at once
    Quarantine: (409, "quarantine-state"),
    StaleCursor: (422, "stale-cursor"),
    ValidationFailed: (422, "validation-failed"),
    BusinessError: (400, "bad-request"),
    CircuitOpen: (503, "unavailable"),
    DatabaseUnavailable: (503, "unavailable"),
    TransientDatabaseError: (503, "unavailable"),
    DatabaseInterrupted: (503, "unavailable"),
    EmbeddingError: (503, "unavailable"),
    MigrationError: (503, "unavailable"),
    # The role lacks a grant (an operator's mistake): nothing the client sent is wrong, and
    # /readyz says the failing check; unavailable, as MCP and the CLI (exit 5) say.
    PermissionDenied: (503, "unavailable"),
    DatabaseError: (500, "internal"),
    InfrastructureError: (503, "unavailable"),
    ConfigurationError: (500, "internal"),
    EngramError: (500, "internal"),
}


class ProblemDetails(BaseModel):
    """An error (RFC 9457). Extension members appear where they apply."""

    model_config = ConfigDict(extra="allow", title="Problem")

    type: str
    title: str
    status: int
    detail: str
    errors: list[str] | None = None
    failed_checks: list[dict[str, Any]] | None = None
    current_version: int | None = None
    retry_after_seconds: float | None = None
    decision_id: str | None = None


class ApiProblem(Exception):
    """A problem a route answers directly (a missing precondition, a malformed header)."""

    def __init__(
        self,
        status: int,
        kind: str,
        detail: str,
        *,
        headers: Mapping[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        self.status = status
        self.kind = kind
        self.detail = detail
        self.headers = dict(headers or {})
        self.extensions = extensions
        super().__init__(detail)


#: RFC 9110's reason phrases where Python's differ by version (3.13 renamed these two), so a
#: problem's title is the same whichever interpreter serves it.
RFC_9110_PHRASES = {413: "Content Too Large", 422: "Unprocessable Content"}


def title_of(status: int) -> str:
    """The reason phrase of a status (the problem title), as RFC 9110 names it."""
    if status in RFC_9110_PHRASES:
        return RFC_9110_PHRASES[status]
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def problem(
    status: int,
    kind: str,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    """A problem+json response."""
    body: dict[str, Any] = {
        "type": TYPE_PREFIX + kind,
        "title": title_of(status),
        "status": status,
        "detail": detail,
    }
    body.update({key: value for key, value in extensions.items() if value is not None})
    return JSONResponse(
        json_safe(body).value,
        status_code=status,
        headers=dict(headers or {}),
        media_type=PROBLEM_JSON,
    )


def retry_after(seconds: float | None) -> str:
    """A Retry-After value: whole seconds, at least one."""
    if seconds is None or not math.isfinite(seconds):
        return str(DEFAULT_RETRY_AFTER)
    return str(max(1, math.ceil(seconds)))


def status_of(exc: EngramError) -> tuple[int, str]:
    """The status and problem type of an engram error (nearest listed class wins)."""
    return lookup(ERROR_STATUS, exc)


def error_problem(exc: EngramError) -> JSONResponse:
    """The problem answering an engram error."""
    status, kind = status_of(exc)
    headers: dict[str, str] = {}
    extensions: dict[str, Any] = {}
    if status == 401:
        headers["WWW-Authenticate"] = WWW_AUTHENTICATE
    if status == 503:
        seconds = exc.retry_after_seconds if isinstance(exc, CircuitOpen) else None
        headers["Retry-After"] = retry_after(seconds)
    if isinstance(exc, RateLimited):
        headers["Retry-After"] = retry_after(exc.retry_after_seconds)
    if isinstance(exc, ValidationFailed):
        extensions["errors"] = list(exc.errors)
    if isinstance(exc, VersionConflict):
        extensions["current_version"] = exc.actual
    if status >= 500:
        # Infrastructure messages may name hosts or statements; clients get the class only.
        log.warning("http.engram_error", error=type(exc).__name__, status=status)
        detail = "the service cannot answer right now" if status == 503 else "internal error"
    else:
        detail = exc.message
    return problem(status, kind, detail, headers=headers, **extensions)


def validation_messages(exc: RequestValidationError) -> list[str]:
    """``where: what`` for each problem FastAPI found (the offending input is not echoed)."""
    return problems_of(exc, whole="request")


async def _on_engram_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EngramError)  # noqa: S101 - registered for EngramError only
    return error_problem(exc)


async def _on_api_problem(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiProblem)  # noqa: S101 - registered for ApiProblem only
    return problem(exc.status, exc.kind, exc.detail, headers=exc.headers, **exc.extensions)


async def _on_validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)  # noqa: S101
    if any(error.get("type") == "json_invalid" for error in exc.errors()):
        errors = ["body: not valid JSON"]
        return problem(400, "bad-request", "the body is not valid JSON", errors=errors)
    errors = validation_messages(exc)
    return problem(422, "invalid-request", "; ".join(errors), errors=errors)


async def _on_http(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)  # noqa: S101
    if isinstance(exc, PayloadTooLarge):
        return _too_large(exc)
    kinds = {400: "bad-request", 404: "not-found", 405: "method-not-allowed"}
    kind = kinds.get(exc.status_code, "http")
    detail = str(exc.detail) or title_of(exc.status_code)
    return problem(exc.status_code, kind, detail, headers=exc.headers)


class PayloadTooLarge(StarletteHTTPException):
    """A request body larger than ``max_bytes`` (an HTTP exception, so that FastAPI's own body
    parsing lets it through to the handlers rather than calling it a malformed body)."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"the body is larger than {max_bytes} bytes")
        self.max_bytes = max_bytes


def _too_large(exc: PayloadTooLarge) -> JSONResponse:
    return problem(413, "payload-too-large", str(exc.detail), max_bytes=exc.max_bytes)


class BodyLimit:
    """ASGI middleware: a request body larger than ``max_bytes`` is a 413 problem, unread.

    A declared Content-Length over the limit is answered before the app runs. A body sent
    without one is counted as the app reads it; the read that crosses the limit raises
    :class:`PayloadTooLarge`, which the app's handlers answer. Nothing of the body is kept or
    audited: it never became input. The event ``http.body_too_large`` names the route.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            self._refused(scope)
            await _too_large(PayloadTooLarge(self.max_bytes))(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    self._refused(scope)
                    raise PayloadTooLarge(self.max_bytes)
            return message

        await self.app(scope, counted, send)

    def _refused(self, scope: Scope) -> None:
        log.info(
            "http.body_too_large",
            method=scope.get("method"),
            path=scope.get("path"),
            max_bytes=self.max_bytes,
        )


class LastResort:
    """ASGI middleware: an exception nothing else handled becomes a logged 500 problem.

    Only the exception's type is logged (its message could quote memory content), and the
    exception is not re-raised, so the server prints no traceback with request data in it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception as exc:  # noqa: BLE001 - the last resort, by definition
            log.error(
                "http.unhandled",
                error=type(exc).__name__,
                method=scope.get("method"),
                path=scope.get("path"),
            )
            if started:
                return
            response = problem(500, "internal", "internal error")
            await response(scope, receive, send)


def install_problem_handlers(app: FastAPI) -> None:
    """Answer every error of ``app`` as problem+json."""
    app.add_exception_handler(EngramError, _on_engram_error)
    app.add_exception_handler(ApiProblem, _on_api_problem)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    app.add_middleware(LastResort)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI documentation of the problem responses a route may answer."""
    described = {
        400: "Malformed request (header or body).",
        401: "No valid bearer token (see WWW-Authenticate).",
        403: "The caller may not do this (not an admin, or the Gate's access check).",
        404: "No such record, or none the caller may read.",
        409: "Version conflict (current_version says which) or a state that forbids this.",
        413: "The body is larger than the server reads (max_bytes says how large it may be).",
        422: "Invalid input, or a Gate rejection (failed_checks says which and why).",
        428: "If-Match is required.",
        429: "Rate limited by the Gate (see Retry-After).",
        500: "Internal error.",
        503: "A dependency is unavailable (see Retry-After).",
    }
    responses: dict[int | str, dict[str, Any]] = {}
    for status in sorted({*statuses, 400, 413, 500, 503}):
        entry: dict[str, Any] = {
            "description": described.get(status, title_of(status)),
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}},
        }
        if status in (429, 503):
            entry["headers"] = {
                "Retry-After": {
                    "description": "Seconds to wait before retrying.",
                    "schema": {"type": "string"},
                }
            }
        if status == 401:
            entry["headers"] = {
                "WWW-Authenticate": {
                    "description": "The authentication scheme (Bearer).",
                    "schema": {"type": "string"},
                }
            }
        responses[status] = entry
    return responses
