"""The Gate's Layer 2 advisor (engram.memory.gate.advisor): actions, confidence, importance."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engram.memory.conflict.detection import ConflictDetector
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.advisor import (
    AdvisorAction,
    AdvisorContext,
    HeuristicAdvisor,
    calibrate_confidence,
    importance,
)
from engram.memory.types import (
    CallerIdentity,
    ConflictClassification,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    Neighbour,
    TrustLevel,
)

EXTERNAL = GateDecisionType.EXTERNAL


STANDARD = caller_for_tier("a", TrustLevel.STANDARD)


def belief(text: str, **fields: object) -> MemoryRecord:
    """Return a draft belief from agent a with the given content and fields."""
    return MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="a", **fields)  # type: ignore[arg-type]


def _neighbour(text: str, similarity: float, **fields: object) -> Neighbour:
    return Neighbour(belief(text, **fields), similarity)


async def test_advisor_noops_on_a_near_duplicate_with_the_same_words() -> None:
    """High similarity with the same significant words reinforces the existing record."""
    advisor = HeuristicAdvisor(ConflictDetector())
    existing = _neighbour("The staging database is restored from backups nightly.", 0.99)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(existing,))
    decision = await advisor.advise(
        belief("The staging database is restored from backup nightly."), context
    )
    assert AdvisorAction.NOOP == decision.action
    assert existing.record.record_id == decision.target_record_id


async def test_advisor_adds_a_changed_value_and_flags_an_update_candidate() -> None:
    """A changed number at 0.98 similarity is a new record, never a NOOP."""
    advisor = HeuristicAdvisor(ConflictDetector())
    existing = _neighbour("The deploy target is v2.0.", 0.98)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(existing,))
    decision = await advisor.advise(belief("The deploy target is v2.1."), context)
    assert AdvisorAction.ADD == decision.action
    assert existing.record.record_id == decision.update_candidate_of
    assert [ConflictClassification.SUPERSESSION] == [c.classification for c in decision.conflicts]


async def _advice(existing: Neighbour, text: str) -> tuple[AdvisorAction, object, object]:
    advisor = HeuristicAdvisor(ConflictDetector())
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(existing,))
    decision = await advisor.advise(belief(text), context)
    return decision.action, decision.target_record_id, decision.update_candidate_of


async def test_advisor_noops_on_a_close_paraphrase_that_adds_nothing() -> None:
    """Other words for the same claim (no new value, name, negation or change word) at high
    similarity reinforce the existing record instead of storing a second copy."""
    existing = _neighbour(
        "DHL Express, the carrier for all international parcels under 30 kg.", 0.89
    )
    advisor = HeuristicAdvisor(ConflictDetector())
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(existing,))
    decision = await advisor.advise(
        belief("DHL Express is our carrier for international parcels below 30 kg."), context
    )
    assert AdvisorAction.NOOP == decision.action
    assert existing.record.record_id == decision.target_record_id
    # judged the same claim: no conflict with it is reported
    assert all(c.existing_record_id != decision.target_record_id for c in decision.conflicts)


@pytest.mark.parametrize(
    ("stored", "proposed"),
    [
        # another name in the same slot
        (
            "Calle Mayor 14, our apartment building in Madrid; building manager Ines Vidal.",
            "Calle Mayor 14 in Madrid, our apartment building; the building manager is Pablo Sanz.",
        ),
        # another region code
        (
            "Kubernetes clusters in us-east-1 run version 1.28.",
            "Kubernetes clusters in eu-west-1 run version 1.28.",
        ),
        # a negation
        (
            "The nightly export includes archived accounts.",
            "The nightly export does not include archived accounts.",
        ),
        # another subject in the same sentence
        (
            "The restricted agent's ledger runs on PostgreSQL 16.",
            "The standard agent's ledger runs on PostgreSQL 16.",
        ),
        # a word of change
        ("Invoices are approved in Coupa.", "Invoices are now approved in Ramp instead of Coupa."),
    ],
)
async def test_advisor_never_noops_a_proposal_that_says_something_new(
    stored: str, proposed: str
) -> None:
    """A NOOP drops the proposal, so anything new in it keeps it: the write is added, at most
    naming the stored record as an update candidate."""
    existing = _neighbour(stored, 0.93)
    action, _, candidate = await _advice(existing, proposed)
    assert AdvisorAction.ADD == action
    assert candidate in (None, existing.record.record_id)


async def test_an_episode_is_restated_only_by_an_account_of_the_same_instant() -> None:
    """ "The ETL ran late again" an hour later is another occurrence, not a restatement."""
    advisor = HeuristicAdvisor(ConflictDetector())

    def late(text: str, hour: int) -> MemoryRecord:
        return MemoryRecord.draft(
            MemoryType.EPISODE,
            text,
            source_agent="a",
            event_time=datetime(2026, 3, 2, hour, tzinfo=UTC),
        )

    stored = Neighbour(late("The nightly orders ETL finished late, past its deadline.", 6), 0.93)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(stored,))
    later = await advisor.advise(
        late("The nightly orders ETL finished late past its deadline.", 7), context
    )
    same = await advisor.advise(
        late("The nightly orders ETL finished late past its deadline.", 6), context
    )
    assert AdvisorAction.ADD == later.action
    assert AdvisorAction.NOOP == same.action


async def test_advisor_adds_a_fact_of_another_scope_without_a_candidate() -> None:
    """A close record about another environment is a related but distinct fact."""
    existing = _neighbour("The feature flag is enabled in staging.", 0.9)
    action, _, candidate = await _advice(existing, "The feature flag is disabled in production.")
    assert (AdvisorAction.ADD, None) == (action, candidate)


@pytest.mark.parametrize(
    ("stored", "proposed"),
    [
        (
            "Kubernetes clusters in us-east-1 run version 1.28.",
            "Kubernetes clusters in eu-west-1 run version 1.28.",
        ),
        ("Model card for the fraud model v7.", "Model card for the fraud model v8."),
    ],
)
async def test_another_thing_of_the_same_kind_is_added_without_a_candidate(
    stored: str, proposed: str
) -> None:
    """Each side names something the other does not (another region, another model version)
    and nothing is incompatible: a related but distinct fact, added with no update
    candidate."""
    action, _, candidate = await _advice(_neighbour(stored, 0.9), proposed)
    assert (AdvisorAction.ADD, None) == (action, candidate)


async def test_a_changed_name_the_classifier_finds_incompatible_stays_a_candidate() -> None:
    """The same slot given another person ("is Ines Vidal" / "is now Pablo Sanz") is a change
    of the stored record: it stays its update candidate."""
    existing = _neighbour("The building manager of Calle Mayor 14 is Ines Vidal.", 0.9)
    action, _, candidate = await _advice(
        existing, "The building manager of Calle Mayor 14 is now Pablo Sanz."
    )
    assert (AdvisorAction.ADD, existing.record.record_id) == (action, candidate)


async def test_advisor_routes_repeated_and_clustered_records_to_consolidation() -> None:
    """A third repetition, or four related records, flags consolidation."""
    advisor = HeuristicAdvisor(ConflictDetector())
    repeated = Neighbour(belief("Standups start at nine."), 1.0, repetitions=2)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, exact_duplicate=repeated)
    assert (await advisor.advise(belief("Standups start at nine"), context)).route_to_consolidation
    cluster = tuple(_neighbour(f"Incident {n} hit the ledger.", 0.75) for n in range(4))
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=cluster)
    decision = await advisor.advise(belief("Incident 9 hit the ledger."), context)
    assert (AdvisorAction.ADD, True) == (decision.action, decision.route_to_consolidation)


def test_confidence_is_calibrated_by_trust_and_clamped() -> None:
    """Told by a restricted agent: 0.75 * 0.85; internal origins keep the source confidence."""
    record = belief("x is y.")
    restricted = caller_for_tier("r", TrustLevel.RESTRICTED)
    external = AdvisorContext(GateAction.CREATE, EXTERNAL, restricted)
    internal = AdvisorContext(GateAction.CREATE, GateDecisionType.CONSOLIDATION, restricted)
    assert 0.6375 == pytest.approx(calibrate_confidence(record, external))
    assert 0.75 == calibrate_confidence(record, internal)
    assert 0.99 == calibrate_confidence(belief("x is y.", source_confidence=1.0), internal)


def test_importance_follows_its_formula() -> None:
    """Importance = 0.35·type + 0.25·confidence + 0.20·novelty + 0.20·specificity."""
    record = MemoryRecord.draft(
        MemoryType.DECISION, "one two three four five", source_agent="a",
        metadata={"rationale": "r"},
    )  # fmt: skip
    expected = 0.35 * 0.9 + 0.25 * 0.8 + 0.20 * (1 - 0.5) + 0.20 * (5 / 25)
    assert expected == pytest.approx(importance(record, 0.8, 0.5))


async def test_a_repeated_duplicate_in_a_busy_neighbourhood_is_routed_once() -> None:
    """A NOOP that is both the third repetition and among four related records is routed to
    consolidation (both reasons at once must not break the decision)."""
    advisor = HeuristicAdvisor(ConflictDetector())
    text = "The staging database is restored from backups nightly."
    same = Neighbour(belief(text), 0.99, repetitions=2)
    crowd = tuple(_neighbour(f"The staging database {w} nightly.", 0.8) for w in "abcd")
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(same, *crowd))
    decision = await advisor.advise(
        belief("The staging database is restored from backup nightly."), context
    )
    assert AdvisorAction.NOOP == decision.action
    assert decision.route_to_consolidation


async def test_records_above_the_proposals_level_do_not_crowd_out_its_own_conflicts() -> None:
    """The conflict judgement reads the few most similar records it is given. Records above
    the proposal's level (a trusted writer's sensitive notes, more alike than its own
    records) are judged apart, so the supersession of the proposal's own record, which
    decides its update candidate, is still found."""
    advisor = HeuristicAdvisor(ConflictDetector())
    own = _neighbour("The deploy target is v2.0.", 0.90)
    above = tuple(
        _neighbour(f"The deploy target is v2.1 (sensitive note {n}).", 0.99 - n / 100)
        for n in range(4)
    )
    trusted = caller_for_tier("boss", TrustLevel.TRUSTED)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, trusted, neighbours=(own,), above=above)
    decision = await advisor.advise(belief("The deploy target is v2.1."), context)
    assert own.record.record_id == decision.update_candidate_of
    found = {c.existing_record_id: c.classification for c in decision.conflicts}
    assert ConflictClassification.SUPERSESSION == found[own.record.record_id]


@pytest.mark.parametrize(
    ("decision_type", "expected"),
    [
        (GateDecisionType.EXTERNAL, AdvisorAction.NOOP),
        (GateDecisionType.SELF_HEALING, AdvisorAction.UPDATE),
    ],
)
async def test_a_self_healing_update_means_the_validity_and_status_it_states(
    decision_type: GateDecisionType, expected: AdvisorAction
) -> None:
    """An agent's UPDATE that leaves out a validity end, or says ``active``, over an ended and
    challenged head restates it (a NOOP); a self-healing restatement means them, so it
    reopens the validity and restores the status (a new version)."""
    head = belief("The deploy target is v2.0.").model_copy(
        update={
            "event_time_end": datetime(2025, 4, 10, tzinfo=UTC),
            "status": MemoryStatus.CHALLENGED,
        }
    )
    caller = STANDARD if decision_type is EXTERNAL else CallerIdentity.system("conflict-resolver")
    context = AdvisorContext(GateAction.UPDATE, decision_type, caller, head=head)
    proposal = head.model_copy(update={"event_time_end": None, "status": MemoryStatus.ACTIVE})
    decision = await HeuristicAdvisor(ConflictDetector()).advise(proposal, context)
    assert expected == decision.action
