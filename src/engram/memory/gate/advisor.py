"""Layer 2 of the Gate: soft decisions behind the hot-swappable :class:`GateAdvisor` Protocol.

:class:`HeuristicAdvisor` (rules ``heuristic@2``) makes all five decisions of the
specification:

1. **ADD / UPDATE / NOOP.** A proposal whose normalised content hash equals an active head of
   the same type and namespace is a NOOP that reinforces that record. So is a *near* duplicate:
   cosine similarity at least ``NEAR_DUPLICATE`` (0.95) **and** the same significant words in
   the same order (:func:`~engram.memory.fingerprint.significant_words`: case, plurals and
   articles aside). The second condition matters: the embedding model scores "the deploy
   target is v2.0" and "… v2.1" at 0.98, and "Alice reports to Bob" and "Bob reports to
   Alice" at 0.99; treating either as a duplicate would silently drop a changed fact.
   So is a *restatement* of the closest record (``PLAIN_RESTATEMENT`` 0.85, or
   ``RESTATEMENT`` 0.75 when the conflict classifier sees neither conflict nor added detail),
   in its scope, whose words show nothing new
   (:func:`~engram.memory.conflict.restatement.restates`). Otherwise a record the write
   conflicts with, or else the closest record at or above ``UPDATE_CANDIDATE`` (0.65) in the
   same scope, is reported as an update candidate: the write still adds a record (the Gate
   never merges on its own). A closest record that names a thing the proposal does not,
   while the proposal names one it does not, with neither conflict nor added detail, is
   another thing of the same kind (another region, version, market): no candidate. An
   UPDATE whose content, metadata, access level, namespace, classification and evidence
   equal the current version's is a NOOP.
2. **Conflict classification** through the :class:`~engram.memory.conflict.ConflictResolver`.
3. **Consolidation routing**: flag the record when it has been repeated three times or when it
   has four or more related active records (similarity ≥ 0.70), five with itself.
4. **Confidence calibration**: the source confidence (observed 0.9, told 0.75, inferred 0.6,
   or as given) times the caller's trust factor (trusted 1.0, standard 0.95, restricted 0.85;
   internal origins 1.0), clamped to [0.05, 0.99].
5. **Importance** in [0, 1]:
   ``0.35·type_weight + 0.25·confidence + 0.20·novelty + 0.20·specificity`` where type_weight
   is decision 0.9, skill 0.85, preference 0.8, belief 0.7, entity 0.6, reflection 0.6,
   resource 0.5, episode 0.4; novelty is ``1 - max similarity`` to an existing record; and
   specificity is ``min(1, distinct words / 25)``.

Layer 1 is never overridden by any advisor.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Protocol
from uuid import UUID

from engram.memory.conflict.detection import ConflictResolver, ConflictResult, PairRelation
from engram.memory.conflict.restatement import names_other_things
from engram.memory.fingerprint import significant_words
from engram.memory.gate.access import merge_denial
from engram.memory.rl.features import advice_features, features_json
from engram.memory.types import (
    CallerIdentity,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    Neighbour,
    TrustLevel,
)

NEAR_DUPLICATE = 0.95
UPDATE_CANDIDATE = 0.65
RESTATEMENT = 0.75
PLAIN_RESTATEMENT = 0.85
RELATED = 0.70
#: Probability of refinement (from the conflict classifier) above which a proposal adds detail.
REFINES = 0.5
RELATED_FOR_CONSOLIDATION = 4
REPETITIONS_FOR_CONSOLIDATION = 3

TRUST_FACTOR = {
    TrustLevel.TRUSTED: 1.0,
    TrustLevel.STANDARD: 0.95,
    TrustLevel.RESTRICTED: 0.85,
    TrustLevel.READ_ONLY: 0.0,
}
TYPE_WEIGHT = {
    MemoryType.DECISION: 0.9,
    MemoryType.SKILL: 0.85,
    MemoryType.PREFERENCE: 0.8,
    MemoryType.BELIEF: 0.7,
    MemoryType.ENTITY: 0.6,
    MemoryType.REFLECTION: 0.6,
    MemoryType.RESOURCE: 0.5,
    MemoryType.EPISODE: 0.4,
}
_WORD = re.compile(r"\w+")


@dataclass(frozen=True, slots=True)
class HeuristicPolicy:
    """The thresholds of ``heuristic@2``; the defaults are the documented rules.

    Only audit replay builds a non-default policy (to ask what another policy would have
    decided); an advisor with one reports its source as ``heuristic@2+policy``.
    """

    near_duplicate: float = NEAR_DUPLICATE
    update_candidate: float = UPDATE_CANDIDATE
    restatement: float = RESTATEMENT
    plain_restatement: float = PLAIN_RESTATEMENT
    related: float = RELATED
    related_for_consolidation: int = RELATED_FOR_CONSOLIDATION
    repetitions_for_consolidation: int = REPETITIONS_FOR_CONSOLIDATION
    trust_factor: Mapping[TrustLevel, float] = field(default_factory=lambda: dict(TRUST_FACTOR))


class AdvisorAction(StrEnum):
    """Store as new, as a new version, or not at all."""

    ADD = "ADD"
    UPDATE = "UPDATE"
    NOOP = "NOOP"


@dataclass(frozen=True, slots=True)
class AdvisorContext:
    """What the Gate knows about the proposal's surroundings when Layer 2 runs."""

    action: GateAction
    decision_type: GateDecisionType
    caller: CallerIdentity
    head: MemoryRecord | None = None
    exact_duplicate: Neighbour | None = None
    #: Neighbours every reader of the proposal may read (at or below its level): the only
    #: ones its duplicate, restatement, merge, importance and routing are decided by.
    neighbours: tuple[Neighbour, ...] = ()
    embedded: bool = True
    #: Neighbours the caller may read above the proposal's level: looked at for conflicts
    #: only, whose resolution may change them but never the proposal (ADR-008).
    above: tuple[Neighbour, ...] = ()


@dataclass(frozen=True, slots=True)
class AdvisorDecision:
    """Layer 2's advice; logged in the audit row whatever the final decision."""

    action: AdvisorAction
    confidence: float
    importance: float
    rationale: str
    source: str
    target_record_id: UUID | None = None
    update_candidate_of: UUID | None = None
    conflicts: tuple[ConflictResult, ...] = field(default_factory=tuple)
    route_to_consolidation: bool = False
    #: what the advisor saw (:mod:`engram.memory.rl.features`); outside CREATEs only
    features: tuple[float, ...] | None = None
    #: the nearest record the features describe (a training outcome compares against it)
    nearest_record_id: UUID | None = None
    #: whether the access rules let this write merge into that record
    #: (:func:`~engram.memory.gate.access.merge_denial`); the state vector cannot say it
    merge_allowed: bool = False
    #: a shadow advisor's advice on the same write, recorded but not acted on (ADR-020)
    shadow: Mapping[str, Any] | None = None

    def to_json(self, *, audit: bool = False) -> dict[str, Any]:
        """A JSON-ready form; ``audit`` adds what only the audit log keeps (the state the
        advisor saw and a shadow's advice: training data, not part of a caller's answer)."""
        extra: dict[str, Any] = {}
        if audit and self.features is not None:
            extra["features"] = features_json(
                self.features, self.nearest_record_id, merge_allowed=self.merge_allowed
            )
        if audit and self.shadow is not None:
            extra["shadow"] = dict(self.shadow)
        return {
            **extra,
            "action": self.action.value,
            "confidence": round(self.confidence, 6),
            "importance": round(self.importance, 6),
            "rationale": self.rationale,
            "source": self.source,
            "target_record_id": _str(self.target_record_id),
            "update_candidate_of": _str(self.update_candidate_of),
            "route_to_consolidation": self.route_to_consolidation,
            "conflicts": [
                {
                    "classification": c.classification.value,
                    "existing_record_id": str(c.existing_record_id),
                    "existing_version_id": str(c.existing_version_id),
                    "similarity": round(c.similarity, 6),
                    "reason": c.reason,
                }
                for c in self.conflicts
            ],
        }


def _str(value: UUID | None) -> str | None:
    return None if value is None else str(value)


class GateAdvisor(Protocol):
    """Layer 2 soft-decision advisor."""

    @property
    def version(self) -> str:
        """Rule set or model version, recorded as the decision source."""
        ...

    async def advise(self, record: MemoryRecord, context: AdvisorContext) -> AdvisorDecision:
        """Advise on one proposal."""
        ...


def calibrate_confidence(
    record: MemoryRecord,
    context: AdvisorContext,
    trust_factor: Mapping[TrustLevel, float] = TRUST_FACTOR,
) -> float:
    """Source confidence adjusted by the caller's trust (internal origins are trusted)."""
    factor = (
        trust_factor[context.caller.trust_level]
        if context.decision_type is GateDecisionType.EXTERNAL
        else 1.0
    )
    return min(0.99, max(0.05, record.source_confidence * factor))


def importance(record: MemoryRecord, confidence: float, max_similarity: float) -> float:
    """The documented importance score in [0, 1]."""
    specificity = min(1.0, len({w.casefold() for w in _WORD.findall(record.content)}) / 25)
    novelty = 1.0 - max(0.0, min(1.0, max_similarity))
    score = (
        0.35 * TYPE_WEIGHT[record.type] + 0.25 * confidence + 0.20 * novelty + 0.20 * specificity
    )
    return round(min(1.0, max(0.0, score)), 6)


class HeuristicAdvisor:
    """Versioned rules (``heuristic@2``)."""

    def __init__(self, resolver: ConflictResolver, policy: HeuristicPolicy | None = None) -> None:
        self._resolver = resolver
        self._policy = policy or HeuristicPolicy()
        self._version = "heuristic@2" if self._policy == HeuristicPolicy() else "heuristic@2+policy"

    @property
    def version(self) -> str:
        return self._version

    async def advise(self, record: MemoryRecord, context: AdvisorContext) -> AdvisorDecision:
        if context.decision_type is GateDecisionType.CONSOLIDATION:
            return self._consolidation(record, context)
        policy = self._policy
        confidence = calibrate_confidence(record, context, policy.trust_factor)
        others = [n for n in context.neighbours if n.record.record_id != record.record_id]
        # Novelty is against the other records: the record's own head is what a new version
        # replaces, and may be one its readers may not read (hostile pass AK).
        closest = max((n.similarity for n in others), default=0.0)
        score = importance(record, confidence, closest)
        above = [n for n in context.above if n.record.record_id != record.record_id]
        # judged apart: records above the proposal's level never take the places of its own
        # readers' records among those judged (ADR-008)
        conflicts: tuple[ConflictResult, ...] = ()
        for judged in (others, above) if above else (others,):
            conflicts += tuple(
                await self._resolver.detect(
                    record,
                    [n.record for n in judged],
                    similarities={n.record.id: n.similarity for n in judged},
                )
            )
        # What decides the proposal's own fate (its action, update candidate and the learned
        # advisor's features) are the conflicts with records its readers may read; those with
        # a record above its level are kept for linking and resolution only (ADR-008).
        own_ids = {n.record.record_id for n in others}
        own_conflicts = tuple(c for c in conflicts if c.existing_record_id in own_ids)
        related = sum(1 for n in others if n.similarity >= policy.related)
        route = related >= policy.related_for_consolidation

        def decide(action: AdvisorAction, rationale: str, **extra: Any) -> AdvisorDecision:
            repeated = bool(extra.pop("repeated", False))
            return AdvisorDecision(
                action=action,
                confidence=confidence,
                importance=score,
                rationale=rationale,
                source=self.version,
                conflicts=extra.pop("conflicts", conflicts),
                route_to_consolidation=route or repeated,
                **extra,
            )

        if context.action is GateAction.UPDATE:
            head = context.head
            # A self-healing write states exactly what it means: a validity reopened or a
            # status restored to active is a change (ADR-010, 2026-11-28).
            exact = context.decision_type is GateDecisionType.SELF_HEALING
            if head is not None and _unchanged(head, record, exact_status=exact, exact_end=exact):
                return decide(
                    AdvisorAction.NOOP,
                    "content and metadata equal the current version",
                    target_record_id=head.record_id,
                )
            return decide(AdvisorAction.UPDATE, "a new version of the record")

        nearest = max(others, key=lambda n: n.similarity, default=None)
        relation = (
            None
            if nearest is None
            else self._resolver.relation(nearest.record, record, nearest.similarity)
        )
        near = None if context.exact_duplicate else self._near_duplicate(record, others)
        duplicate = (context.exact_duplicate, "exact") if context.exact_duplicate else None
        if near is not None:
            duplicate = (near, "near")
        decision = self._create(
            record,
            others=others,
            duplicate=duplicate,
            nearest=nearest,
            relation=relation,
            conflicts=own_conflicts,
            decide=decide,
        )
        if context.decision_type is not GateDecisionType.EXTERNAL:
            return decision  # only an agent's writes are the learned advisor's to decide
        values = advice_features(
            record,
            decision_type=context.decision_type,
            trust=context.caller.trust_level,
            neighbours=others,
            exact_duplicate=context.exact_duplicate is not None,
            near_duplicate=near is not None,
            relation=relation,
            conflicts=own_conflicts,
            heuristic_noop=decision.action is AdvisorAction.NOOP,
        )
        return replace(
            decision,
            features=values,
            nearest_record_id=None if nearest is None else nearest.record.record_id,
            merge_allowed=nearest is not None
            and merge_denial(context.caller, record, nearest.record) is None,
        )

    def _near_duplicate(self, record: MemoryRecord, others: list[Neighbour]) -> Neighbour | None:
        """The closest neighbour at ``near_duplicate`` or more with the same significant words."""
        words = significant_words(record.content)
        near = [
            n
            for n in others
            if n.similarity >= self._policy.near_duplicate
            and significant_words(n.record.content) == words
        ]
        return max(near, key=lambda n: n.similarity) if near else None

    def _create(
        self,
        record: MemoryRecord,
        *,
        others: list[Neighbour],
        duplicate: tuple[Neighbour, str] | None,
        nearest: Neighbour | None,
        relation: PairRelation | None,
        conflicts: tuple[ConflictResult, ...],
        decide: Callable[..., AdvisorDecision],
    ) -> AdvisorDecision:
        """The rules for a new record: duplicate, restatement, conflict or plain ADD."""
        policy = self._policy
        if duplicate is not None:
            same, how = duplicate
            return decide(
                AdvisorAction.NOOP,
                f"{how} duplicate of an active record (similarity {same.similarity:.3f})",
                target_record_id=same.record.record_id,
                repeated=same.repetitions + 1 >= policy.repetitions_for_consolidation,
            )
        if nearest is None or nearest.similarity < policy.update_candidate:
            return decide(AdvisorAction.ADD, "new record")
        conflicting = {c.existing_record_id for c in conflicts}
        if (
            relation is not None
            and relation.restates
            and _one_moment(nearest.record, record)
            and (
                nearest.similarity >= policy.plain_restatement
                or (
                    nearest.similarity >= policy.restatement
                    and nearest.record.record_id not in conflicting
                    and relation.refines < REFINES
                )
            )
        ):
            # the classifier takes some paraphrases for incompatible claims; this close, and
            # with no new value, name, negation, opposite, swapped slot or change word, the
            # words say it is the same claim, so no conflict with it is reported either. Less
            # close, its conflict still counts: "prefers tea in the morning" / "in the mornings
            # usually drinks coffee" passes every word test (hostile pass G)
            target = nearest.record.record_id
            return decide(
                AdvisorAction.NOOP,
                f"restates an active record (similarity {nearest.similarity:.3f})",
                target_record_id=target,
                repeated=nearest.repetitions + 1 >= policy.repetitions_for_consolidation,
                conflicts=tuple(c for c in conflicts if c.existing_record_id != target),
            )
        challenged = [n for n in others if n.record.record_id in conflicting]
        if challenged:
            # the write stays, and names the record it changes
            best = max(challenged, key=lambda n: n.similarity)
            return decide(
                AdvisorAction.ADD,
                f"new record; in conflict with an existing one ({best.similarity:.3f}): "
                "update candidate",
                update_candidate_of=best.record.record_id,
            )
        if relation is None or (
            relation.refines < REFINES and names_other_things(nearest.record, record)
        ):
            # another scope, or another thing of the same kind named on each side (another
            # region, version, market) with nothing incompatible: a related but distinct fact
            return decide(AdvisorAction.ADD, "new record; its closest is about something else")
        return decide(
            AdvisorAction.ADD,
            f"new record; close to an existing one ({nearest.similarity:.3f}): update candidate",
            update_candidate_of=nearest.record.record_id,
        )

    def _consolidation(self, record: MemoryRecord, context: AdvisorContext) -> AdvisorDecision:
        """A consolidation write (ADR-018): its sources were judged against their neighbours
        when they were written, so neither duplicates nor conflicts are looked for again. A
        summary is added (importance as for a record with no close neighbour); a source's
        status change is a new version, and an UPDATE that changes nothing is a NOOP."""
        confidence = calibrate_confidence(record, context, self._policy.trust_factor)
        score = importance(record, confidence, 0.0)

        def decide(
            action: AdvisorAction, rationale: str, target: UUID | None = None
        ) -> AdvisorDecision:
            return AdvisorDecision(
                action=action,
                confidence=confidence,
                importance=score,
                rationale=rationale,
                source=self.version,
                target_record_id=target,
            )

        if context.action is GateAction.CREATE:
            return decide(
                AdvisorAction.ADD, f"consolidated from {len(record.evidence_links)} sources"
            )
        head = context.head
        if head is not None and _unchanged(head, record, exact_status=True):
            return decide(AdvisorAction.NOOP, "the version already says this", head.record_id)
        return decide(AdvisorAction.UPDATE, "a consolidation status change")


def _one_moment(old: MemoryRecord, new: MemoryRecord) -> bool:
    """Two records that can restate each other: an episode is a moment, so only an account of
    the same instant restates it ("the ETL ran late again today" is another occurrence)."""
    if MemoryType.EPISODE not in (old.type, new.type):
        return True
    return old.event_time is not None and old.event_time == new.event_time


def _unchanged(
    head: MemoryRecord,
    proposal: MemoryRecord,
    *,
    exact_status: bool = False,
    exact_end: bool = False,
) -> bool:
    """The proposal restates the head: same content, metadata, access level, namespace,
    classification and evidence, and no new event times (a proposal without event times
    leaves them as they are). A change of who may read it is a change (a new version). A
    proposal's ``active`` status restates any status unless ``exact_status`` (consolidation
    says the status it means: restoring a consolidated source to active is a change); with
    ``exact_end`` a proposal without a validity end reopens an ended one (a self-healing
    restatement copies the head, so what it leaves out it means)."""
    fields = ("content", "metadata", "access_level", "namespace", "classification")
    return (
        all(getattr(head, name) == getattr(proposal, name) for name in fields)
        and set(head.evidence_links) == set(proposal.evidence_links)
        and proposal.event_time in (None, head.event_time)
        and (
            proposal.event_time_end == head.event_time_end
            or (not exact_end and proposal.event_time_end is None)
        )
        and (
            proposal.status is head.status
            or (not exact_status and proposal.status is MemoryStatus.ACTIVE)
        )
    )
