"""``/v1/memories``: propose, read, update and forget records through the Librarian Gate.

Writes go through :class:`AgentSession` with the client's body as sent (so malformed input is
audited like any rejection, and ``decision_type`` is always ``external``). A body that is not
JSON at all is a 400 and reaches nothing; one nested deeper than the parser reads is an
audited rejection like any other input the Gate refuses. Versions travel as entity tags:
``ETag: "3"`` on reads, ``If-Match: "3"`` on updates (required) and forgets.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import JSONResponse

from engram.agents.registry import Principal
from engram.errors import NotFound
from engram.memory.gate.checks import ACCESS, RATE_LIMIT
from engram.memory.gate.requests import GateResult
from engram.memory.types import GateAction, GateDecision, MemoryRecord, MemoryStatus, WriteOutcome
from engram.protocols.http.auth import Caller, KernelDep
from engram.protocols.http.problems import ApiProblem, problem, problem_responses, retry_after
from engram.protocols.inprocess import AgentSession, Instant
from engram.protocols.views import DecisionView, VersionsView, record_view, result_view

router = APIRouter(prefix="/v1/memories", tags=["memories"])

_IF_MATCH = re.compile(r'^\s*(?:W/)?"?([0-9]{1,10})"?\s*$')
_VERSION_MAX = 2**31 - 1

_KEY = re.compile(r"[\x21-\x7e]{1,128}")
# Checked in the handlers (request_id), after the body: a body claiming an origin is refused
# and audited first, whatever the headers hold. The schema still documents the rule.
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Makes the write safe to retry: a retry returns the recorded decision.",
        json_schema_extra={"minLength": 1, "maxLength": 128, "pattern": r"^[\x21-\x7e]+$"},
    ),
]
# No length limit here: an If-Match that names no version (too long included) is a 400
# bad-if-match from expected_version, like any other malformed one.
IfMatch = Annotated[
    str | None,
    Header(
        alias="If-Match",
        description='The version the client read, as its entity tag ("3"; 3 and W/"3" work).',
    ),
]
#: Why a body nested deeper than Python's JSON parser reads is refused (about 900 levels).
TOO_DEEP = "body: JSON nested too deeply to read"
#: Why a body holding an integer longer than Python converts (4 300 digits) is refused.
TOO_LONG_NUMBER = "body: a number with more digits than can be read (no field holds one)"


def etag(version: int) -> str:
    """The entity tag of a version."""
    return f'"{version}"'


def expected_version(if_match: str | None, *, required: bool) -> int | None:
    """The version an If-Match header names (428 when required and missing, 400 if malformed)."""
    if if_match is None or not if_match.strip():
        if required:
            raise ApiProblem(
                428,
                "precondition-required",
                'send If-Match with the version you read (its ETag, e.g. "3")',
            )
        return None
    match = _IF_MATCH.match(if_match)
    version = int(match.group(1)) if match else 0
    if not 1 <= version <= _VERSION_MAX:
        raise ApiProblem(400, "bad-if-match", 'If-Match must name one version, e.g. "3"')
    return version


def request_id(principal: Principal, key: str | None) -> str | None:
    """The Gate request id of an Idempotency-Key, scoped to the agent (keys of different
    agents never meet); 422 for a key that breaks the rule (1-128 visible ASCII)."""
    if key is None:
        return None
    if _KEY.fullmatch(key) is None:
        errors = ["header.Idempotency-Key: 1-128 visible ASCII characters"]
        raise ApiProblem(422, "invalid-request", errors[0], errors=errors)
    return f"http:{principal.agent.id}:{key}"


class UnreadableBody(Exception):
    """A well-formed JSON body past a limit of the parser: nested deeper than it reads, or an
    integer longer than it converts. ``text`` is the body as text, ``reason`` why."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(reason)
        self.text = text
        self.reason = reason


class _LongNumber(Exception):
    """Raised by the parser's integer hook; not a ValueError, so it is not read as
    malformed JSON."""


def _integer(digits: str) -> int:
    try:
        return int(digits)
    except ValueError:  # more digits than sys.get_int_max_str_digits()
        raise _LongNumber from None


async def json_object(request: Request) -> dict[str, Any]:
    """The request body as a JSON object: 400 when it is not JSON, 422 when it is JSON but not
    an object, :class:`UnreadableBody` when it nests deeper than the parser reads or holds an
    integer longer than it converts.

    Python's parser also reads ``NaN``/``Infinity`` and ``\\ud800`` escapes; what storage
    cannot hold is refused, audited, at the input boundary (``WriteInput``).
    """
    raw = await request.body()
    try:
        data = json.loads(raw, parse_int=_integer) if raw else None
    except RecursionError:
        raise UnreadableBody(raw.decode("utf-8", "replace"), TOO_DEEP) from None
    except _LongNumber:
        raise UnreadableBody(raw.decode("utf-8", "replace"), TOO_LONG_NUMBER) from None
    except ValueError:  # not JSON, or not UTF-8
        raise ApiProblem(
            400, "bad-request", "the body is not valid JSON", errors=["body: not valid JSON"]
        ) from None
    if not isinstance(data, dict):
        raise ApiProblem(
            422, "invalid-request", "the body must be a JSON object", errors=["body: object"]
        )
    return data


async def proposal(
    request: Request,
    session: AgentSession,
    principal: Principal,
    action: GateAction,
    key: str | None,
    *,
    record_id: UUID | None = None,
) -> dict[str, Any] | GateResult:
    """The body as a JSON object, or the audited rejection of one too deep (or with a number
    too long) to read or naming
    a field no memory has. Run before the headers are checked, so such a claim is audited
    whatever they hold; under the request's Idempotency-Key when that one is well formed."""
    retry = None if key is None or _KEY.fullmatch(key) is None else request_id(principal, key)
    try:
        body = await json_object(request)
    except UnreadableBody as exc:
        return await session.refuse(action, {"body": exc.text}, [exc.reason], request_id=retry)
    refused = await session.refuse_unknown(action, body, record_id=record_id, request_id=retry)
    return refused or body


def gate_response(result: GateResult) -> Response:
    """A Gate decision in HTTP: 201/200 approved, 409 conflict, 403/429/422 rejected."""
    body = result_view(result)
    if result.decision is GateDecision.APPROVED:
        headers = {} if result.version is None else {"ETag": etag(result.version)}
        status = 200
        if result.outcome is WriteOutcome.CREATED and result.record_id is not None:
            status = 201
            headers["Location"] = f"{router.prefix}/{result.record_id}"
        return JSONResponse(body, status_code=status, headers=headers)
    extensions: dict[str, Any] = {
        "decision": body["decision"],
        "decision_id": body["decision_id"],
        "record_id": body["record_id"],
        "failed_checks": body["failed_checks"],
    }
    if result.decision is GateDecision.CONFLICT:
        return problem(
            409,
            "version-conflict",
            result.reason,
            current_version=result.current_version,
            **extensions,
        )
    failed = {check.name: check for check in result.failed_checks}
    if ACCESS in failed:
        return problem(403, "gate-access-denied", result.reason, **extensions)
    if RATE_LIMIT in failed:
        seconds = result.retry_after_seconds
        if seconds is None:
            seconds = failed[RATE_LIMIT].data.get("retry_after_seconds")
        if seconds is None:  # this agent may not write at all
            return problem(403, "gate-access-denied", result.reason, **extensions)
        return problem(
            429,
            "rate-limited",
            result.reason,
            headers={"Retry-After": retry_after(seconds)},
            retry_after_seconds=seconds,
            **extensions,
        )
    return problem(422, "gate-rejected", result.reason, **extensions)


async def _unless_forgotten_since(
    kernel: KernelDep, principal: Principal, record_id: UUID, result: GateResult
) -> Response:
    """The answer to an UPDATE or FORGET. One the Gate refused because a request racing it
    forgot the record (a schema rejection or a conflict, depending on which read saw it) is
    answered as if sent after that forget: 404, and so is its retry, whose recorded refusal
    is replayed (the refusal stays audited)."""
    session = AgentSession(kernel, principal.caller)
    if await session.forgotten_since(record_id, result, absent_too=True):
        raise NotFound(f"no record {record_id}")
    return gate_response(result)


_WRITE_HEADERS = {
    "ETag": {"description": "The version written.", "schema": {"type": "string"}},
}
_BODY = "#/components/schemas/"


@router.post(
    "",
    summary="Propose a new memory",
    status_code=201,
    response_model=None,
    responses={
        201: {
            "model": DecisionView,
            "description": "Approved and stored (Location names the record).",
            "headers": {
                **_WRITE_HEADERS,
                "Location": {"description": "The new record.", "schema": {"type": "string"}},
            },
        },
        200: {
            "model": DecisionView,
            "description": "Approved without a new record: already known (outcome reinforced) "
            "or stored as a new version of a record it updates.",
        },
        **problem_responses(401, 403, 422, 429),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": _BODY + "MemoryInput"}}},
        }
    },
)
async def create_memory(
    request: Request, kernel: KernelDep, principal: Caller, idempotency_key: IdempotencyKey = None
) -> Response:
    """CREATE a record through the Gate. A Gate rejection answers with every failed check."""
    session = AgentSession(kernel, principal.caller)
    payload = await proposal(request, session, principal, GateAction.CREATE, idempotency_key)
    if isinstance(payload, GateResult):
        return gate_response(payload)
    retry = request_id(principal, idempotency_key)
    return gate_response(await session.remember(payload, request_id=retry))


@router.get(
    "/{record_id}",
    summary="Read a record (current, or as of an instant)",
    response_model=None,
    responses={
        200: {
            "model": MemoryRecord,
            "description": "The version asked for.",
            "headers": {"ETag": {"description": "Its version.", "schema": {"type": "string"}}},
        },
        **problem_responses(401, 404, 422),
    },
)
async def read_memory(
    *,
    record_id: UUID,
    kernel: KernelDep,
    principal: Caller,
    as_of_event: Annotated[
        Instant | None, Query(description="What was true in the world at this instant.")
    ] = None,
    as_of_ingestion: Annotated[
        Instant | None, Query(description="What the kernel knew at this instant.")
    ] = None,
) -> Response:
    """The current version, or the version answering the as-of instants (bi-temporal read)."""
    found = await kernel.temporal.query(
        record_id=record_id,
        as_of_event=as_of_event,
        as_of_ingestion=as_of_ingestion,
        caller=principal.caller,
    )
    if not found:
        raise NotFound(f"no record {record_id}")
    record = found[0]
    return JSONResponse(record_view(record), headers={"ETag": etag(record.version)})


@router.get(
    "/{record_id}/versions",
    summary="Every version of a record",
    response_model=None,
    responses={200: {"model": VersionsView}, **problem_responses(401, 404, 422)},
)
async def memory_versions(record_id: UUID, kernel: KernelDep, principal: Caller) -> Response:
    """The version chain, oldest first (versions above the caller's read level left out)."""
    chain = await kernel.temporal.get_version_chain(record_id, caller=principal.caller)
    if not chain:
        raise NotFound(f"no record {record_id}")
    return JSONResponse(
        {"record_id": str(record_id), "versions": [record_view(version) for version in chain]}
    )


@router.patch(
    "/{record_id}",
    summary="Update a record (a new version)",
    response_model=None,
    responses={
        200: {"model": DecisionView, "description": "Approved.", "headers": _WRITE_HEADERS},
        **problem_responses(400, 401, 403, 404, 409, 422, 428, 429),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": _BODY + "MemoryPatch"}}},
        }
    },
)
async def update_memory(
    *,
    record_id: UUID,
    request: Request,
    kernel: KernelDep,
    principal: Caller,
    if_match: IfMatch = None,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """UPDATE through the Gate. Fields not in the body keep the current version's values.
    If-Match must carry the version read; a stale one answers 409 with the current version."""
    session = AgentSession(kernel, principal.caller)
    payload = await proposal(
        request, session, principal, GateAction.UPDATE, idempotency_key, record_id=record_id
    )
    if isinstance(payload, GateResult):
        return gate_response(payload)
    expected = expected_version(if_match, required=True)
    retry = request_id(principal, idempotency_key)
    # A record the caller cannot find (absent, hidden or forgotten) is refused by the Gate,
    # audited like any bad input, and answered 404 as a read of it is.
    # Not a counted read: a write is not a read, as over MCP and in process.
    head = await kernel.temporal.current(record_id, caller=principal.caller, count_read=False)
    live = None if head is None or head.status is MemoryStatus.FORGOTTEN else head
    result = await session.amend(
        record_id, payload, head=live, expected_version=expected, request_id=retry
    )
    return await _unless_forgotten_since(kernel, principal, record_id, result)


@router.delete(
    "/{record_id}",
    summary="Forget a record",
    response_model=None,
    responses={
        200: {"model": DecisionView, "description": "Forgotten (the history is kept)."},
        **problem_responses(400, 401, 403, 404, 409, 422, 429),
    },
)
async def forget_memory(
    *,
    record_id: UUID,
    request: Request,
    kernel: KernelDep,
    principal: Caller,
    if_match: IfMatch = None,
    idempotency_key: IdempotencyKey = None,
) -> Response:
    """FORGET through the Gate; with If-Match, only if the record is still at that version.
    A forget takes no body: one naming fields (an origin claimed for it, say) is refused and
    audited first, as MCP's ``forget`` refuses such arguments."""
    if (claims := await _delete_body(request)) is not None:
        retry = (
            None
            if idempotency_key is None or _KEY.fullmatch(idempotency_key) is None
            else (request_id(principal, idempotency_key))
        )
        refused = await AgentSession(kernel, principal.caller).refuse(
            GateAction.FORGET,
            {"record_id": str(record_id), **claims},
            [f"{name}: not a field of a forget (DELETE takes no body)" for name in sorted(claims)],
            request_id=retry,
        )
        return gate_response(refused)
    expected = expected_version(if_match, required=False)
    retry = request_id(principal, idempotency_key)
    # A record the caller cannot find, or one forgotten before, is refused by the Gate and
    # audited; the answer is 404 (a retry of an approved forget replays its 200).
    result = await AgentSession(kernel, principal.caller).forget(
        record_id, expected_version=expected, request_id=retry
    )
    return await _unless_forgotten_since(kernel, principal, record_id, result)


async def _delete_body(request: Request) -> dict[str, Any] | None:
    """The fields a DELETE's body names (None for no body, an empty one or ``{}``); 400 for
    a body that is not JSON, as on the other routes."""
    if not (await request.body()).strip():
        return None
    try:
        body = await json_object(request)
    except UnreadableBody as exc:
        return {"body": exc.text}
    return body or None
