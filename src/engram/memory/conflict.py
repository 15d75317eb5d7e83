"""Conflict detection between a proposed record and existing records of the same type.

This is the basic, same-subject detector the Gate's Layer 2 uses: it classifies a pair as a
contradiction, supersession, refinement or unresolvable conflict from lexical cues (negation,
changed values, added detail) and the embedding similarity the Gate already computed. It
records what it finds; acting on it (closing intervals, linking edges, escalating) is the
resolver's job.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from engram.memory.types import ConflictClassification, MemoryRecord

_WORD = re.compile(r"[a-z0-9]+(?:[._'-][a-z0-9]+)*")
_NEGATION = frozenset(
    {"not", "no", "never", "isn't", "aren't", "doesn't", "don't", "won't", "cannot", "can't",
     "without", "longer", "nobody", "none", "neither"}
)  # fmt: skip
_NUMBER = re.compile(r"\d+(?:\.\d+)*")
_STOP = frozenset(
    {"the", "a", "an", "is", "are", "was", "were", "be", "to", "of", "and", "or", "in", "on",
     "for", "with", "at", "by", "it", "this", "that", "uses", "use"}
)  # fmt: skip

#: Embedding similarity above which two records of one type are taken to be about one subject.
SAME_SUBJECT_SIMILARITY = 0.75


@dataclass(frozen=True, slots=True)
class ConflictResult:
    """A conflict between the proposed record and one existing record."""

    classification: ConflictClassification
    existing_record_id: UUID
    existing_version_id: UUID
    similarity: float
    reason: str


@dataclass(frozen=True, slots=True)
class ResolutionResult:
    """What resolving a conflict did (or would do)."""

    conflict: ConflictResult
    action: str
    escalated: bool


class ConflictResolver(Protocol):
    """Detects and resolves conflicts; the Gate calls :meth:`detect` in Layer 2."""

    async def detect(
        self,
        record: MemoryRecord,
        existing: Sequence[MemoryRecord],
        *,
        similarities: Mapping[UUID, float] | None = None,
    ) -> list[ConflictResult]:
        """Conflicts between ``record`` and each of ``existing`` (keyed by version id)."""
        ...

    async def resolve(self, conflict: ConflictResult) -> ResolutionResult:
        """Decide what to do about one conflict."""
        ...


def subject_of(record: MemoryRecord) -> str | None:
    """The subject a record names explicitly (preference subject, entity name), lowercased."""
    for key in ("subject", "name"):
        value = record.metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip().casefold()
    return None


def _tokens(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in _STOP}


def _negated(text: str) -> bool:
    return bool(_tokens(text) & _NEGATION) or "n't" in text.casefold()


class SubjectConflictDetector:
    """Basic detection: same subject (explicit, or by similarity) plus lexical cues."""

    async def detect(
        self,
        record: MemoryRecord,
        existing: Sequence[MemoryRecord],
        *,
        similarities: Mapping[UUID, float] | None = None,
    ) -> list[ConflictResult]:
        found = []
        for other in existing:
            if other.record_id == record.record_id or other.type is not record.type:
                continue
            similarity = (similarities or {}).get(other.id, 0.0)
            result = self._classify(record, other, similarity)
            if result is not None:
                found.append(result)
        return found

    async def resolve(self, conflict: ConflictResult) -> ResolutionResult:
        escalate = conflict.classification is ConflictClassification.UNRESOLVABLE
        return ResolutionResult(conflict=conflict, action="recorded", escalated=escalate)

    def _classify(
        self, new: MemoryRecord, old: MemoryRecord, similarity: float
    ) -> ConflictResult | None:
        new_subject, old_subject = subject_of(new), subject_of(old)
        same_subject = (
            new_subject == old_subject
            if new_subject is not None and old_subject is not None
            else similarity >= SAME_SUBJECT_SIMILARITY
        )
        if not same_subject:
            return None
        new_tokens, old_tokens = _tokens(new.content), _tokens(old.content)
        if new_tokens == old_tokens:
            return None

        def result(kind: ConflictClassification, reason: str) -> ConflictResult:
            return ConflictResult(kind, old.record_id, old.id, similarity, reason)

        if _negated(new.content) != _negated(old.content):
            return result(ConflictClassification.CONTRADICTION, "one statement negates the other")
        if old_tokens < new_tokens:
            return result(ConflictClassification.REFINEMENT, "adds detail to the older record")
        new_numbers = set(_NUMBER.findall(new.content))
        old_numbers = set(_NUMBER.findall(old.content))
        if new_numbers and old_numbers and new_numbers != old_numbers:
            newer = (new.event_time or new.ingestion_time) >= (old.event_time or old.ingestion_time)
            if newer and new.source_confidence >= old.source_confidence:
                return result(ConflictClassification.SUPERSESSION, "a newer value of the same fact")
            return result(
                ConflictClassification.UNRESOLVABLE, "changed value, but not newer and as sure"
            )
        if new_subject is not None and new_subject == old_subject:
            return result(ConflictClassification.CONTRADICTION, "different claims on one subject")
        return None
