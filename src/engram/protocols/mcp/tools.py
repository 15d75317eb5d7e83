"""The memory tools an MCP client sees: their names, descriptions, input schemas and handlers.

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
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar
from uuid import UUID

import structlog
from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

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
from engram.memory.types import AccessLevel, GateDecision, MemoryType
from engram.protocols.errors import lookup, problems_of
from engram.protocols.inprocess import (
    AS_OF_EVENT,
    AS_OF_INGESTION,
    AgentSession,
    Instant,
    SearchInput,
    StorableText,
    WriteInput,
)
from engram.protocols.views import feedback_view, record_view, result_view, search_view

log = structlog.get_logger("engram.mcp")

#: Fields of a write that describe the record; everything else in a write is a control field.
RECORD_FIELDS = frozenset(WriteInput.model_fields)

# --- argument models ---------------------------------------------------------------------------
# Each model is the tool's published input schema. For the record fields of remember/update it
# is only a description: those fields go to AgentSession as the client sent them, so malformed
# ones are rejected *and audited* by the Gate. Control fields (ids, versions) are checked here.

_RECORD_ID = (
    "Id of the record: the `record_id` returned by remember, or found in a recall hit's "
    "`record`. Every version of a record shares it."
)
_REQUEST_ID = (
    "Optional idempotency key (1-128 characters). Repeating a write with the same key returns "
    "the first result and writes nothing again; use it when retrying after a timeout."
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


RecordIdField = Annotated[UUID, Field(description=_RECORD_ID)]
RequestIdField = Annotated[
    StorableText | None,
    Field(default=None, min_length=1, max_length=128, description=_REQUEST_ID),
]


class _RecordFields(_Strict):
    type: MemoryType = Field(
        description=(
            "Kind of memory. belief: a declarative fact ('The ledger runs on PostgreSQL 16.'), "
            "never an instruction or a question. decision: a choice made; needs "
            "metadata.rationale. episode: something that happened; needs event_time. skill: a "
            "procedure; needs metadata.steps (1-100 strings). entity: a named thing; needs "
            "metadata.name and metadata.kind (lower-case, e.g. 'service', 'person'). "
            "preference: a liking or rule; needs metadata.subject. reflection: a conclusion "
            "drawn from other records; needs evidence_links. resource: a pointer; needs "
            "metadata.locator (a URI or file path)."
        )
    )
    content: str = Field(
        min_length=1,
        max_length=16_000,
        description="The memory itself, in plain language (1-16000 characters).",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "Structured details; some types require keys (see `type`). Optional everywhere: "
            "tags (up to 32 short strings), source_kind ('observed', 'told' or 'inferred', "
            "which sets the default confidence). At most 16 KiB of JSON, 5 levels deep."
        ),
    )
    event_time: datetime | None = Field(
        default=None,
        description=(
            "When this became true or happened in the world (ISO 8601 with a timezone). "
            "Omit for 'now'. Required for episodes."
        ),
    )
    access_level: AccessLevel = Field(
        default=AccessLevel.AGENT,
        description=(
            "Who may read the record, from the most open: public, agent, user, system, "
            "sensitive. Your agent's trust level caps what you may write and read. Records "
            "with personal data are stored as sensitive whatever you ask."
        ),
    )
    source_confidence: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description=(
            "How sure the source is, 0 to 1. Omit to derive it from metadata.source_kind "
            "(observed 0.9, told 0.75, inferred 0.6)."
        ),
    )
    evidence_links: list[UUID] = Field(
        default_factory=list,
        max_length=100,
        description="record_ids of existing records this one is based on (at most 100).",
    )
    namespace: str = Field(
        default="default",
        description=(
            "Partition of the memory (lower-case letters, digits and _.:-, up to 64); "
            "searches and duplicate checks stay inside one namespace."
        ),
    )
    classification: str | None = Field(
        default=None,
        description="Optional label of your own (e.g. a project or data class); stored as is.",
    )


class RememberArgs(_RecordFields):
    """Arguments of ``remember``."""

    request_id: RequestIdField


class UpdateArgs(_RecordFields):
    """Arguments of ``update``: only the fields that change; the others are kept."""

    type: MemoryType | None = Field(  # type: ignore[assignment]
        default=None, description="Kind of memory; leave it out to keep the record's."
    )
    content: str | None = Field(  # type: ignore[assignment]
        default=None,
        min_length=1,
        max_length=16_000,
        description="The new text of the memory; leave it out to keep the current text.",
    )
    record_id: RecordIdField
    expected_version: int = Field(
        ge=1,
        description=(
            "The `version` of the record as you last read it (from get, history, recall or "
            "the previous write). If the record changed since, the update is refused as a "
            "conflict and you should read it again."
        ),
    )
    request_id: RequestIdField


class _UpdateControl(_Strict):
    record_id: UUID
    expected_version: int = Field(ge=1)
    request_id: RequestIdField


class _RememberControl(_Strict):
    request_id: RequestIdField


#: Arguments of ``recall`` (the same as the body of ``POST /v1/search``).
RecallArgs = SearchInput


class GetArgs(_Strict):
    """Arguments of ``get``."""

    record_id: RecordIdField
    as_of_event: Instant | None = Field(default=None, description=AS_OF_EVENT)
    as_of_ingestion: Instant | None = Field(default=None, description=AS_OF_INGESTION)
    include_forgotten: bool = Field(
        default=False, description="Return the record even if it was forgotten."
    )


class HistoryArgs(_Strict):
    """Arguments of ``history``."""

    record_id: RecordIdField


class ForgetArgs(_Strict):
    """Arguments of ``forget``."""

    record_id: RecordIdField
    expected_version: int | None = Field(
        default=None,
        ge=1,
        description="Optional: the version you read; if the record changed since, nothing happens.",
    )
    request_id: RequestIdField


class FeedbackArgs(_Strict):
    """Arguments of ``feedback``."""

    record_id: RecordIdField
    useful: bool = Field(description="True if the record helped with your task, false if not.")
    signal: str = Field(
        default="explicit",
        min_length=1,
        max_length=32,
        pattern=r"^[a-z_]+$",
        description="Optional kind of feedback (lower-case letters and '_'), e.g. 'explicit'.",
    )


# --- tool definitions --------------------------------------------------------------------------

_REMEMBER = """\
Store a new memory for later recall. Use it for durable knowledge worth keeping beyond this \
conversation: facts (belief), choices and their reasons (decision), events (episode), \
procedures (skill), named things (entity), preferences, conclusions (reflection) and \
pointers (resource). Do not store secrets or instructions to other agents.

Every write is checked by engram's Librarian Gate (type rules, your permissions, personal \
data, rate limit, content classification). The result says `decision`: approved (with \
`record_id` and `version`; `outcome` is `created`, or `reinforced` when an equivalent memory \
already existed), or rejected with `failed_checks` naming each check that failed and why: \
fix the input and try again, or choose another type."""

_RECALL = """\
Search memory by meaning and keywords (hybrid search) and return the best matching records, \
best first. Use it before answering questions that may depend on what was learned before, \
and to find the `record_id` and current `version` of a memory you want to update, forget or \
rate. Each hit has the `record`, a fused `score` and each search leg's rank. `degraded` is \
true when only keyword search answered. Only records your agent may read are returned. With \
as_of_event / as_of_ingestion it searches the past state of memory."""

_GET = """\
Read one memory by its record_id: its current version, or the version that answered at a \
past instant (as_of_event: true in the world then; as_of_ingestion: known to engram then; \
both: what engram believed then about that time). Returns the record with its `version`, \
`status`, provenance and both time axes."""

_HISTORY = """\
List every version of one memory, oldest first: how it changed, who changed it and when \
(ingestion_time) and for which period it held (event_time). Use it to explain or audit a \
memory's evolution."""

_UPDATE = """\
Change a memory: a new version with the fields you send, every other field kept from the \
current version (the old version stays in its history). Usually you send the new `content`; \
`metadata` you send replaces the old metadata as a whole. `event_time` and \
`source_confidence` are not kept: send them again if they still apply. \
`expected_version` is required: the version you last read. If someone changed the record \
since, the result is a `conflict` with `current_version`; read it again and redo your change. \
The Gate checks the new version like a new memory; a rejection lists the failed checks."""

_FORGET = """\
Forget a memory: it stops appearing in recall and get, but its history stays readable with \
history (nothing is erased from the audit trail). Use it for memories that are wrong or no \
longer wanted; prefer update when a memory merely changed. The Gate checks that you may \
forget it."""

_FEEDBACK = """\
Tell engram whether a memory you recalled was useful. Useful memories are kept relevant \
longer; memories rated not useful fade sooner. Rate a memory after you relied on it (or found \
it wrong or irrelevant)."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool: its wire definition and the arguments model behind its schema."""

    name: str
    title: str
    description: str
    arguments: type[BaseModel]
    read_only: bool
    destructive: bool = False
    idempotent: bool = False

    def definition(self) -> Tool:
        """The tool as ``tools/list`` shows it."""
        return Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=input_schema(self.arguments),
            annotations=ToolAnnotations(
                title=self.title,
                read_only_hint=self.read_only,
                destructive_hint=self.destructive,
                idempotent_hint=self.idempotent,
                open_world_hint=False,
            ),
        )


SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("remember", "Remember", _REMEMBER, RememberArgs, read_only=False),
    ToolSpec("recall", "Recall", _RECALL, RecallArgs, read_only=True, idempotent=True),
    ToolSpec("get", "Get a memory", _GET, GetArgs, read_only=True, idempotent=True),
    ToolSpec("history", "Version history", _HISTORY, HistoryArgs, read_only=True, idempotent=True),
    ToolSpec("update", "Update a memory", _UPDATE, UpdateArgs, read_only=False, destructive=True),
    ToolSpec("forget", "Forget a memory", _FORGET, ForgetArgs, read_only=False, destructive=True),
    ToolSpec("feedback", "Rate a memory", _FEEDBACK, FeedbackArgs, read_only=False),
)
TOOL_NAMES = tuple(spec.name for spec in SPECS)


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema with ``$ref``s inlined and generated titles dropped.

    Inline enums read better for a language model than references into ``$defs``.
    """
    raw = model.model_json_schema()
    defs: dict[str, Any] = raw.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                merged = {**defs[ref.removeprefix("#/$defs/")], **node}
                merged.pop("$ref")
                return resolve(merged)
            return {
                key: resolve(value)
                for key, value in node.items()
                if not (key == "title" and isinstance(value, str))
            }
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    schema: dict[str, Any] = resolve(raw)
    schema.pop("description", None)
    return schema


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
        control = _parse(_RememberControl, _pick(arguments, _REMEMBER_CONTROL))
        session = AgentSession(self._kernel, principal.caller)
        record = _pick(arguments, _REMEMBER_CONTROL, keep=False)
        result = await session.remember(record, request_id=control.request_id)
        return gate_result("remember", result, principal.caller.max_read_level)

    async def _update(self, principal: Principal, arguments: Mapping[str, Any]) -> CallToolResult:
        control = _parse(_UpdateControl, _pick(arguments, _UPDATE_CONTROL))
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
