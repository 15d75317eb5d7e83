"""What a tool call answers: a result for a success, a Gate decision, an error engram raised
on purpose, or arguments that do not fit a tool's model. None of them is an exception.

A successful result carries a sentence for the model and the structured body, also as JSON
text for clients that ignore ``structuredContent``. An error result is flagged ``isError``;
:data:`ERROR_KINDS` is the only place that says what an engram error means to an MCP client.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

import structlog
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError

from engram.errors import (
    AlreadyExists,
    CircuitOpen,
    EngramError,
    Forbidden,
    InfrastructureError,
    NotFound,
    RateLimited,
    Unauthenticated,
    ValidationFailed,
    VersionConflict,
)
from engram.memory.gate.requests import GateResult
from engram.memory.storable import escape_text
from engram.memory.types import AccessLevel, GateDecision
from engram.protocols.errors import lookup, problems_of
from engram.protocols.views import result_view

log = structlog.get_logger("engram.mcp")


def _json(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, default=str)


def success(summary: str, body: dict[str, Any]) -> CallToolResult:
    """A successful result: a sentence, then the structured body (also as JSON text)."""
    return CallToolResult(
        content=[
            TextContent(type="text", text=summary),
            TextContent(type="text", text=_json(body)),
        ],
        structured_content=body,
    )


#: The ``error.kind`` of each engram error; a subclass not listed takes the kind of its nearest
#: listed ancestor (:func:`engram.protocols.errors.lookup`). The only place MCP decides what
#: an error means to a client.
ERROR_KINDS: dict[type[EngramError], str] = {
    NotFound: "not_found",
    Forbidden: "forbidden",
    RateLimited: "rate_limited",
    Unauthenticated: "unauthenticated",
    AlreadyExists: "already_exists",
    ValidationFailed: "invalid_input",
    VersionConflict: "version_conflict",
    InfrastructureError: "unavailable",
    EngramError: "refused",
}


def failure(kind: str, message: str, **details: Any) -> CallToolResult:
    """An error result the model can read and act on."""
    body = {"error": {"kind": kind, "message": message, **details}}
    return CallToolResult(
        content=[TextContent(type="text", text=message)], structured_content=body, is_error=True
    )


def error_result(tool: str, exc: EngramError) -> CallToolResult:
    """The tool result for an error the kernel raised on purpose."""
    kind = lookup(ERROR_KINDS, exc)
    if isinstance(exc, ValidationFailed):
        return failure(kind, f"{tool}: invalid input: {'; '.join(exc.errors)}", errors=exc.errors)
    if isinstance(exc, VersionConflict):
        return failure(
            kind,
            f"{tool}: {exc.message}; read the record again",
            expected_version=exc.expected,
            current_version=exc.actual,
        )
    if isinstance(exc, CircuitOpen):
        return failure(
            kind,
            f"{tool}: engram's {exc.dependency} is failing; retry in "
            f"{exc.retry_after_seconds:.0f} s",
            retry_after_seconds=exc.retry_after_seconds,
        )
    if isinstance(exc, InfrastructureError):
        # Driver messages may carry internal detail; the log has it, the client gets the kind.
        log.warning("mcp.tool_unavailable", tool=tool, error=type(exc).__name__)
        return failure(
            kind,
            f"{tool}: engram is temporarily unavailable ({type(exc).__name__}); retry later",
        )
    return failure(kind, f"{tool}: {exc.message}")


_Model = TypeVar("_Model", bound=BaseModel)


class InvalidArguments(Exception):
    """Arguments that do not fit a tool's model; :func:`invalid` answers it."""

    def __init__(self, error: ValidationError) -> None:
        super().__init__(str(error))
        self.error = error


def parse(model: type[_Model], data: Mapping[str, Any]) -> _Model:
    """``data`` validated as ``model``; :class:`InvalidArguments` when it does not fit."""
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise InvalidArguments(exc) from exc


def invalid(tool: str, exc: ValidationError) -> CallToolResult:
    # A location may name a client's argument, NUL or lone surrogate included: escaped, so
    # the result can be sent as JSON.
    problems = [escape_text(problem) for problem in problems_of(exc, whole="arguments")]
    return failure(
        "invalid_input", f"{tool}: invalid input: {'; '.join(problems)}", errors=problems
    )


def gate_result(tool: str, result: GateResult, caller_read: AccessLevel) -> CallToolResult:
    """A Gate decision as a tool result; a rejection or conflict is flagged as an error."""
    body = result_view(result)
    if result.approved:
        summary = (
            f"{tool}: approved ({result.outcome.value}); record_id {result.record_id}, "
            f"version {result.version}"
        )
        stored = result.modified_record
        if stored is not None and not caller_read.allows(stored.access_level):
            summary += (
                f". Note: it was stored at access level {stored.access_level.value} "
                "(personal data was found), which your agent may not read back"
            )
        if result.replayed:
            summary += " (a repeated request id: the earlier result, nothing written again)"
        return success(summary, body)
    if result.decision is GateDecision.CONFLICT:
        message = (
            f"{tool}: conflict: {result.reason}"
            + (
                f" (current version {result.current_version})"
                if result.current_version is not None
                else ""
            )
            + "; read the record again and retry with its current version"
        )
    else:
        reasons = [f"{check.name}: {check.detail}" for check in result.failed_checks]
        message = f"{tool}: rejected by the Librarian Gate: " + (
            "; ".join(reasons) if reasons else result.reason
        )
        if result.retry_after_seconds is not None:
            message += f" (retry after {result.retry_after_seconds:g} s)"
    return CallToolResult(
        content=[
            TextContent(type="text", text=message),
            TextContent(type="text", text=_json(body)),
        ],
        structured_content=body,
        is_error=True,
    )
