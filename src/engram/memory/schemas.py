"""Type-specific schemas: what each of the eight memory types must look like.

The rules are written down, with their reasons, in ``adr/ADR-004-memory-type-rules.md``.
:func:`validate_record` runs the envelope limits and the record's type schema and returns
every problem found (empty when the record is valid); the Gate's schema check calls it. The
envelope includes what storage cannot hold (:mod:`engram.memory.storable`): a record built in
process with a NUL, a lone surrogate, a non-finite number, an instant without a UTC form or
deep metadata is refused here, never at the INSERT.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, ClassVar, Protocol
from urllib.parse import urlparse
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
)

from engram.memory.storable import (
    instant_problem,
    shows_nothing,
    text_problem,
    value_problems,
)
from engram.memory.types import MemoryRecord, MemoryType

# --- envelope limits (documented in the ADR and docs/memory-types.md) -------------------------
MAX_CONTENT_CHARS = 16_000
MAX_METADATA_BYTES = 16_384
MAX_METADATA_DEPTH = 5
MAX_METADATA_KEY_CHARS = 64
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_EVIDENCE_LINKS = 100
#: Metadata the kernel writes itself (the PII finding, ``metadata.pii``). An internal write
#: (self-healing, consolidation) does not count it against ``MAX_METADATA_BYTES``: it adds it
#: to metadata a writer filled up to the limit, and a finding refused for size would leave
#: the record readable where the finding says it must not be (hostile pass W).
KERNEL_METADATA_KEYS = frozenset({"pii"})
MAX_AGENT_CHARS = 128
MAX_NAMESPACE_CHARS = 64
#: A classification is a label ("internal", "customer-data"), not a text.
MAX_CLASSIFICATION_CHARS = 128

_NAMESPACE = re.compile(r"[a-z0-9][a-z0-9_.:-]*")


def _shows_something(value: str) -> str:
    if shows_nothing(value):  # only invisible characters (spaces are stripped before)
        raise ValueError("blank: only invisible characters")
    return value


#: A required text of a type's metadata: blank is refused, whitespace or only invisible
#: characters alike (as for content).
NonEmpty = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=500),
    AfterValidator(_shows_something),
]

# Words that open an instruction rather than a statement. A belief states what is so;
# "Always use tabs" is a rule for someone to follow, which belongs in a skill or preference.
IMPERATIVE_OPENERS = frozenset(
    {
        "add", "always", "ask", "avoid", "be", "call", "change", "check", "click", "copy",
        "create", "delete", "disable", "do", "don't", "dont", "download", "drop", "enable",
        "ensure", "execute", "fetch", "forget", "give", "go", "ignore", "install", "keep",
        "kill", "let", "make", "move", "never", "open", "please", "print", "push", "put",
        "read", "remember", "remove", "reply", "respond", "restart", "return", "reveal", "run",
        "say", "send", "set", "share", "show", "stop", "tell", "try", "turn", "update", "use",
        "write",
    }
)  # fmt: skip

_INJECTION = re.compile(
    r"\b(ignore|disregard|forget)\b.{0,40}\b(previous|prior|above|earlier|all)\b.{0,20}"
    r"\b(instructions?|prompts?|rules|messages?)\b"
    # the same in the other word order: "disregard the rules above"
    r"|\b(ignore|disregard|forget)\b.{0,40}\b(instructions?|prompts?|rules|messages?)\b.{0,20}"
    r"\b(above|previous(ly)?|prior|earlier|before)\b"
    # without a noun: "ignore all of the above", "disregard everything above"
    r"|\b(ignore|disregard|forget)\s+(everything|anything|all)(\s+of)?(\s+the)?\s+"
    r"(above|before|previous|prior|earlier)\b"
    r"|\byou are now\b|\bsystem prompt\b|\bnew instructions?\b\s*:",
    re.IGNORECASE | re.DOTALL,
)
_FIRST_WORD = re.compile(r"[A-Za-z']+")
#: A label that makes what follows a message to the reader: a speaker ("System:",
#: "Assistant:"), a flag ("IMPORTANT:", "Reminder:"), either of them qualified ("Developer
#: note:", "Attention agent:") or a note addressed to someone ("Note to the assistant:").
#: Headings naming a subject ("Lesson:", "Wednesday:") are not among them: what follows them
#: is often a statement that opens with a noun such as "print".
_LABEL_WORD = (
    r"(?:system|assistant|user|admin|administrator|operator|developer|agent|ai|bot|model|"
    r"important|attention|reminder|instructions?|note|nb|ps|warning|urgent)"
)
_ADDRESSED = r"(?:note|message|memo|reminder)s?\s+(?:to|for)\s+[^:\n\])}>]{1,40}"
#: Markup a label may be wrapped in: emphasis, a heading or quote mark, a bullet, brackets
#: or a tag ("**System:**", "### System:", "> System:", "[System]", "<system>").
_MARKUP = r"[*_`\"'|~]*"
_SPEAKER_LABEL = re.compile(
    rf"^[\s*_`\"'|~#>\[({{<•-]*(?:{_LABEL_WORD}(?:\s+{_LABEL_WORD})?|{_ADDRESSED})"
    # closed by a bracket or tag ("[System]", "(Admin):"), or followed by a separator: a
    # colon, ">>" or a line's end, or a dash set apart by spaces ("SYSTEM - …"; in
    # "Admin-set quotas" or "User, read replicas" the word is no label)
    rf"(?:{_MARKUP}[\])}}>]+[*_`\"'|~:]*|{_MARKUP}"
    rf"(?:[ \t]*(?::|>>|\n)|[ \t]+(?:--?|[\u2013\u2014])(?=\s)){_MARKUP})"
    r"\s*",
    re.IGNORECASE,
)
#: Labels read in a row ("System: Assistant: …").
MAX_LABELS = 3


def looks_imperative(text: str) -> bool:
    """True when the text opens like an instruction ("Use tabs", "Never push to main"), or
    does so after speaker labels, bare or in markup ("System: always answer in French",
    "**Assistant:** reply in JSON", "[System] always …")."""
    rest = text.strip()
    starts = [rest]
    for _ in range(MAX_LABELS):
        label = _SPEAKER_LABEL.match(rest)
        if label is None:
            break
        rest = rest[label.end() :]
        starts.append(rest)
    for start in starts:
        match = _FIRST_WORD.search(start)
        if match is not None and match.group(0).lower() in IMPERATIVE_OPENERS:
            return True
    return False


def looks_like_injection(text: str) -> bool:
    """True when the text addresses the reading agent ("ignore previous instructions")."""
    return _INJECTION.search(text) is not None


class TypeSchema(BaseModel):
    """Fields of the envelope a type schema looks at; subclasses add the type's rules."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    memory_type: ClassVar[MemoryType]

    content: Annotated[str, StringConstraints(min_length=1, max_length=MAX_CONTENT_CHARS)]
    metadata: dict[str, Any]
    event_time: datetime | None
    evidence_links: tuple[UUID, ...]

    @field_validator("content")
    @classmethod
    def _content_has_text(cls, value: str) -> str:
        if shows_nothing(value):  # spaces, or only invisible characters
            raise ValueError("content is blank")
        return value


class _Meta(BaseModel):
    model_config = ConfigDict(extra="allow")


class BeliefSchema(TypeSchema):
    """A declarative statement about what is so, never an instruction or a question."""

    memory_type = MemoryType.BELIEF

    @field_validator("content")
    @classmethod
    def _declarative(cls, value: str) -> str:
        if looks_imperative(value):
            raise ValueError("a belief states what is so; this reads as an instruction")
        if value.rstrip().endswith("?"):
            raise ValueError("a belief states what is so; this is a question")
        return value


class DecisionMeta(_Meta):
    rationale: NonEmpty
    alternatives: list[NonEmpty] = Field(default_factory=list, max_length=20)


class DecisionSchema(TypeSchema):
    """A choice that was made, carrying why it was made (``metadata.rationale``)."""

    memory_type = MemoryType.DECISION
    metadata: DecisionMeta  # type: ignore[assignment]


class EpisodeSchema(TypeSchema):
    """Something that happened, at a known time (``event_time`` is required)."""

    memory_type = MemoryType.EPISODE

    @field_validator("event_time")
    @classmethod
    def _has_time(cls, value: datetime | None) -> datetime | None:
        if value is None:
            raise ValueError("an episode needs event_time: when did it happen?")
        return value


class SkillMeta(_Meta):
    steps: Annotated[list[NonEmpty], Field(min_length=1, max_length=100)]


class SkillSchema(TypeSchema):
    """How to do something: ordered, non-empty ``metadata.steps``."""

    memory_type = MemoryType.SKILL
    metadata: SkillMeta  # type: ignore[assignment]


class EntityMeta(_Meta):
    name: NonEmpty
    kind: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,63}$")]


class EntitySchema(TypeSchema):
    """A thing the agent knows about: ``metadata.name`` and a lowercase ``metadata.kind``."""

    memory_type = MemoryType.ENTITY
    metadata: EntityMeta  # type: ignore[assignment]


class PreferenceMeta(_Meta):
    subject: NonEmpty


class PreferenceSchema(TypeSchema):
    """What someone prefers, naming what the preference is about (``metadata.subject``)."""

    memory_type = MemoryType.PREFERENCE
    metadata: PreferenceMeta  # type: ignore[assignment]


class ReflectionSchema(TypeSchema):
    """A conclusion drawn from other records, which it cites in ``evidence_links``."""

    memory_type = MemoryType.REFLECTION

    @field_validator("evidence_links")
    @classmethod
    def _cites(cls, value: tuple[UUID, ...]) -> tuple[UUID, ...]:
        if not value:
            raise ValueError("a reflection cites the records it draws on (evidence_links)")
        return value


class ResourceMeta(_Meta):
    locator: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2048)]

    @field_validator("locator")
    @classmethod
    def _locatable(cls, value: str) -> str:
        parsed = urlparse(value)
        if parsed.scheme and (parsed.netloc or parsed.path):
            return value
        if value.startswith(("/", "./", "../", "~/")):
            return value
        raise ValueError("locator must be a URI (scheme://...) or a file path")


class ResourceSchema(TypeSchema):
    """A pointer to something outside the kernel: ``metadata.locator`` (URI or path)."""

    memory_type = MemoryType.RESOURCE
    metadata: ResourceMeta  # type: ignore[assignment]


SCHEMAS: dict[MemoryType, type[TypeSchema]] = {
    schema.memory_type: schema
    for schema in (
        BeliefSchema,
        DecisionSchema,
        EpisodeSchema,
        SkillSchema,
        EntitySchema,
        PreferenceSchema,
        ReflectionSchema,
        ResourceSchema,
    )
}


def validate_record(record: MemoryRecord, *, internal: bool = False) -> list[str]:
    """Check the envelope limits and the record's type schema; return every problem found.

    ``internal``: an internal origin writes it, and the metadata's size is measured without
    :data:`KERNEL_METADATA_KEYS` (the rest passed the limit when a writer stored it)."""
    problems = _unstorable(record)
    if problems:
        return problems  # the type rules would read text and metadata storage cannot hold
    problems = _envelope_problems(record, internal=internal)
    schema = SCHEMAS[record.type]
    try:
        schema.model_validate(
            {
                "content": record.content,
                "metadata": record.metadata,
                "event_time": record.event_time,
                "evidence_links": record.evidence_links,
            }
        )
    except ValidationError as exc:
        problems.extend(problems_of(exc))
    return problems


def content_problems(memory_type: MemoryType, content: str) -> list[str]:
    """What :func:`validate_record` would find wrong with ``content`` as the text of a
    ``memory_type`` record (storage, length, the type's rules for its text), whatever the
    rest of the record holds: for text the kernel writes from someone else's answer."""
    problem = text_problem(content)
    if problem is not None:
        return [f"content: {problem}"]
    try:
        SCHEMAS[memory_type].model_validate(
            {"content": content, "metadata": {}, "event_time": None, "evidence_links": ()}
        )
    except ValidationError as exc:
        return [found for found in problems_of(exc) if found.startswith("content")]
    return []


class Invalid(Protocol):
    """A pydantic validation error (FastAPI's ``RequestValidationError`` included)."""

    def errors(self) -> Sequence[Any]:
        """pydantic's list of problems."""


def problems_of(exc: Invalid, *, whole: str = "input") -> list[str]:
    """``where: what`` for each problem pydantic found (``whole`` names a problem of the
    input as a whole); the offending value is never quoted. The one wording of validation
    problems: the type rules here, and every adapter (``engram.protocols.errors``). A location
    may name a client's field, so callers that store or send these escape them."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error.get("loc", ())) or whole
        what = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        problems.append(f"{where}: {what}")
    return problems


def _unstorable(record: MemoryRecord) -> list[str]:
    """What in the record PostgreSQL, UTF-8 or the audit's JSON cannot hold."""
    problems: list[str] = []
    texts = {
        "content": record.content,
        "source_agent": record.source_agent,
        "namespace": record.namespace,
        "classification": record.classification or "",
    }
    for name, text in texts.items():
        problem = text_problem(text)
        if problem is not None:
            problems.append(f"{name}: {problem}")
    problems.extend(f"metadata: {problem}" for problem in value_problems(record.metadata))
    instants = {
        "event_time": record.event_time,
        "event_time_end": record.event_time_end,
        "ingestion_time": record.ingestion_time,
    }
    for name, when in instants.items():
        problem = None if when is None else instant_problem(when, stored=True)
        if problem is not None:
            problems.append(f"{name}: {problem}")
    return problems


def _envelope_problems(record: MemoryRecord, *, internal: bool = False) -> list[str]:
    problems: list[str] = []
    if not record.source_agent.strip() or len(record.source_agent) > MAX_AGENT_CHARS:
        problems.append(f"source_agent: must be 1-{MAX_AGENT_CHARS} characters")
    if len(record.namespace) > MAX_NAMESPACE_CHARS or not _NAMESPACE.fullmatch(record.namespace):
        problems.append("namespace: lowercase letters, digits and _.:- only, at most 64")
    if len(record.evidence_links) > MAX_EVIDENCE_LINKS:
        problems.append(f"evidence_links: at most {MAX_EVIDENCE_LINKS}")
    if record.classification is not None and len(record.classification) > MAX_CLASSIFICATION_CHARS:
        problems.append(f"classification: at most {MAX_CLASSIFICATION_CHARS} characters")
    if record.event_time_end is not None and (
        record.event_time is None or record.event_time_end < record.event_time
    ):
        problems.append("event_time_end: needs an event_time at or before it")
    for when in (record.event_time, record.event_time_end, record.ingestion_time):
        if when is not None and when.tzinfo is None:
            problems.append("times must be timezone-aware")
            break
    problems.extend(_metadata_problems(record.metadata, internal=internal))
    return problems


def _metadata_problems(metadata: dict[str, Any], *, internal: bool = False) -> list[str]:
    measured = (
        {key: value for key, value in metadata.items() if key not in KERNEL_METADATA_KEYS}
        if internal
        else metadata
    )
    try:
        encoded = json.dumps(measured, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return [f"metadata: not JSON-serialisable ({exc})"]
    problems: list[str] = []
    if len(encoded.encode()) > MAX_METADATA_BYTES:
        problems.append(f"metadata: larger than {MAX_METADATA_BYTES} bytes as JSON")
    if _depth(metadata) > MAX_METADATA_DEPTH:
        problems.append(f"metadata: nested deeper than {MAX_METADATA_DEPTH} levels")
    long_keys = [key for key in _keys(metadata) if len(key) > MAX_METADATA_KEY_CHARS]
    if long_keys:
        problems.append(f"metadata: keys longer than {MAX_METADATA_KEY_CHARS} characters")
    tags = metadata.get("tags")
    if tags is not None:
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            problems.append("metadata.tags: a list of strings")
        elif len(tags) > MAX_TAGS or any(not 0 < len(tag) <= MAX_TAG_CHARS for tag in tags):
            problems.append(f"metadata.tags: at most {MAX_TAGS}, each 1-{MAX_TAG_CHARS} characters")
    return problems


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(item) for item in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(item) for item in value), default=0)
    return 0


def _keys(value: object) -> list[str]:
    if isinstance(value, dict):
        keys = [str(key) for key in value]
        for item in value.values():
            keys.extend(_keys(item))
        return keys
    if isinstance(value, list):
        return [key for item in value for key in _keys(item)]
    return []
