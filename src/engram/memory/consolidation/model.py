"""What the consolidation engine takes and reports: triggers, candidates, batches, reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

# The trigger is part of the envelope's vocabulary (one enum, in engram.memory.types).
from engram.memory.types import AccessLevel, ConsolidationTrigger, MemoryRecord, MemoryType


class ConsolidationAction(StrEnum):
    """What a candidate becomes (specification §5.4)."""

    MERGE = "merge"  # related episodes -> one narrative, in event-time order
    PROMOTE = "promote"  # one observation repeated -> a belief
    SKILL = "skill"  # one procedure repeated -> a skill with steps
    COMPRESS = "compress"  # one verbose record -> the same facts in fewer words


class SkipReason(StrEnum):
    """Why a topic or a record was left as it is (counted in every report)."""

    SINGLETON = "singleton"  # a topic of one record too short to compress
    TOO_FEW = "too_few"  # below the minimum size of its action (or of the trigger)
    NO_EMBEDDING = "no_embedding"  # a degraded write: no topic can be found for it
    NOT_SHORTER = "not_shorter"  # compression would not save enough words
    CONFLICTING = "conflicting"  # sources to promote or join disagree: judged first, not merged
    REJECTED = "rejected"  # the Gate refused a request of the item (audited)
    SOURCE_CHANGED = "source_changed"  # a source moved on during the pass: next run
    QUARANTINED = "quarantined"  # the Gate would hold the summary above its sources' level
    UNDER_LIMIT = "under_limit"  # pressure-driven, but the fast path is within its limit
    TIMED_OUT = "timed_out"  # the pass ran out of time before this batch: next run
    FAILED = "failed"  # the batch's transaction failed (logged); nothing of it was written


@dataclass(frozen=True, slots=True)
class ConsolidationCandidate:
    """One topic the engine would consolidate, with the record it would write."""

    action: ConsolidationAction
    sources: tuple[MemoryRecord, ...]
    proposal_type: MemoryType
    content: str
    metadata: dict[str, Any]
    access_level: AccessLevel
    confidence: float
    summarizer: str

    @property
    def source_ids(self) -> tuple[UUID, ...]:
        """The sources' record ids."""
        return tuple(s.record_id for s in self.sources)

    @property
    def source_words(self) -> int:
        """Words in the sources."""
        return sum(len(s.content.split()) for s in self.sources)

    @property
    def words(self) -> int:
        """Words in the consolidated text."""
        return len(self.content.split())


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One consolidated record of a committed batch and the source versions it consumed."""

    action: ConsolidationAction
    record_id: UUID
    sources: tuple[UUID, ...]  # record ids
    source_versions: tuple[UUID, ...]  # the versions summarised (derived_from targets)

    def to_json(self) -> dict[str, Any]:
        """As stored in ``consolidation_batches.items``."""
        return {
            "action": self.action.value,
            "record_id": str(self.record_id),
            "sources": [str(s) for s in self.sources],
            "source_versions": [str(v) for v in self.source_versions],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchItem:
        """Read back what :meth:`to_json` stored."""
        return cls(
            action=ConsolidationAction(data["action"]),
            record_id=UUID(data["record_id"]),
            sources=tuple(UUID(s) for s in data["sources"]),
            source_versions=tuple(UUID(v) for v in data["source_versions"]),
        )


@dataclass(frozen=True, slots=True)
class BatchReport:
    """One batch: committed in one transaction, or (``committed`` false) nothing of it."""

    batch_id: UUID
    items: tuple[BatchItem, ...]
    skipped: dict[str, int]
    committed: bool
    created_at: datetime | None = None
    trigger: ConsolidationTrigger | None = None
    rolled_back_at: datetime | None = None
    #: The access level of its topics (a batch holds one), when it was just planned.
    level: AccessLevel | None = None

    @property
    def failed(self) -> bool:
        """Whether its transaction failed (its sources wait for the next pass); a batch
        skipped whole or out of time did not fail."""
        return not self.committed and bool(self.skipped.get(SkipReason.FAILED.value))

    @property
    def created(self) -> list[UUID]:
        """The consolidated records the batch created."""
        return [item.record_id for item in self.items]

    @property
    def consumed(self) -> list[UUID]:
        """The source records the batch marked ``consolidated``."""
        return [source for item in self.items for source in item.sources]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready view (CLI and REST)."""
        return {
            "batch_id": str(self.batch_id),
            "trigger": None if self.trigger is None else self.trigger.value,
            "committed": self.committed,
            "created_at": None if self.created_at is None else self.created_at.isoformat(),
            "rolled_back_at": (
                None if self.rolled_back_at is None else self.rolled_back_at.isoformat()
            ),
            "created": [str(r) for r in self.created],
            "consumed": [str(r) for r in self.consumed],
            "items": [item.to_json() for item in self.items],
            "skipped": dict(self.skipped),
        }


@dataclass(frozen=True, slots=True)
class ConsolidationReport:
    """One pass: its batches, and what it left alone and why."""

    run_id: UUID
    trigger: ConsolidationTrigger
    dry_run: bool
    candidates: int
    batches: tuple[BatchReport, ...]
    skipped: dict[str, int]
    duration_seconds: float
    planned: tuple[ConsolidationCandidate, ...] = field(default=())
    #: The access levels the pass read, most open first.
    levels: tuple[AccessLevel, ...] = field(default=())
    #: Levels of which a topic or a batch was left when the pass ran out of time.
    timed_out_levels: tuple[AccessLevel, ...] = field(default=())
    #: Levels whose planning raised in a job's pass (an operator's pass raises instead).
    unplanned_levels: tuple[AccessLevel, ...] = field(default=())

    @property
    def failed_batches(self) -> int:
        """Batches whose transaction failed (their sources stay for the next pass)."""
        return sum(1 for b in self.batches if b.failed)

    @property
    def created(self) -> list[UUID]:
        """Every consolidated record created by the pass."""
        return [r for batch in self.batches if batch.committed for r in batch.created]

    @property
    def consumed(self) -> list[UUID]:
        """Every source consolidated by the pass."""
        return [r for batch in self.batches if batch.committed for r in batch.consumed]

    @property
    def failed_levels(self) -> tuple[AccessLevel, ...]:
        """Levels of which a batch failed, or whose planning did (their sources wait for the
        next pass)."""
        return tuple(
            level
            for level in self.levels
            if level in self.unplanned_levels
            or any(b.level is level and b.failed for b in self.batches)
        )

    @property
    def unfinished_levels(self) -> tuple[AccessLevel, ...]:
        """Levels the pass did not finish (a batch failed, or time ran out): a trigger that
        found them due still finds them due, and runs them again on its next check."""
        left = set(self.failed_levels) | set(self.timed_out_levels)
        return tuple(level for level in self.levels if level in left)

    def consumed_at(self, level: AccessLevel) -> int:
        """Sources of ``level`` the pass consolidated."""
        of_level = {s.record_id for c in self.planned if c.access_level is level for s in c.sources}
        return sum(1 for record_id in self.consumed if record_id in of_level)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready view (CLI ``--json``, REST)."""
        return {
            "run_id": str(self.run_id),
            "trigger": self.trigger.value,
            "dry_run": self.dry_run,
            "levels": [level.value for level in self.levels],
            "candidates": self.candidates,
            "created": len(self.created),
            "consumed": len(self.consumed),
            "skipped": dict(self.skipped),
            "duration_seconds": round(self.duration_seconds, 3),
            "batches": [batch.to_json() for batch in self.batches],
            "planned": [
                {
                    "action": c.action.value,
                    "type": c.proposal_type.value,
                    "sources": [str(s) for s in c.source_ids],
                    "words": c.words,
                    "source_words": c.source_words,
                }
                for c in self.planned
            ],
        }


@dataclass(frozen=True, slots=True)
class RollbackReport:
    """What a rollback did: records retired, sources restored, sources left as they were."""

    batch_id: UUID
    retired: tuple[UUID, ...]
    restored: tuple[UUID, ...]
    untouched: tuple[UUID, ...]

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready view."""
        return {
            "batch_id": str(self.batch_id),
            "retired": [str(r) for r in self.retired],
            "restored": [str(r) for r in self.restored],
            "untouched": [str(r) for r in self.untouched],
        }


@dataclass(frozen=True, slots=True)
class SweepReport:
    """What a sweep for unfinished releases found (sources an agent forgot or changed whose
    summary still stands), and of those the releases it made and the ones that failed."""

    found: int
    released: int
    failed: int
