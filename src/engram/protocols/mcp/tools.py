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

import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog
from mcp.types import CallToolResult, Tool

from engram.agents.registry import Principal
from engram.errors import EngramError, NotFound
from engram.kernel import Kernel
from engram.memory.types import GateAction
from engram.protocols.inprocess import AgentSession
from engram.protocols.mcp.results import (
    InvalidArguments,
    error_result,
    failure,
    gate_result,
    invalid,
    parse,
    success,
)
from engram.protocols.mcp.schema import (
    SPECS,
    TOOL_NAMES,
    FeedbackArgs,
    ForgetArgs,
    GetArgs,
    HealthArgs,
    HistoryArgs,
    ListArgs,
    RecallArgs,
    RememberControl,
    UpdateControl,
    input_schema,
    page_cursor,
)
from engram.protocols.views import feedback_view, record_view, search_view

log = structlog.get_logger("engram.mcp")

#: The readiness checks ``health`` reports: what decides whether the tools work. The others
#: (the consolidation backlog) are the operator's, and reflect every agent's writes.
HEALTH_CHECKS = ("database", "migrations", "embedding_model", "gate", "audit_log")

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
            "list": self._list,
            "health": self._health,
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
            except InvalidArguments as exc:
                result = invalid(name, exc.error)
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
        session = AgentSession(self._kernel, principal.caller)
        record = _pick(arguments, _REMEMBER_CONTROL, keep=False)
        result = await session.refuse_unknown(GateAction.CREATE, record)  # audited first
        if result is None:
            control = parse(RememberControl, _pick(arguments, _REMEMBER_CONTROL))
            result = await session.remember(record, request_id=control.request_id)
        return gate_result("remember", result, principal.caller.max_read_level)

    async def _update(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        session = AgentSession(self._kernel, principal.caller)
        changes = _pick(arguments, _UPDATE_CONTROL, keep=False)
        target = _uuid_or_none(arguments.get("record_id"))
        # A field no memory has (a claimed decision_type) is refused and audited first,
        # whatever the record id names, as REST does.
        result = await session.refuse_unknown(GateAction.UPDATE, changes, record_id=target)
        if result is None:
            control = parse(UpdateControl, _pick(arguments, _UPDATE_CONTROL))
            result = await session.amend(
                control.record_id,
                changes,
                expected_version=control.expected_version,
                request_id=control.request_id,
            )
            # One the caller cannot find (unknown, hidden, forgotten) is not_found, as on
            # REST; the Gate's refusal stays audited.
            if await session.forgotten_since(target, result, absent_too=True):
                raise NotFound(f"no record {target} that you may read")
        return gate_result("update", result, principal.caller.max_read_level)

    async def _forget(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        session = AgentSession(self._kernel, principal.caller)
        claims = _pick(arguments, _FORGET_CONTROL, keep=False)
        if claims:  # a forget takes no record field: a claimed origin is refused and audited
            target = _uuid_or_none(arguments.get("record_id"))
            refused = await session.refuse(
                GateAction.FORGET,
                {"record_id": None if target is None else str(target), **claims},
                [f"{name}: not an argument of forget" for name in sorted(map(str, claims))],
            )
            return gate_result("forget", refused, principal.caller.max_read_level)
        args = parse(ForgetArgs, arguments)
        result = await session.forget(
            args.record_id, expected_version=args.expected_version, request_id=args.request_id
        )
        if await session.forgotten_since(args.record_id, result, absent_too=True):
            raise NotFound(f"no record {args.record_id} that you may read")
        return gate_result("forget", result, principal.caller.max_read_level)

    async def _feedback(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        args = parse(FeedbackArgs, arguments)
        receipt = await self._kernel.retrieval.feedback(
            principal.caller,
            args.record_id,
            useful=args.useful,
            signal=args.signal,
            request_id=args.request_id,
        )
        body = feedback_view(receipt)
        verdict = "useful" if receipt.useful else "not useful"
        return success(f"feedback: recorded record {receipt.record_id} as {verdict}", body)

    # reads

    async def _recall(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        args = parse(RecallArgs, arguments)
        found = await args.run(self._kernel, principal.caller)
        if found.degraded:
            summary = (
                f"recall: {len(found.hits)} hit(s) by keywords only (the embedding model did "
                "not answer, so there are no scores)"
            )
        elif found.hits:
            summary = f"recall: {len(found.hits)} hit(s) with score >= {args.min_score:g}"
        else:
            summary = (
                f"recall: nothing with score >= {args.min_score:g}; lower min_score to see "
                "weaker matches"
            )
        return success(summary, search_view(found))

    async def _get(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        args = parse(GetArgs, arguments)
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
        args = parse(HistoryArgs, arguments)
        chain = await self._kernel.temporal.get_version_chain(
            args.record_id, caller=principal.caller
        )
        if not chain:
            raise NotFound(f"no record {args.record_id} that you may read")
        return success(
            f"history: record {args.record_id} has {len(chain)} version(s)",
            {"record_id": str(args.record_id), "versions": [record_view(v) for v in chain]},
        )

    async def _list(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        args = parse(ListArgs, arguments)
        # One more than asked says whether a next page exists, counting readable records only.
        found = await self._kernel.temporal.page(
            caller=principal.caller,
            namespace=args.namespace,
            types=args.types,
            tags=args.tags,
            after=args.after,
            limit=args.limit + 1,
        )
        page = found[: args.limit]
        next_cursor = page_cursor(page[-1]) if len(found) > args.limit else None
        summary = f"list: {len(page)} record(s)" + (
            "; pass next_cursor as cursor for the next page" if next_cursor else ""
        )
        body = {"records": [record_view(r) for r in page], "next_cursor": next_cursor}
        return success(summary, body)

    async def _health(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        parse(HealthArgs, arguments)
        outcomes = await self._kernel.health.run()
        # Pass or fail only: a failing probe's detail may name hosts or count stored records.
        checks = {o.name: o.ok for o in outcomes if o.name in HEALTH_CHECKS}
        failing = [name for name, ok in checks.items() if not ok]
        caller = principal.caller
        body = {
            "ready": not failing,
            "checks": checks,
            "agent": {
                "name": principal.agent.name,
                "trust_level": caller.trust_level.value,
                "read_level": caller.max_read_level.value,
                "write_level": caller.max_write_level.value,
                "can_write": caller.can_write,
            },
        }
        summary = "health: ready" if not failing else f"health: not ready ({', '.join(failing)})"
        return success(summary, body)


#: Control fields of each write; every other key is the record (unknown keys included: the
#: Gate refuses and audits them).
_REMEMBER_CONTROL = frozenset({"request_id"})
_UPDATE_CONTROL = frozenset({"record_id", "expected_version", "request_id"})
_FORGET_CONTROL = _UPDATE_CONTROL


def _pick(
    arguments: Mapping[str, Any], names: frozenset[str], *, keep: bool = True
) -> dict[str, Any]:
    """The arguments named in ``names`` (``keep``) or all the others."""
    return {key: value for key, value in arguments.items() if (key in names) == keep}


def _uuid_or_none(value: object) -> uuid.UUID | None:
    """A record id as sent, if it is one (the control fields are checked later)."""
    try:
        return uuid.UUID(str(value)) if value is not None else None
    except ValueError:
        return None
