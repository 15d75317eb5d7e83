"""What an MCP client reads about the memory tools: their argument models (the published
input schemas), descriptions and definitions. The handlers are in :mod:`.tools`, the shapes
of their results in :mod:`.outputs`."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from mcp.types import Tool, ToolAnnotations
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from engram.memory.storable import instant_problem
from engram.memory.types import AccessLevel, MemoryRecord, MemoryType
from engram.protocols.inprocess import (
    AS_OF_EVENT,
    AS_OF_INGESTION,
    MAX_EXPECTED_VERSION,
    TAGS,
    Instant,
    JsonBool,
    NotABoolean,
    SearchInput,
    StorableText,
    Tag,
    WriteInput,
)
from engram.protocols.mcp.outputs import (
    HealthView,
    PageView,
    RecordView,
    inline_schema,
    output_schema,
)
from engram.protocols.views import DecisionView, FeedbackView, SearchView, VersionsView
from engram.retrieval.arguments import MAX_LIMIT, MAX_TAG_FILTERS

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
            "Omit for 'now' (an update that keeps the content keeps the current one). "
            "Required for episodes."
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
    source_confidence: Annotated[float | None, NotABoolean] = Field(
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
    expected_version: Annotated[int, NotABoolean] = Field(
        ge=1,
        le=MAX_EXPECTED_VERSION,
        description=(
            "The `version` of the record as you last read it (from get, history, recall or "
            "the previous write). If the record changed since, the update is refused as a "
            "conflict and you should read it again."
        ),
    )
    request_id: RequestIdField


class UpdateControl(_Strict):
    record_id: UUID
    expected_version: Annotated[int, NotABoolean] = Field(ge=1, le=MAX_EXPECTED_VERSION)
    request_id: RequestIdField


class RememberControl(_Strict):
    request_id: RequestIdField


#: Arguments of ``recall`` (the same as the body of ``POST /v1/search``).
RecallArgs = SearchInput


class GetArgs(_Strict):
    """Arguments of ``get``."""

    record_id: RecordIdField
    as_of_event: Instant | None = Field(default=None, description=AS_OF_EVENT)
    as_of_ingestion: Instant | None = Field(default=None, description=AS_OF_INGESTION)
    include_forgotten: JsonBool = Field(
        default=False, description="Return the record even if it was forgotten."
    )


class HistoryArgs(_Strict):
    """Arguments of ``history``."""

    record_id: RecordIdField


class ForgetArgs(_Strict):
    """Arguments of ``forget``."""

    record_id: RecordIdField
    expected_version: Annotated[int | None, NotABoolean] = Field(
        default=None,
        ge=1,
        le=MAX_EXPECTED_VERSION,
        description="Optional: the version you read; if the record changed since, nothing happens.",
    )
    request_id: RequestIdField


def page_cursor(record: MemoryRecord) -> str:
    """The cursor of the page after ``record``: its ingestion time and version id, opaque."""
    plain = f"{record.ingestion_time.isoformat()}|{record.id}"
    return base64.urlsafe_b64encode(plain.encode()).decode().rstrip("=")


def cursor_position(cursor: str) -> tuple[datetime, UUID]:
    """The (ingestion time, version id) a cursor stands for; ValueError for anything that is
    not a cursor ``list`` returned (an instant with no UTC form among them: the driver could
    not send it, and the refusal would read as an outage)."""
    try:
        plain = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        instant, _, version_id = plain.partition("|")
        position = datetime.fromisoformat(instant), UUID(version_id)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        position = None
    if position is None or position[0].tzinfo is None or instant_problem(position[0]):
        raise ValueError("not a cursor that list returned")
    return position


def _cursor(value: str) -> str:
    cursor_position(value)
    return value


class ListArgs(_Strict):
    """Arguments of ``list``."""

    types: list[MemoryType] | None = Field(
        default=None, max_length=len(MemoryType), description="Only these kinds (default: all)."
    )
    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAG_FILTERS, description=TAGS)
    namespace: StorableText = Field(
        default="default", min_length=1, max_length=64, description="Namespace to list."
    )
    limit: Annotated[int, NotABoolean] = Field(
        default=20, ge=1, le=MAX_LIMIT, description=f"Most records to return (1-{MAX_LIMIT})."
    )
    cursor: Annotated[str, AfterValidator(_cursor)] | None = Field(
        default=None,
        max_length=200,
        description="`next_cursor` of the previous page; omit for the first page.",
    )

    @property
    def after(self) -> tuple[datetime, UUID] | None:
        """Where the previous page ended (None: this is the first page)."""
        return None if self.cursor is None else cursor_position(self.cursor)


class HealthArgs(_Strict):
    """Arguments of ``health``: none."""


class FeedbackArgs(_Strict):
    """Arguments of ``feedback``."""

    record_id: RecordIdField
    useful: JsonBool = Field(description="True if the record helped with your task, false if not.")
    signal: str = Field(
        default="explicit",
        min_length=1,
        max_length=32,
        pattern=r"^[a-z_]+$",
        description="Optional kind of feedback (lower-case letters and '_'), e.g. 'explicit'.",
    )
    request_id: RequestIdField


# --- tool definitions --------------------------------------------------------------------------

_REMEMBER = """\
Store a new memory for later recall. Use it for durable knowledge worth keeping beyond this \
conversation: facts (belief), choices and their reasons (decision), events (episode), \
procedures (skill), named things (entity), preferences, conclusions (reflection) and \
pointers (resource). Do not store secrets or instructions to other agents.

Every write is checked by engram's Librarian Gate (type rules, your permissions, personal \
data, rate limit, content classification). The result says `decision`: approved (with \
`record_id` and `version`; `outcome` is `created`, `reinforced` when an equivalent memory \
already existed, or `updated` when it was stored as the new version of a memory of yours it \
changes), or rejected with `failed_checks` naming each check that failed and why: \
fix the input and try again, or choose another type."""

_RECALL = """\
Search memory by meaning and keywords (hybrid search) and return the best matching records, \
best first. Use it before answering questions that may depend on what was learned before, \
and to find the `record_id` and current `version` of a memory you want to update, forget or \
rate. Each hit has the `record`, a `score` (how close in meaning to your query, 0 to 1), a \
`relevance` (0 to 1: how likely it answers your query; 0.5 is as likely as not) and each \
search leg's rank. Hits below `min_score` are left out, so an empty result means \
nothing relevant is stored; lower it to see weaker matches. `degraded` is true when only \
keyword search answered (scores and relevance are then null). Only records your agent may read are \
returned. With as_of_event / as_of_ingestion it searches the past state of memory."""

_LIST = """\
List the memories your agent may read, newest change first, a page at a time, optionally \
only some types or those carrying given tags. Use it to browse or review what is stored; \
use recall to find memories about something. When `next_cursor` is not null, pass it as \
`cursor` for the next page."""

_HEALTH = """\
Check whether engram can serve you now: its database, the embedding model recall uses \
(without it recall matches keywords only) and the write path, each true or false, and what \
your agent may read and write."""

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
`metadata` you send replaces the old metadata as a whole. `source_confidence` is not kept: \
send it again if it still applies. `event_time` is kept while the content stays the same; \
new content is dated now unless you send `event_time`. \
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
    """One tool: its wire definition and the models behind its input and output schemas."""

    name: str
    title: str
    description: str
    arguments: type[BaseModel]
    output: type[BaseModel]
    read_only: bool = False
    destructive: bool = False

    def definition(self) -> Tool:
        """The tool as ``tools/list`` shows it."""
        return Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=input_schema(self.arguments),
            output_schema=output_schema(self.output),
            annotations=ToolAnnotations(
                title=self.title,
                read_only_hint=self.read_only,
                destructive_hint=self.destructive,
                idempotent_hint=self.read_only,  # a read changes nothing a repeat could
                open_world_hint=False,
            ),
        )


SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("remember", "Remember", _REMEMBER, RememberArgs, DecisionView),
    ToolSpec("recall", "Recall", _RECALL, RecallArgs, SearchView, read_only=True),
    ToolSpec("get", "Get a memory", _GET, GetArgs, RecordView, read_only=True),
    ToolSpec("history", "Version history", _HISTORY, HistoryArgs, VersionsView, read_only=True),
    ToolSpec("list", "List memories", _LIST, ListArgs, PageView, read_only=True),
    ToolSpec("update", "Update a memory", _UPDATE, UpdateArgs, DecisionView, destructive=True),
    ToolSpec("forget", "Forget a memory", _FORGET, ForgetArgs, DecisionView, destructive=True),
    ToolSpec("feedback", "Rate a memory", _FEEDBACK, FeedbackArgs, FeedbackView),
    ToolSpec("health", "Health", _HEALTH, HealthArgs, HealthView, read_only=True),
)
TOOL_NAMES = tuple(spec.name for spec in SPECS)


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's published input schema (``$ref``s inlined, see :func:`inline_schema`)."""
    return inline_schema(model)
