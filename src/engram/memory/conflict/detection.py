"""Conflict detection between a proposed record and existing records of the same type.

This is the basic, same-subject detector the Gate's Layer 2 uses. It records what it finds;
acting on it (closing intervals, linking edges, escalating) is the resolver's job. No model is
asked anything: the rules use lexical cues (:mod:`engram.memory.conflict.cues`), the explicit
subject of the record, event times, confidences and the embedding similarity the Gate has
already computed.

**Same subject.** Only records of the same type and namespace are compared. Where both name
an explicit subject (``metadata.subject`` of a preference, ``metadata.name`` of an entity, see
:func:`subject_of`), different subjects never conflict. Otherwise the pair must be close:
cosine similarity at least ``SAME_SUBJECT_SIMILARITY``, or at least ``RELATED_SIMILARITY``
with ``SHARED_WORDS`` of the two statements' words in common, in order. Statements whose
grammatical subjects differ ("the staging database …" / "the analytics database …"), whose
scope differs ("… for the web team" / "… for the data team"), and episodes more than
``EPISODE_WINDOW`` apart (two occurrences, not two accounts of one) never conflict.

**Classes**, checked in this order:

1. *Change of value*: a number, version, date, weekday or frequency replaced by another, a
   moved ``metadata.locator``, a word saying one statement replaces the other ("switched
   to", "instead of", "no longer", "moved"), or an exclusive claim dated "now". It is a
   **supersession** only when the subject is certain (explicit; similarity at least
   ``SAME_SUBJECT_SIMILARITY``; or the newer keeps ``RESTATED_WORDS`` of the older's words),
   the new record is newer (``event_time``, else ``ingestion_time``; equal times are ordered
   by ingestion) and its confidence is at least the older one's. Otherwise it is
   **unresolvable** and goes to a person. A changed value that comes with another swapped
   word group ("Node 20 for the frontend" / "Go 1.22 for the backend") is another fact.
2. *Exclusive claim* that does not present itself as a change: a negation added or removed
   inside the claim (not in an appended clause), an antonym (enabled/disabled, before/after,
   passing/failing), the same words in another order, or exactly one word group after the
   verb swapped for another ("uses JWT" / "uses session cookies", "prefers tabs" / "prefers
   spaces"): **contradiction**. Verbs whose object takes many values ("supports",
   "includes"), additions marked "also" and a changed relation ("on the plan" / "in Denver")
   are not exclusive.
3. *Added detail*: the newer statement keeps the older one's words and adds more:
   **refinement**.
4. Anything else (a restatement, less detail, a compatible fact) is no conflict.

So a true fact is never retired on weak evidence: refinements and unrelated pairs never reach
rule 1, and rule 1 escalates instead of superseding whenever time, confidence or the subject
leave doubt. The rules were tuned on ``tests/data/conflict_pairs.jsonl``
(``benchmarks/conflict_eval.py`` measures them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol
from uuid import UUID

from engram.memory.conflict.cues import compare, word_overlap
from engram.memory.types import ConflictClassification, MemoryRecord, MemoryType

#: Embedding similarity above which two records of one type are taken to be about one subject.
SAME_SUBJECT_SIMILARITY = 0.75
#: Lower similarity that still counts when the two statements share most of their words.
RELATED_SIMILARITY = 0.5
#: Words the two statements share, over the words of both, for a lower similarity to count.
SHARED_WORDS = 0.5
#: Share of the older statement's words that makes the newer a restatement of it.
RESTATED_WORDS = 0.8
#: Below this share of distinct shared words two statements are not compared at all: no pair of
#: the labelled set that is a conflict shares less than 0.3 (``benchmarks/conflict_eval.py``),
#: while two unrelated texts of the benchmark generator share about 0.24 (median).
COMPARED_WORDS = 0.25
#: Episodes further apart than this are two occurrences, not two accounts of one.
EPISODE_WINDOW = timedelta(hours=12)


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


#: What resolving each class does (carried out by the Gate, see engram.memory.gate.resolution).
RESOLUTIONS = {
    ConflictClassification.SUPERSESSION: "link supersedes; end the older record's validity",
    ConflictClassification.CONTRADICTION: "link contradicts; mark both records challenged",
    ConflictClassification.REFINEMENT: "link refines",
    ConflictClassification.UNRESOLVABLE: "link relates_to; escalate to a person",
}


def subject_of(record: MemoryRecord) -> str | None:
    """The subject a record names explicitly (preference subject, entity name), lowercased."""
    for key in ("subject", "name"):
        value = record.metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip().casefold()
    return None


def _locator(record: MemoryRecord) -> str | None:
    value = record.metadata.get("locator")
    return value.strip() if isinstance(value, str) else None


def _is_newer(new: MemoryRecord, old: MemoryRecord) -> bool:
    """New by event time (ingestion time where unknown); equal event times by ingestion."""
    new_time, old_time = new.event_time or new.ingestion_time, old.event_time or old.ingestion_time
    if new_time == old_time:
        return new.ingestion_time > old.ingestion_time
    return new_time > old_time


def _other_occurrence(new: MemoryRecord, old: MemoryRecord) -> bool:
    if new.type is not MemoryType.EPISODE or new.event_time is None or old.event_time is None:
        return False
    return abs(new.event_time - old.event_time) > EPISODE_WINDOW


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
            if (
                other.record_id == record.record_id
                or other.type is not record.type
                or other.namespace != record.namespace
            ):
                continue
            similarity = (similarities or {}).get(other.id, 0.0)
            result = self._classify(record, other, similarity)
            if result is not None:
                found.append(result)
        return found

    async def resolve(self, conflict: ConflictResult) -> ResolutionResult:
        """The resolution the Gate carries out for this class (ADR-010)."""
        return ResolutionResult(
            conflict=conflict,
            action=RESOLUTIONS[conflict.classification],
            escalated=conflict.classification is ConflictClassification.UNRESOLVABLE,
        )

    def _classify(
        self, new: MemoryRecord, old: MemoryRecord, similarity: float
    ) -> ConflictResult | None:
        new_subject, old_subject = subject_of(new), subject_of(old)
        explicit = new_subject is not None and old_subject is not None
        if (
            (explicit and new_subject != old_subject)
            or _other_occurrence(new, old)
            # neither certain nor related whatever the words say: spare the parse
            or (not explicit and similarity < RELATED_SIMILARITY)
            or word_overlap(old.content, new.content) < COMPARED_WORDS
        ):
            return None
        diff = compare(old.content, new.content)
        moved = None not in (_locator(new), _locator(old)) and _locator(new) != _locator(old)
        if (diff.same_words and not moved) or diff.subject_changed:
            return None
        related = similarity >= RELATED_SIMILARITY and diff.overlap >= SHARED_WORDS
        certain = (
            explicit
            or similarity >= SAME_SUBJECT_SIMILARITY
            or (related and diff.kept >= RESTATED_WORDS)
        )
        if not (certain or related):
            return None

        def result(kind: ConflictClassification, reason: str) -> ConflictResult:
            return ConflictResult(kind, old.record_id, old.id, similarity, reason)

        exclusive = diff.negation_flipped or diff.antonym or diff.alternative
        replaced = diff.change_marker and diff.overlap >= SHARED_WORDS
        if diff.value_changed or moved or replaced or (exclusive and diff.dated):
            if diff.value_changed and diff.other_change and not replaced:
                return None
            doubts = [
                doubt
                for doubt, present in (
                    ("the subject is not certain", not certain),
                    ("the new record is not newer", not _is_newer(new, old)),
                    ("it is less confident", new.source_confidence < old.source_confidence),
                )
                if present
            ]
            if doubts:
                return result(
                    ConflictClassification.UNRESOLVABLE, f"a changed value, but {'; '.join(doubts)}"
                )
            return result(ConflictClassification.SUPERSESSION, "a newer value of the same fact")
        if diff.negation_flipped:
            return result(ConflictClassification.CONTRADICTION, "one statement negates the other")
        if exclusive:
            return result(ConflictClassification.CONTRADICTION, "mutually exclusive claims")
        if diff.adds_detail:
            return result(ConflictClassification.REFINEMENT, "adds detail to the older record")
        return None
