"""The type registry: enums, identifiers, the MemoryRecord envelope and the caller identity.

Retrieval may import this module (and ``engram.memory.temporal``); it holds no I/O.
Type-specific content rules live in :mod:`engram.memory.schemas`.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Self
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from engram.errors import ValidationFailed


class MemoryType(StrEnum):
    """The eight kinds of memory the kernel stores."""

    BELIEF = "belief"
    DECISION = "decision"
    EPISODE = "episode"
    SKILL = "skill"
    ENTITY = "entity"
    PREFERENCE = "preference"
    REFLECTION = "reflection"
    RESOURCE = "resource"


class AccessLevel(StrEnum):
    """Who may read a record, from the most open to the most closed."""

    PUBLIC = "public"
    AGENT = "agent"
    USER = "user"
    SYSTEM = "system"
    SENSITIVE = "sensitive"

    @property
    def rank(self) -> int:
        """Position in the order public < agent < user < system < sensitive."""
        return _ACCESS_ORDER.index(self)

    def allows(self, other: AccessLevel) -> bool:
        """True if a clearance of ``self`` covers a record at ``other``."""
        return other.rank <= self.rank


_ACCESS_ORDER = tuple(AccessLevel)


class GateDecisionType(StrEnum):
    """Where a write comes from; set by the adapter or subsystem, never by the caller."""

    EXTERNAL = "external"
    CONSOLIDATION = "consolidation"
    SELF_HEALING = "self_healing"


class GateAction(StrEnum):
    """What a Gate request asks for."""

    CREATE = "CREATE"
    UPDATE = "UPDATE"
    FORGET = "FORGET"


class GateDecision(StrEnum):
    """The Gate's verdict on one request."""

    APPROVED = "approved"
    REJECTED = "rejected"
    CONFLICT = "conflict"


class WriteOutcome(StrEnum):
    """What an evaluation did to storage."""

    CREATED = "created"
    UPDATED = "updated"
    FORGOTTEN = "forgotten"
    REINFORCED = "reinforced"
    NONE = "none"


class ConflictClassification(StrEnum):
    """How a new record relates to an existing one it conflicts with."""

    CONTRADICTION = "contradiction"
    SUPERSESSION = "supersession"
    REFINEMENT = "refinement"
    UNRESOLVABLE = "unresolvable"


class ConsolidationTrigger(StrEnum):
    """What started a consolidation pass (specification §5.4)."""

    SCHEDULED_DEEP = "scheduled_deep"  # nightly: every fast-path record
    SCHEDULED_LIGHT = "scheduled_light"  # hourly: records ingested recently
    EVENT_DRIVEN = "event_driven"  # a topic reached the event threshold
    PRESSURE_DRIVEN = "pressure_driven"  # the fast path holds more than its limit


class ConsolidationPath(StrEnum):
    """Fast (raw, decaying) or slow (consolidated, durable) path of the CLS model."""

    FAST = "fast"
    SLOW = "slow"


class MemoryStatus(StrEnum):
    """Lifecycle state of one version; mirrors the ``memory_status`` database enum."""

    ACTIVE = "active"
    SUPERSEDED = "superseded"
    CONSOLIDATED = "consolidated"
    FORGOTTEN = "forgotten"
    CHALLENGED = "challenged"


class TrustLevel(StrEnum):
    """How far the kernel trusts an agent; read-only agents never write."""

    TRUSTED = "trusted"
    STANDARD = "standard"
    RESTRICTED = "restricted"
    READ_ONLY = "read_only"


class EdgeKind(StrEnum):
    """Typed links between record versions."""

    DERIVED_FROM = "derived_from"
    SUPERSEDES = "supersedes"
    RELATES_TO = "relates_to"
    CONTRADICTS = "contradicts"
    REFINES = "refines"
    SIMILAR_TO = "similar_to"


class SourceKind(StrEnum):
    """How the writer came to know what it writes; sets the default confidence."""

    OBSERVED = "observed"
    TOLD = "told"
    INFERRED = "inferred"

    @property
    def default_confidence(self) -> float:
        """Confidence a record starts with before calibration."""
        return _SOURCE_CONFIDENCE[self]


_SOURCE_CONFIDENCE = {SourceKind.OBSERVED: 0.9, SourceKind.TOLD: 0.75, SourceKind.INFERRED: 0.6}

DEFAULT_NAMESPACE = "default"


def utc_now() -> datetime:
    """The current time, timezone-aware in UTC."""
    return datetime.now(UTC)


class MemoryRecord(BaseModel):
    """One version of a memory record: the envelope every memory type shares.

    A proposal built with :meth:`draft` has no ``gate_decision_id`` yet; the Gate fills it.
    ``event_time`` may be ``None`` on a proposal, meaning "unknown: when the kernel learns it".
    """

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False)

    id: UUID
    record_id: UUID
    type: MemoryType
    content: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    version: int = Field(default=1, ge=1)
    superseded_by: UUID | None = None

    # provenance
    source_agent: str
    source_confidence: float = Field(ge=0.0, le=1.0)
    evidence_links: tuple[UUID, ...] = ()

    # bi-temporal: event time = valid in the world, ingestion time = known to the kernel
    event_time: datetime | None
    event_time_end: datetime | None = None
    ingestion_time: datetime
    ingestion_time_end: datetime | None = None

    # governance
    access_level: AccessLevel = AccessLevel.AGENT
    classification: str | None = None
    gate_decision_id: UUID | None = None
    gate_decision_type: GateDecisionType | None = None
    namespace: str = DEFAULT_NAMESPACE

    # concurrency
    expected_version: int | None = None

    # lifecycle
    status: MemoryStatus = MemoryStatus.ACTIVE
    created_at: datetime
    updated_at: datetime
    decay_score: float = Field(default=1.0, ge=0.0, le=1.0)
    consolidation_path: ConsolidationPath = ConsolidationPath.FAST

    @classmethod
    def draft(
        cls,
        type: MemoryType,  # noqa: A002 - the specification names the field "type"
        content: str,
        *,
        source_agent: str,
        metadata: dict[str, Any] | None = None,
        event_time: datetime | None = None,
        access_level: AccessLevel = AccessLevel.AGENT,
        source_confidence: float | None = None,
        evidence_links: tuple[UUID, ...] | list[UUID] = (),
        namespace: str = DEFAULT_NAMESPACE,
        classification: str | None = None,
        record_id: UUID | None = None,
    ) -> Self:
        """Build a proposal for the Gate, filling ids, version 1 and timestamps.

        Without ``source_confidence`` the record is taken as *told* (0.75), unless its
        metadata names a ``source_kind`` of ``observed`` or ``inferred``.
        """
        now = utc_now()
        meta = dict(metadata or {})
        if source_confidence is None:
            source_confidence = _confidence_from(meta.get("source_kind"))
        version_id = uuid.uuid4()
        return cls(
            id=version_id,
            record_id=record_id or version_id,
            type=type,
            content=content,
            metadata=meta,
            source_agent=source_agent,
            source_confidence=source_confidence,
            evidence_links=tuple(evidence_links),
            event_time=event_time,
            ingestion_time=now,
            access_level=access_level,
            classification=classification,
            namespace=namespace,
            created_at=now,
            updated_at=now,
        )

    @property
    def is_head(self) -> bool:
        """True for the newest version of its record."""
        return self.superseded_by is None


def _confidence_from(source_kind: object) -> float:
    try:
        return SourceKind(str(source_kind)).default_confidence
    except ValueError:
        return SourceKind.TOLD.default_confidence


@dataclass(frozen=True, slots=True)
class CallerIdentity:
    """An authenticated caller as a protocol adapter presents it to the Gate.

    Built by adapters from a verified token; it carries no secret.
    """

    agent_id: str
    trust_level: TrustLevel
    allowed_types: frozenset[MemoryType] = field(default_factory=lambda: frozenset(MemoryType))
    max_write_level: AccessLevel = AccessLevel.USER
    max_read_level: AccessLevel = AccessLevel.USER
    writes_per_minute: float | None = None

    def __post_init__(self) -> None:
        """Refuse an identity of the wrong shape when it is made: in process one may be built
        with anything, and each field decides what its caller may read or write (hostile
        pass R)."""
        if problems := caller_problems(self):
            raise ValidationFailed(errors=problems)

    @property
    def can_write(self) -> bool:
        """Read-only agents never write."""
        return self.trust_level is not TrustLevel.READ_ONLY

    @classmethod
    def system(cls, name: str = "engram") -> CallerIdentity:
        """The identity internal subsystems (consolidation, self-healing) write with."""
        return cls(
            agent_id=f"system:{name}",
            trust_level=TrustLevel.TRUSTED,
            max_write_level=AccessLevel.SENSITIVE,
            max_read_level=AccessLevel.SENSITIVE,
        )


#: The longest agent id an identity may carry: an agent's name is at most 64 characters, and
#: an internal identity's prefix and name (``system:cli:`` and a ``--by`` of 128) fit too.
MAX_AGENT_ID_CHARS = 256


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def caller_problems(caller: CallerIdentity) -> list[str]:
    """What is wrong with an identity's fields (a dataclass checks none of their types)."""
    fields: dict[str, object] = {
        "agent_id": caller.agent_id,
        "trust_level": caller.trust_level,
        "allowed_types": caller.allowed_types,
        "max_write_level": caller.max_write_level,
        "max_read_level": caller.max_read_level,
        "writes_per_minute": caller.writes_per_minute,
    }
    problems = []
    name = fields["agent_id"]
    if not isinstance(name, str) or not 0 < len(name) <= MAX_AGENT_ID_CHARS:
        problems.append(f"agent_id: a name of 1-{MAX_AGENT_ID_CHARS} characters")
    elif "\x00" in name or (not name.isascii() and not _encodes(name)):
        problems.append("agent_id: must not contain NUL characters or lone surrogates")
    if not isinstance(fields["trust_level"], TrustLevel):
        problems.append("trust_level: a TrustLevel")
    types = fields["allowed_types"]
    if not isinstance(types, frozenset) or not all(isinstance(t, MemoryType) for t in types):
        problems.append("allowed_types: a frozenset of MemoryType")
    problems += [
        f"{name}: an AccessLevel"
        for name in ("max_write_level", "max_read_level")
        if not isinstance(fields[name], AccessLevel)
    ]
    rate = fields["writes_per_minute"]
    if rate is not None and (
        isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate < math.inf
    ):
        problems.append("writes_per_minute: a number of writes, at least 0, or None")
    return problems


def readable_levels(caller: CallerIdentity | None) -> list[str]:
    """Access levels a caller may read (all of them for internal reads without a caller).

    Reading is by level alone, and a record a caller may not read is absent for it on every
    path, the Gate's Layer 2 included (ADR-008)."""
    ceiling = AccessLevel.SENSITIVE if caller is None else caller.max_read_level
    return [level.value for level in AccessLevel if ceiling.allows(level)]


def weighed_levels(caller: CallerIdentity | None, level: AccessLevel) -> list[str]:
    """Access levels of the records a proposal stored at ``level`` may cite as evidence:
    those the caller may read that every reader of the proposal may read too (a citation of
    a record above it would show its readers an id they may not read; ADR-008)."""
    return [name for name in readable_levels(caller) if level.allows(AccessLevel(name))]


def can_read(caller: CallerIdentity, record: MemoryRecord) -> bool:
    """True when ``caller`` may read ``record`` (otherwise the record is absent for it)."""
    return caller.max_read_level.allows(record.access_level)


@dataclass(frozen=True, slots=True)
class Neighbour:
    """An active head of the same type and namespace, with its cosine similarity (and how
    many times it was repeated); what the Gate's duplicate and conflict search finds."""

    record: MemoryRecord
    similarity: float
    repetitions: int = 1
