"""The memory tools an MCP client calls: their handlers (names, descriptions and input
schemas are in :mod:`.schema`).

Every call acts for one authenticated agent (a :class:`Principal`). Writes go through
:class:`AgentSession`, which validates the client's record fields, marks the request
``external`` and has the Gate audit malformed input; nothing a client sends can choose the
decision type. Reads go through the temporal engine and retrieval with the agent's identity,
so an agent sees only records its read level allows.

No call ends in an exception. A Gate rejection, a business error (unknown record, stale
version, bad argument) and an unexpected failure (logged with an id) all come back as a
:class:`CallToolResult` flagged ``isError``, with a sentence for the model and a structured
body for programs.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import structlog
from mcp.types import CallToolResult, TextContent, Tool
from pydantic import BaseModel, ValidationError

from engram.agents.registry import Principal
from engram.errors import (
    AlreadyExists,
    CircuitOpen,
    EngramError,
    Forbidden,
    InfrastructureError,
    NotFound,
    Unauthenticated,
    ValidationFailed,
    VersionConflict,
)
from engram.kernel import Kernel
from engram.memory.gate.requests import GateResult
from engram.memory.storable import escape_text
from engram.memory.types import AccessLevel, GateDecision
from engram.protocols.errors import lookup, problems_of
from engram.protocols.inprocess import (
    AgentSession,
)
from engram.protocols.mcp.schema import (
    SPECS,
    TOOL_NAMES,
    FeedbackArgs,
    ForgetArgs,
    GetArgs,
    HistoryArgs,
    RecallArgs,
    RememberControl,
    UpdateControl,
    input_schema,
)
from engram.protocols.views import feedback_view, record_view, result_view, search_view

log = structlog.get_logger("engram.mcp")

# --- results -----------------------------------------------------------------------------------


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


class _InvalidArguments(Exception):
    """Arguments that do not fit a tool's model; :meth:`EngramTools.call` answers it."""

    def __init__(self, error: ValidationError) -> None:
        super().__init__(str(error))
        self.error = error


def _parse(model: type[_Model], data: Mapping[str, Any]) -> _Model:
    """``data`` validated as ``model``; :class:`_InvalidArguments` when it does not fit."""
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise _InvalidArguments(exc) from exc


def _invalid(tool: str, exc: ValidationError) -> CallToolResult:
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


# --- the tools ---------------------------------------------------------------------------------

Handler = Callable[[Principal, Mapping[str, Any]], Awaitable[CallToolResult]]


class EngramTools:
    """The tools of one kernel; :meth:`call` runs one for a principal and never raises."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel
        self._handlers: dict[str, Handler] = {
            "remember": self._remember,
            "recall": self._recall,
            "get": self._get,
            "history": self._history,
            "update": self._update,
            "forget": self._forget,
            "feedback": self._feedback,
        }
        self._schemas = {spec.name: input_schema(spec.arguments) for spec in SPECS}

    @staticmethod
    def definitions() -> list[Tool]:
        """Every tool, as ``tools/list`` returns them."""
        return [spec.definition() for spec in SPECS]

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema of tool ``name`` (None for an unknown tool)."""
        return self._schemas.get(name)

    async def call(
        self, name: str, arguments: Mapping[str, Any] | None, principal: Principal
    ) -> CallToolResult:
        """Run tool ``name`` with the client's ``arguments`` on behalf of ``principal``."""
        started = time.perf_counter()
        handler = self._handlers.get(name)
        if handler is None:
            result = failure(
                "unknown_tool", f"unknown tool {name!r}; the tools are {', '.join(TOOL_NAMES)}"
            )
        else:
            try:
                result = await handler(principal, arguments or {})
            except _InvalidArguments as exc:
                result = _invalid(name, exc.error)
            except EngramError as exc:
                result = error_result(name, exc)
            except Exception:
                error_id = uuid.uuid4().hex[:12]
                log.exception("mcp.tool_crashed", tool=name, error_id=error_id)
                result = failure(
                    "internal",
                    f"{name}: internal error; the server log has the details under {error_id}",
                    error_id=error_id,
                )
        log.info(
            "mcp.tool",
            tool=name,
            agent=principal.agent.name,
            error=result.is_error,
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return result

    # writes: record fields go to AgentSession untouched, control fields are checked here

    async def _remember(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        control = _parse(RememberControl, _pick(arguments, _REMEMBER_CONTROL))
        session = AgentSession(self._kernel, principal.caller)
        record = _pick(arguments, _REMEMBER_CONTROL, keep=False)
        result = await session.remember(record, request_id=control.request_id)
        return gate_result("remember", result, principal.caller.max_read_level)

    async def _update(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        control = _parse(UpdateControl, _pick(arguments, _UPDATE_CONTROL))
        session = AgentSession(self._kernel, principal.caller)
        result = await session.amend(
            control.record_id,
            _pick(arguments, _UPDATE_CONTROL, keep=False),
            expected_version=control.expected_version,
            request_id=control.request_id,
        )
        return gate_result("update", result, principal.caller.max_read_level)

    async def _forget(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        args = _parse(ForgetArgs, arguments)
        session = AgentSession(self._kernel, principal.caller)
        result = await session.forget(
            args.record_id, expected_version=args.expected_version, request_id=args.request_id
        )
        return gate_result("forget", result, principal.caller.max_read_level)

    async def _feedback(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        args = _parse(FeedbackArgs, arguments)
        receipt = await self._kernel.retrieval.feedback(
            principal.caller, args.record_id, useful=args.useful, signal=args.signal
        )
        body = feedback_view(receipt)
        verdict = "useful" if receipt.useful else "not useful"
        return success(f"feedback: recorded record {receipt.record_id} as {verdict}", body)

    # reads

    async def _recall(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        args = _parse(RecallArgs, arguments)
        found = await args.run(self._kernel, principal.caller)
        body = search_view(found)
        summary = f"recall: {len(found.hits)} hit(s)" + (
            " (keyword search only: the embedding model did not answer)" if found.degraded else ""
        )
        return success(summary, body)

    async def _get(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        args = _parse(GetArgs, arguments)
        found = await self._kernel.temporal.query(
            record_id=args.record_id,
            as_of_event=args.as_of_event,
            as_of_ingestion=args.as_of_ingestion,
            include_forgotten=args.include_forgotten,
            caller=principal.caller,
        )
        if not found:
            raise NotFound(f"no record {args.record_id} that you may read (at that time)")
        record = found[0]
        return success(
            f"get: record {record.record_id}, version {record.version}, {record.status.value}",
            {"record": record_view(record)},
        )

    async def _history(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        args = _parse(HistoryArgs, arguments)
        chain = await self._kernel.temporal.get_version_chain(
            args.record_id, caller=principal.caller
        )
        if not chain:
            raise NotFound(f"no record {args.record_id} that you may read")
        return success(
            f"history: record {args.record_id} has {len(chain)} version(s)",
            {"record_id": str(args.record_id), "versions": [record_view(v) for v in chain]},
        )


#: Control fields of each write; every other key is the record (unknown keys included: the
#: Gate refuses and audits them).
_REMEMBER_CONTROL = frozenset({"request_id"})
_UPDATE_CONTROL = frozenset({"record_id", "expected_version", "request_id"})


def _pick(
    arguments: Mapping[str, Any], names: frozenset[str], *, keep: bool = True
) -> dict[str, Any]:
    """The arguments named in ``names`` (``keep``) or all the others."""
    return {key: value for key, value in arguments.items() if (key in names) == keep}
