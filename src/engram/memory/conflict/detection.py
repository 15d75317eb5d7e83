"""Conflict judgement between a proposed record and existing records of the same type.

The one judgement the Gate's Layer 2, conflict resolution, consolidation, the evaluation
and outside callers (``kernel.conflicts.detect``) share. It records what it finds; acting on
it (closing intervals, linking edges, escalating) is the resolver's job (ADR-010).

**Contract** (docs/gate.md):

- *supersession*: the newer record says the world changed (a word of change, a higher version
  of a versioned thing) and its event time is later, and it is no less confident;
- *contradiction*: both cannot be true of one subject, nothing says the world changed, and one
  side is better supported (source confidence at least ``SUPPORT_MARGIN`` apart);
- *unresolvable*: incompatible claims with nothing to prefer one, or a change whose time or
  confidence leaves doubt: a person decides;
- *refinement*: the newer adds compatible detail;
- no conflict: unrelated, or compatible because the scope differs.

**How.** Scope first (:mod:`engram.memory.conflict.scope`): records of another type or
namespace, explicit subjects that differ (``metadata.subject`` / ``metadata.name``),
different deployment environments, records less similar than ``REPORTED_SIMILARITY`` and
episodes more than ``EPISODE_WINDOW`` apart that say nothing changed are never in conflict;
a later occurrence of an episode is never acted on. Then a trained classifier
(:mod:`engram.memory.conflict.model`, features in :mod:`engram.memory.conflict.features`)
says whether the two statements are incompatible, a refinement or neither. Time order,
confidence and change language are not learned: the documented rules above turn an
incompatibility into one of the three conflict classes. Retiring or challenging a true fact
is the worst error, so no conflict is reported below ``CONFLICT_MIN``, contradiction needs
``DECISIVE`` and supersession ``SUPERSEDE``; a change short of that is escalated as
unresolvable, never acted on. Records of several sentences are compared claim by claim
(:mod:`engram.memory.conflict.sentences`): the pair takes the answer of its two most
incompatible facing sentences. Two episodes that share no value (time, date,
number) and say nothing changed are two moments of one story, never incompatible.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from engram.infra.embeddings import EmbeddingAdapter
from engram.memory.conflict.cues import (
    compare,
    is_value,
    statement_tokens,
)
from engram.memory.conflict.features import change_language, pair_features
from engram.memory.conflict.model import PairModel, packaged_model
from engram.memory.conflict.quantities import amount_word, same_amounts
from engram.memory.conflict.restatement import restates
from engram.memory.conflict.scope import (
    COMPARED_WORDS,
    REPORTED_SIMILARITY,
    later_occurrence,
    out_of_scope,
    scope_differs,
    unanchored_episodes,
)
from engram.memory.conflict.sentences import facing_statements
from engram.memory.types import ConflictClassification, MemoryRecord, MemoryType

#: How many of the given records, the most similar first, are judged: a fact a new record
#: changes or contradicts is among its closest; the rest are other facts of the neighbourhood.
JUDGED = 3
#: Probability of incompatibility from which a conflict is reported at all.
CONFLICT_MIN = 0.6
#: Probability of incompatibility needed before a record may be retired or challenged.
DECISIVE = 0.6
#: Probability of incompatibility needed to end the older record: the one irreversible-looking
#: act (its validity closes), so it asks for more than a challenge does.
SUPERSEDE = 0.7
#: Share of the older statement's words a newer one keeps (in order) to still state it.
RESTATED_WORDS = 0.8
#: Source confidences this far apart make one side of an incompatibility better supported.
SUPPORT_MARGIN = 0.1
#: Words by which a statement says something carries on unchanged.
_CARRIES_ON = re.compile(
    r"\b(?:still|remains?|remained|continues? to|continued to|as before|unchanged)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class ConflictResult:
    """A conflict between the proposed record and one existing record."""

    classification: ConflictClassification
    existing_record_id: UUID
    existing_version_id: UUID
    similarity: float
    reason: str


@dataclass(frozen=True, slots=True)
class PairRelation:
    """How a proposal stands to one record of its scope, for callers that weigh it
    themselves (the advisor's ADD / UPDATE / NOOP)."""

    incompatible: float  # the classifier's probability that both cannot be true
    refines: float  # … that the newer adds compatible detail
    restates: bool  # nothing in the newer is new (engram.memory.conflict.restatement)


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

    def relation(
        self, old: MemoryRecord, new: MemoryRecord, similarity: float
    ) -> PairRelation | None:
        """How ``new`` stands to ``old``; None when the scope differs or they are unrelated."""
        ...


#: The classes that end or challenge a record; the others link or escalate.
_ACTED_ON = (ConflictClassification.SUPERSESSION, ConflictClassification.CONTRADICTION)
#: What resolving each class does (carried out by the Gate, see engram.memory.gate.resolution).
RESOLUTIONS = {
    ConflictClassification.SUPERSESSION: "link supersedes; end the older record's validity",
    ConflictClassification.CONTRADICTION: "link contradicts; mark both records challenged",
    ConflictClassification.REFINEMENT: "link refines",
    ConflictClassification.UNRESOLVABLE: "link relates_to; escalate to a person",
}


def _is_newer(new: MemoryRecord, old: MemoryRecord) -> bool:
    """New by event time (ingestion time where unknown); equal event times by ingestion."""
    new_time, old_time = new.event_time or new.ingestion_time, old.event_time or old.ingestion_time
    if new_time == old_time:
        return new.ingestion_time > old.ingestion_time
    return new_time > old_time


def _restates(old: MemoryRecord, new: MemoryRecord) -> bool:
    """The newer keeps the older statement's words with nothing swapped or negated: whatever
    change it reports is about something else, so it cannot end the older record."""
    diff = compare(old.content, new.content)
    changed = diff.other_change or diff.negation_flipped or diff.value_changed or diff.antonym
    return diff.kept >= RESTATED_WORDS and not changed


def _affirms(old: MemoryRecord, new: MemoryRecord) -> bool:
    """The newer says something carries on as it was ("still", "remains", "continues to",
    "as before"), which the older does not: "stretches are still held 30 seconds, and a
    foam-roller step is new" reports an addition, so it cannot end the older record."""
    return bool(_CARRIES_ON.search(new.content)) and not _CARRIES_ON.search(old.content)


def _better_supported(new: MemoryRecord, old: MemoryRecord) -> bool:
    return abs(new.source_confidence - old.source_confidence) >= SUPPORT_MARGIN - 1e-9


def _finite(similarity: float) -> float:
    """A cosine similarity clamped to [-1, 1]; anything not a number counts as unrelated."""
    return max(-1.0, min(1.0, similarity)) if math.isfinite(similarity) else 0.0


#: The two claims found most incompatible in a pair, and the classifier's answer for them.
_Found = tuple[MemoryRecord, MemoryRecord, dict[str, float]]
#: How many judged pairs a detector remembers (a write judges three, then the advisor asks).
RECENT_PAIRS = 256


@dataclass(frozen=True, slots=True)
class _Judged:
    """A judged pair, holding its records so their identities stay theirs while cached."""

    old: MemoryRecord
    new: MemoryRecord
    found: _Found | None


#: A pair judged when a detector is made, so the first write does not pay for loading the
#: lexicon and compiling what the features need (about 50 ms once per process; the Gate's
#: readiness probe allows 200 ms).
_WARM_UP = ("The warm-up service runs on port 8080.", "The warm-up service runs on 9090.")


def _claims(old: MemoryRecord, new: MemoryRecord) -> list[tuple[MemoryRecord, MemoryRecord]]:
    """The claims of the two records that face each other: the records themselves when both
    are single statements, else the sentences paired by
    :func:`~engram.memory.conflict.sentences.facing_statements`, as one-sentence records."""
    facing = facing_statements(old.content, new.content, min_overlap=COMPARED_WORDS)
    if facing is None:
        return [(old, new)]
    return [
        (old.model_copy(update={"content": o}), new.model_copy(update={"content": n}))
        for o, n in facing
    ]


def _cosine(left: Sequence[float], right: Sequence[float]) -> float:
    return float(sum(a * b for a, b in zip(left, right, strict=True)))


class ConflictDetector:
    """Scope rules, a trained incompatibility classifier, then the documented class rules.

    ``embeddings`` is used only by callers that pass no ``similarities`` (outside callers of
    ``kernel.conflicts.detect``); the Gate always passes the similarities it has.
    """

    def __init__(
        self, model: PairModel | None = None, *, embeddings: EmbeddingAdapter | None = None
    ) -> None:
        self._model = model or packaged_model()
        self._embeddings = embeddings
        # the last pairs judged, by the identity of their two records: the advisor asks for
        # the relation of a pair detect() has just judged (bounded, newest last)
        self._recent: OrderedDict[tuple[int, int, float], _Judged] = OrderedDict()
        older, newer = (
            MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="engram-warm-up")
            for text in _WARM_UP
        )
        self.judge(older, newer, 0.9)
        self._recent.clear()

    @property
    def version(self) -> str:
        """The classifier version, recorded in the reason of every conflict."""
        return self._model.version

    async def detect(
        self,
        record: MemoryRecord,
        existing: Sequence[MemoryRecord],
        *,
        similarities: Mapping[UUID, float] | None = None,
    ) -> list[ConflictResult]:
        """Conflicts between ``record`` and the ``JUDGED`` most similar of ``existing``
        (similarities by version id)."""
        others = [
            other
            for other in existing
            if other.record_id != record.record_id
            and other.type is record.type
            and other.namespace == record.namespace
        ]
        known = {k: _finite(v) for k, v in (similarities or {}).items()}
        missing = [o for o in others if o.id not in known]
        if missing and self._embeddings is not None:
            vectors = await self._embeddings.embed_batch(
                [record.content, *(o.content for o in missing)]
            )
            for other, vector in zip(missing, vectors[1:], strict=True):
                known[other.id] = _cosine(vectors[0], vector)
        nearest = sorted(others, key=lambda o: known.get(o.id, 0.0), reverse=True)[:JUDGED]
        pairs = [(other, record, known.get(other.id, 0.0)) for other in nearest]
        judged = zip(pairs, self._probabilities_of(pairs), strict=True)
        return [
            result
            for (_, _, similarity), found in judged
            if found is not None and (result := self._classify(*found, similarity)) is not None
        ]

    def judge(
        self, old: MemoryRecord, new: MemoryRecord, similarity: float
    ) -> ConflictResult | None:
        """The conflict between one existing record and the proposal, if there is one."""
        (found,) = self._probabilities_of([(old, new, similarity)])
        return None if found is None else self._classify(*found, similarity)

    def _classify(
        self, old: MemoryRecord, new: MemoryRecord, p: Mapping[str, float], similarity: float
    ) -> ConflictResult | None:
        """The documented class rules over the classifier's distribution for the claims
        ``old`` and ``new`` (the records themselves, or one sentence of each)."""
        incompatible = p["conflict"]

        def result(kind: ConflictClassification, reason: str) -> ConflictResult:
            if kind in _ACTED_ON and later_occurrence(new, old):
                kind = ConflictClassification.UNRESOLVABLE
                reason = f"{reason}, but in another occurrence of an episode"
            return ConflictResult(
                kind, old.record_id, old.id, similarity, f"{reason} ({self.version})"
            )

        if incompatible >= CONFLICT_MIN and incompatible >= max(p.values()):
            if similarity < REPORTED_SIMILARITY:
                return None  # neighbours in a store, not two statements of one fact
            sure = incompatible >= DECISIVE
            if change_language(old, new):
                doubts = [
                    doubt
                    for doubt, present in (
                        ("the classifier is not sure", incompatible < SUPERSEDE),
                        ("the newer still states the older claim", _restates(old, new)),
                        ("the newer says the older still holds", _affirms(old, new)),
                        ("the new record is not newer", not _is_newer(new, old)),
                        ("it is less confident", new.source_confidence < old.source_confidence),
                    )
                    if present
                ]
                if not doubts:
                    return result(ConflictClassification.SUPERSESSION, "the world changed")
                return result(
                    ConflictClassification.UNRESOLVABLE, f"a change, but {'; '.join(doubts)}"
                )
            if sure and _better_supported(new, old):
                return result(
                    ConflictClassification.CONTRADICTION,
                    "incompatible claims; one is better supported",
                )
            reason = "nothing prefers either claim" if sure else "possibly incompatible claims"
            return result(ConflictClassification.UNRESOLVABLE, reason)
        if p["refinement"] >= max(p.values()):
            return result(ConflictClassification.REFINEMENT, "adds compatible detail")
        return None

    def incompatibility(self, old: MemoryRecord, new: MemoryRecord, similarity: float) -> float:
        """How likely the two statements cannot both be true (0 when the scope differs):
        the classifier's answer before the class rules, for callers that weigh it
        themselves (consolidation refuses to join sources above ``DECISIVE``)."""
        (found,) = self._probabilities_of([(old, new, similarity)])
        return 0.0 if found is None else found[2]["conflict"]

    def relation(
        self, old: MemoryRecord, new: MemoryRecord, similarity: float
    ) -> PairRelation | None:
        """How ``new`` stands to ``old``; None when the scope differs or they are unrelated."""
        (found,) = self._probabilities_of([(old, new, similarity)])
        if found is None:
            return None
        p = found[2]
        return PairRelation(p["conflict"], p["refinement"], restates(old, new))

    def _probabilities_of(
        self, pairs: Sequence[tuple[MemoryRecord, MemoryRecord, float]]
    ) -> list[_Found | None]:
        """For each (older, newer, similarity): the two claims found most incompatible and the
        classifier's distribution for them, all pairs in one pass over its trees; None where
        scope rules or distance settle the pair.

        A claim is a record's whole statement, or one sentence of a record that says several
        things: records of several sentences are compared claim by claim
        (:func:`~engram.memory.conflict.sentences.facing_statements`), so a neighbour that
        shares a topic but no claim is not in conflict, however close the two are as wholes.
        """
        found: list[_Found | None] = [None] * len(pairs)
        units: list[tuple[MemoryRecord, MemoryRecord, float]] = []
        owners: list[int] = []
        fresh: list[int] = []
        for index, (old, new, given) in enumerate(pairs):
            similarity = _finite(given)
            known = self._recent.get((id(old), id(new), similarity))
            if known is not None and known.old is old and known.new is new:
                found[index] = known.found
                continue
            fresh.append(index)
            if out_of_scope(old, new, similarity):
                continue
            for claim_old, claim_new in _claims(old, new):
                if not scope_differs(claim_new, claim_old):
                    units.append((claim_old, claim_new, similarity))
                    owners.append(index)
        answers = self._model.probabilities_of([pair_features(*unit) for unit in units])
        for (old, new, _), owner, answer in zip(units, owners, answers, strict=True):
            p = answer
            if self._restated_amounts(old, new) or unanchored_episodes(old, new):
                # "24 hours" / "one day": the same amount, said another way; or two moments of
                # one story: compatible, though the newer may still refine the older
                p = {**p, "conflict": 0.0}
            best = found[owner]
            if best is None or p["conflict"] > best[2]["conflict"]:
                found[owner] = (old, new, p)
        for index in fresh:
            old, new, given = pairs[index]
            self._recent[(id(old), id(new), _finite(given))] = _Judged(old, new, found[index])
            if len(self._recent) > RECENT_PAIRS:
                self._recent.popitem(last=False)
        return found

    @staticmethod
    def _restated_amounts(old: MemoryRecord, new: MemoryRecord) -> bool:
        """The same amounts written another way ("24 hours" / "one day"), and no other value
        changed. Amounts written alike on both sides are only a shared anchor: "1:1s on
        Tuesdays" / "on Thursdays", "6 December at Osteria Lupa" / "at Sakura House" are
        judged on what else differs."""
        if not same_amounts(old.content, new.content):
            return False
        old_words, new_words = (
            set(statement_tokens(old.content)),
            set(statement_tokens(new.content)),
        )
        rewritten = {t for t in old_words ^ new_words if is_value(t) or amount_word(t)}
        if not rewritten or not all(map(amount_word, rewritten)):
            return False
        diff = compare(old.content, new.content)
        return not (diff.negation_flipped or diff.antonym)

    async def resolve(self, conflict: ConflictResult) -> ResolutionResult:
        """The resolution the Gate carries out for this class (ADR-010)."""
        return ResolutionResult(
            conflict=conflict,
            action=RESOLUTIONS[conflict.classification],
            escalated=conflict.classification is ConflictClassification.UNRESOLVABLE,
        )
