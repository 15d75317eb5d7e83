"""The in-process adapter: an external agent's handle on a kernel in the same process.

It does what every protocol adapter does: takes input as a client sends it (plain mappings,
as parsed from JSON), validates it into a record, and always marks the request
``decision_type = external``. The input model forbids unknown fields, so a client that sends
``"decision_type": "consolidation"`` gets a typed, audited rejection, never internal authority.
Malformed input is audited too (:meth:`LibrarianGate.reject_input`).

This is the input boundary of every adapter (HTTP, MCP, in-process): :class:`WriteInput` also
refuses what storage cannot hold (:mod:`engram.memory.storable`): a NUL or a lone surrogate in
any text or metadata key, NaN or Infinity, an instant with no UTC form, nesting deeper than
``MAX_NESTING``, and input larger than ``MAX_INPUT_BYTES`` as JSON. Each is an audited
rejection naming the field, never a failure further down.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)

from engram.errors import ValidationFailed
from engram.kernel import Kernel
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.storable import (
    MAX_INPUT_BYTES,
    input_bytes,
    instant_problem,
    request_id_problem,
    text_problem,
    value_problems,
)
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
)
from engram.protocols.errors import problems_of
from engram.retrieval.arguments import MAX_LIMIT, MAX_QUERY_CHARS, MAX_TAG_CHARS, MAX_TAG_FILTERS
from engram.retrieval.search import DEFAULT_MIN_SCORE, SearchResult

#: The only origin this adapter can produce.
ORIGIN = GateDecisionType.EXTERNAL

#: Fields of the current version an amendment keeps unless the change names them. Source
#: confidence starts afresh; so does the event time of new content (a new statement), while
#: an amendment that keeps the content keeps its event time too, and the Gate its validity
#: end (``plan.next_version``).
CARRIED = frozenset(
    {"type", "content", "metadata", "access_level", "namespace", "classification", "evidence_links"}
)


def _storable_text(value: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


#: Text PostgreSQL and UTF-8 can hold: no NUL, no lone surrogate.
StorableText = Annotated[str, AfterValidator(_storable_text)]


def _not_a_boolean(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError("a number, not true or false")
    return value


#: A number that JSON's ``true`` and ``false`` are not (pydantic reads them as 1 and 0: a
#: version, a limit or a confidence sent as ``true`` would be taken as 1; hostile pass AB).
NotABoolean = BeforeValidator(_not_a_boolean)
#: A boolean that no number or text is (pydantic reads 1, 0, "yes" and "off" as booleans).
JsonBool = Annotated[bool, Strict()]

_A_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")


def _not_a_number(value: object) -> object:
    if isinstance(value, int | float) or (isinstance(value, str) and _A_NUMBER.fullmatch(value)):
        raise ValueError("an ISO 8601 time with a timezone, not a number")
    return value


#: A time that no number is: pydantic reads a number, or a text of digits, as a Unix time
#: whose unit it guesses from its size (the last second of 9999 in seconds was taken as
#: milliseconds, 1978; hostile pass AB).
NotANumber = BeforeValidator(_not_a_number)


class WriteInput(BaseModel):
    """What an external client may send to create or update a record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: MemoryType
    content: StorableText
    metadata: dict[str, Any] = Field(default_factory=dict)
    event_time: Annotated[datetime | None, NotANumber] = None
    access_level: AccessLevel = AccessLevel.AGENT
    source_confidence: Annotated[float | None, NotABoolean] = Field(
        default=None, ge=0.0, le=1.0, allow_inf_nan=False
    )
    evidence_links: list[UUID] = Field(default_factory=list, max_length=100)
    namespace: StorableText = "default"
    classification: StorableText | None = None

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and input_bytes(data) > MAX_INPUT_BYTES:
            raise ValueError(f"larger than {MAX_INPUT_BYTES // 1024} KiB as JSON")
        return data

    @field_validator("metadata")
    @classmethod
    def _storable_metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        problems = value_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("event_time")
    @classmethod
    def _has_utc_form(cls, value: datetime | None) -> datetime | None:
        problem = None if value is None else instant_problem(value, stored=True)
        if problem is not None:
            raise ValueError(problem)
        return value

    def to_record(self, agent_id: str, *, record_id: UUID | None = None) -> MemoryRecord:
        """A proposal by ``agent_id`` (a new record, or a new version of ``record_id``)."""
        return MemoryRecord.draft(
            self.type,
            self.content,
            source_agent=agent_id,
            metadata=self.metadata,
            event_time=self.event_time,
            access_level=self.access_level,
            source_confidence=self.source_confidence,
            evidence_links=self.evidence_links,
            namespace=self.namespace,
            classification=self.classification,
            record_id=record_id,
        )


def _utc(value: datetime) -> datetime:
    problem = instant_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value.astimezone(UTC)


#: An instant with a UTC offset (naive times are ambiguous and refused), kept in UTC.
Instant = Annotated[AwareDatetime, NotANumber, AfterValidator(_utc)]

#: One tag of a filter: what ``metadata.tags`` of a record may hold.
Tag = Annotated[StorableText, Field(min_length=1, max_length=MAX_TAG_CHARS)]
TAGS = f"Only records whose metadata.tags hold every one of these tags (at most {MAX_TAG_FILTERS})."

AS_OF_EVENT = (
    "Optional ISO 8601 instant with a timezone, e.g. 2026-01-31T12:00:00Z: answer with what "
    "was true in the world at that time (event time), as currently known."
)
AS_OF_INGESTION = (
    "Optional ISO 8601 instant with a timezone: answer with what engram had been told by that "
    "time (ingestion time), ignoring anything learned later."
)


class SearchInput(BaseModel):
    """A search by meaning, ordered with the query's words, over the records the caller may read.

    The body of ``POST /v1/search`` and the arguments of the MCP tool ``recall``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    query: StorableText = Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="What you are looking for, in words (matched by meaning and by keywords).",
    )
    types: list[MemoryType] | None = Field(
        default=None,
        max_length=len(MemoryType),
        description="Only these kinds of memory (default: all).",
    )
    limit: Annotated[int, NotABoolean] = Field(
        default=10, ge=1, le=MAX_LIMIT, description=f"Most hits to return (1-{MAX_LIMIT})."
    )
    namespace: StorableText = Field(
        default="default", min_length=1, max_length=64, description="Namespace to search."
    )
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAG_FILTERS, description=TAGS)
    min_score: Annotated[float, NotABoolean] = Field(
        default=DEFAULT_MIN_SCORE,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description=(
            "Least `score` (similarity in meaning, 0-1) a hit must have: the default leaves "
            "out unrelated records, 0 returns the nearest whatever they are."
        ),
    )
    as_of_event: Instant | None = Field(default=None, description=AS_OF_EVENT)
    as_of_ingestion: Instant | None = Field(default=None, description=AS_OF_INGESTION)
    include_superseded: JsonBool = Field(
        default=False,
        description="Search old versions too (each hit is then one version, not a record).",
    )
    include_consolidated: JsonBool = Field(
        default=False,
        description="Also return raw records that were already distilled into durable knowledge.",
    )

    async def run(self, kernel: Kernel, caller: CallerIdentity) -> SearchResult:
        """Search on behalf of ``caller``."""
        return await kernel.retrieval.search(
            caller,
            self.query,
            types=self.types,
            limit=self.limit,
            as_of_event=self.as_of_event,
            as_of_ingestion=self.as_of_ingestion,
            include_superseded=self.include_superseded,
            include_consolidated=self.include_consolidated,
            namespace=self.namespace,
            tags=self.tags,
            min_score=self.min_score,
        )


#: Largest version a caller may name as expected (PostgreSQL's integer; REST's If-Match too).
MAX_EXPECTED_VERSION = 2**31 - 1
_NO_PAYLOAD = object()


def _call_problems(
    payload: object = _NO_PAYLOAD,
    expected_version: object = None,
    record_id: object = UUID(int=0),
    *,
    request_id: object = None,
) -> list[str]:
    """What is wrong with the Python values a caller passed (not their fields: the schema
    checks those): a payload that is not a mapping, an expected version out of range, a
    record id that is not a UUID, a request id no audit row can be keyed by."""
    problems = []
    if request_id is not None and (problem := request_id_problem(request_id)) is not None:
        problems.append(problem)
    if not isinstance(record_id, UUID):
        problems.append(f"record_id: a UUID, not {type(record_id).__name__}")
    if payload is not _NO_PAYLOAD and not isinstance(payload, Mapping):
        problems.append(f"payload: a mapping of fields, not {type(payload).__name__}")
    if expected_version is not None and (
        isinstance(expected_version, bool)
        or not isinstance(expected_version, int)
        or not 1 <= expected_version <= MAX_EXPECTED_VERSION
    ):
        problems.append(f"expected_version: an integer from 1 to {MAX_EXPECTED_VERSION}")
    return problems


def _raw(payload: object) -> Mapping[str, Any]:
    return payload if isinstance(payload, Mapping) else {"payload": payload}


class AgentSession:
    """Writes on behalf of one authenticated external agent. Every bad input, a payload of
    the wrong Python type included, is an audited rejection, never an exception."""

    def __init__(self, kernel: Kernel, caller: CallerIdentity) -> None:
        given: object = caller
        if not isinstance(given, CallerIdentity):  # what it writes and reads is this identity's
            raise ValidationFailed(errors=["caller: a CallerIdentity"])
        self._kernel = kernel
        self._caller = caller

    async def remember(
        self, payload: Mapping[str, Any], *, request_id: str | None = None
    ) -> GateResult:
        """CREATE a record from client input."""
        if problems := _call_problems(payload, request_id=request_id):
            return await self.refuse(
                GateAction.CREATE, _raw(payload), problems, request_id=request_id
            )
        try:
            data = WriteInput.model_validate(dict(payload))
        except ValidationError as exc:
            return await self._reject(GateAction.CREATE, payload, exc, request_id)
        record = data.to_record(self._caller.agent_id)
        return await self._kernel.gate.evaluate(
            GateRequest(GateAction.CREATE, record, self._caller, ORIGIN, request_id=request_id)
        )

    async def update(
        self,
        record_id: UUID,
        payload: Mapping[str, Any],
        *,
        expected_version: int | None,
        request_id: str | None = None,
    ) -> GateResult:
        """UPDATE a record from client input (``expected_version`` as read by the client)."""
        if problems := _call_problems(payload, expected_version, record_id, request_id=request_id):
            raw = {"record_id": str(record_id), **_raw(payload)}
            return await self.refuse(GateAction.UPDATE, raw, problems, request_id=request_id)
        try:
            data = WriteInput.model_validate(dict(payload))
        except ValidationError as exc:
            return await self._reject(GateAction.UPDATE, payload, exc, request_id)
        record = data.to_record(self._caller.agent_id, record_id=record_id)
        return await self._kernel.gate.evaluate(
            GateRequest(
                GateAction.UPDATE, record, self._caller, ORIGIN, expected_version, request_id
            )
        )

    async def amend(
        self,
        record_id: UUID,
        changes: Mapping[str, Any],
        *,
        expected_version: int | None,
        request_id: str | None = None,
        head: MemoryRecord | None = None,
    ) -> GateResult:
        """UPDATE with only the fields that change; the others keep the current version's
        values (see :data:`CARRIED`). A record the caller cannot see is an audited rejection.
        ``head``: the current version, when the adapter has just read it as this caller."""
        if problems := _call_problems(changes, expected_version, record_id, request_id=request_id):
            raw = {"record_id": str(record_id), **_raw(changes)}
            return await self.refuse(GateAction.UPDATE, raw, problems, request_id=request_id)
        if head is None:
            head = await self._kernel.temporal.current(
                record_id, caller=self._caller, count_read=False
            )
        if head is None or head.status is MemoryStatus.FORGOTTEN:
            return await self._kernel.gate.reject_input(
                action=GateAction.UPDATE,
                caller=self._caller,
                decision_type=ORIGIN,
                raw={"record_id": str(record_id), **changes},
                problems=[f"no record {record_id}"],
                request_id=request_id,
            )
        proposal = {**head.model_dump(mode="json", include=set(CARRIED)), **changes}
        if proposal.get("content") == head.content and "event_time" not in changes:
            # the same claim restated: dated as it was, for Layer 1 (an episode needs a
            # date), Layer 2 (which of two claims is the newer) and the audit row alike
            proposal["event_time"] = head.event_time and head.event_time.isoformat()
        return await self.update(
            record_id, proposal, expected_version=expected_version, request_id=request_id
        )

    async def forget(
        self,
        record_id: UUID,
        *,
        expected_version: int | None = None,
        request_id: str | None = None,
    ) -> GateResult:
        """FORGET a record; one the caller may not read is answered as an unknown one."""
        if problems := _call_problems(
            expected_version=expected_version, record_id=record_id, request_id=request_id
        ):
            raw = {"record_id": str(record_id), "expected_version": expected_version}
            return await self.refuse(GateAction.FORGET, raw, problems, request_id=request_id)
        head = await self._kernel.temporal.current(record_id, caller=self._caller, count_read=False)
        if head is None:
            return await self._kernel.gate.reject_input(
                action=GateAction.FORGET,
                caller=self._caller,
                decision_type=ORIGIN,
                raw={"record_id": str(record_id)},
                problems=[f"no record {record_id}"],
                request_id=request_id,
            )
        return await self._kernel.gate.evaluate(
            GateRequest.forget(
                head, self._caller, ORIGIN, expected_version=expected_version, request_id=request_id
            )
        )

    async def forgotten_since(
        self, record_id: UUID | None, result: GateResult, *, absent_too: bool = False
    ) -> bool:
        """Whether ``result``, an UPDATE or FORGET the Gate refused, lost to a request that
        forgot the record meanwhile (a schema rejection or a conflict, depending on which read
        saw the forget): adapters answer it, and its replayed retry, as a request sent after
        that forget is answered (not found); the refusal stays audited. ``absent_too``: a
        record the caller cannot find at all counts too (an adapter that looked it up first)."""
        if record_id is None or result.decision is GateDecision.APPROVED:
            return False
        head = await self._kernel.temporal.current(record_id, caller=self._caller, count_read=False)
        if head is None:
            return absent_too
        return head.status is MemoryStatus.FORGOTTEN

    async def refuse_unknown(
        self,
        action: GateAction,
        payload: Mapping[str, Any],
        *,
        record_id: UUID | None = None,
        request_id: str | None = None,
    ) -> GateResult | None:
        """The audited rejection of a payload naming a field no memory has (a client's
        ``decision_type``, say: adapters set the origin), None when every field is known.
        Adapters call it before checking their own control fields (headers, request ids),
        so such a claim is audited whatever else is wrong with the request."""
        unknown = sorted(str(name) for name in payload if name not in WriteInput.model_fields)
        if not unknown:
            return None
        problems = [
            f"{name}: not a field of a memory (extra inputs are not permitted)" for name in unknown
        ]
        raw = payload if record_id is None else {"record_id": str(record_id), **payload}
        return await self.refuse(action, raw, problems, request_id=request_id)

    async def refuse(
        self,
        action: GateAction,
        raw: Mapping[str, Any],
        problems: list[str],
        *,
        request_id: str | None = None,
    ) -> GateResult:
        """An audited rejection of input the adapter could not read at all (``raw`` holds
        what it could keep of it, e.g. the body's text). A ``request_id`` no audit row can
        be keyed by is refused too, and kept (escaped) in the snapshot only."""
        if request_id is not None and (problem := request_id_problem(request_id)) is not None:
            raw = {**raw, "request_id": request_id}
            problems = problems if problem in problems else [*problems, problem]
            request_id = None
        return await self._kernel.gate.reject_input(
            action=action,
            caller=self._caller,
            decision_type=ORIGIN,
            raw=raw,
            problems=problems,
            request_id=request_id,
        )

    async def _reject(
        self,
        action: GateAction,
        payload: Mapping[str, Any],
        exc: ValidationError,
        request_id: str | None,
    ) -> GateResult:
        return await self.refuse(action, payload, problems_of(exc), request_id=request_id)
