"""Pure logic of the Gate: rate limits, the access matrix, fingerprints, Layer 1 and Layer 2."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from engram.memory.conflict.detection import SubjectConflictDetector
from engram.memory.fingerprint import content_hash, normalise, significant_tokens
from engram.memory.gate.access import caller_for_tier, write_denial
from engram.memory.gate.advisor import (
    AdvisorAction,
    AdvisorContext,
    HeuristicAdvisor,
    calibrate_confidence,
    importance,
)
from engram.memory.gate.checks import Layer1Input, run_layer1
from engram.memory.gate.rate_limit import RateLimiter
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    ConflictClassification,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    Neighbour,
    TrustLevel,
)

EXTERNAL = GateDecisionType.EXTERNAL
STANDARD = caller_for_tier("a", TrustLevel.STANDARD)


def belief(text: str, **fields: object) -> MemoryRecord:
    """Return a draft belief from agent a with the given content and fields."""
    return MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="a", **fields)  # type: ignore[arg-type]


class Clock:
    """A hand-driven monotonic clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_allows_a_burst_then_refills_over_time() -> None:
    """A bucket of rate 60/min and burst 12 allows 12 writes, then one per second."""
    clock = Clock()
    limiter = RateLimiter(clock)
    allowed = [limiter.acquire("x", TrustLevel.STANDARD, 60).allowed for _ in range(13)]
    assert [True] * 12 + [False] == allowed
    refused = limiter.acquire("x", TrustLevel.STANDARD, 60)
    assert 0.9 < refused.retry_after_seconds <= 1.0
    clock.now += 1.0
    assert limiter.acquire("x", TrustLevel.STANDARD, 60).allowed
    assert limiter.acquire("other", TrustLevel.STANDARD, 60).allowed


def test_tier_defaults_apply_without_an_override_and_read_only_never_writes() -> None:
    """Without its own rate an agent gets its tier's; read-only agents get none at all."""
    limiter = RateLimiter(Clock())
    burst = sum(limiter.acquire("r", TrustLevel.RESTRICTED, None).allowed for _ in range(20))
    assert 10 == burst
    refused = limiter.acquire("ro", TrustLevel.READ_ONLY, None)
    assert not refused.allowed


@pytest.mark.parametrize(
    ("trust", "memory_type", "level", "allowed"),
    [
        (TrustLevel.TRUSTED, MemoryType.DECISION, AccessLevel.SENSITIVE, True),
        (TrustLevel.STANDARD, MemoryType.DECISION, AccessLevel.USER, True),
        (TrustLevel.STANDARD, MemoryType.BELIEF, AccessLevel.SYSTEM, False),
        (TrustLevel.RESTRICTED, MemoryType.EPISODE, AccessLevel.AGENT, True),
        (TrustLevel.RESTRICTED, MemoryType.EPISODE, AccessLevel.USER, False),
        (TrustLevel.RESTRICTED, MemoryType.SKILL, AccessLevel.PUBLIC, False),
        (TrustLevel.READ_ONLY, MemoryType.BELIEF, AccessLevel.PUBLIC, False),
    ],
)
def test_access_matrix(
    trust: TrustLevel, memory_type: MemoryType, level: AccessLevel, allowed: bool
) -> None:
    """Each tier writes exactly the types and levels of the matrix in ADR-008."""
    caller = caller_for_tier("c", trust)
    record = MemoryRecord.draft(memory_type, "x", source_agent="c", access_level=level)
    assert allowed == (write_denial(caller, record) is None)


def test_narrowing_never_widens_a_tier() -> None:
    """A restricted caller claiming sensitive clearance still writes only up to agent."""
    caller = replace(
        caller_for_tier("c", TrustLevel.RESTRICTED), max_write_level=AccessLevel.SENSITIVE
    )
    record = belief("x is y.", access_level=AccessLevel.USER)
    assert "up to access level agent" in (write_denial(caller, record) or "")


def test_fingerprints_ignore_case_spacing_and_final_punctuation() -> None:
    """Normalisation makes trivial variants equal, and only those."""
    assert normalise("The  Ledger\tis UP!") == normalise("the ledger is up")
    assert content_hash("A b.") == content_hash("a   B")
    assert content_hash("a b") != content_hash("a c")
    assert 32 == len(content_hash("x"))


def test_significant_tokens_keep_values_and_drop_plural_endings() -> None:
    """Versions and numbers stay distinct; articles and plural endings do not matter."""
    assert significant_tokens("The deploy target is v2.0") != significant_tokens(
        "The deploy target is v2.1"
    )
    assert significant_tokens("restored from backups") == significant_tokens(
        "restored from the backup"
    )


def _layer1(record: MemoryRecord, **fields: object) -> object:
    data: dict[str, object] = {
        "action": GateAction.CREATE,
        "record": record,
        "caller": STANDARD,
        "decision_type": EXTERNAL,
        "expected_version": None,
        "head": None,
    }
    data.update(fields)
    return run_layer1(Layer1Input(**data), RateLimiter(Clock()))  # type: ignore[arg-type]


def test_layer1_quarantine_changes_level_and_records_kinds_only() -> None:
    """A PII hit returns a sensitive copy of the record that names kinds, not values."""
    outcome = _layer1(belief("Reach the owner at lena.fischer@example-mail.de about it."))
    assert outcome.passed  # type: ignore[attr-defined]
    assert AccessLevel.SENSITIVE == outcome.record.access_level  # type: ignore[attr-defined]
    assert {"kinds": ["email"], "detector": "regex@1"} == outcome.record.metadata["pii"]  # type: ignore[attr-defined]


def test_layer1_internal_origins_skip_access_and_rate() -> None:
    """Internal origins report access and rate limiting as not applied."""
    outcome = _layer1(
        belief("Summaries are rebuilt nightly."),
        caller=CallerIdentity("ro", TrustLevel.READ_ONLY),
        decision_type=GateDecisionType.CONSOLIDATION,
    )
    details = {c.name: c.detail for c in outcome.checks}  # type: ignore[attr-defined]
    assert "not applied to internal origins" == details["access"] == details["rate_limit"]


def _neighbour(text: str, similarity: float, **fields: object) -> Neighbour:
    return Neighbour(belief(text, **fields), similarity)


async def test_advisor_noops_on_a_near_duplicate_with_the_same_words() -> None:
    """High similarity with the same significant words reinforces the existing record."""
    advisor = HeuristicAdvisor(SubjectConflictDetector())
    existing = _neighbour("The staging database is restored from backups nightly.", 0.99)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(existing,))
    decision = await advisor.advise(
        belief("The staging database is restored from backup nightly."), context
    )
    assert AdvisorAction.NOOP == decision.action
    assert existing.record.record_id == decision.target_record_id


async def test_advisor_adds_a_changed_value_and_flags_an_update_candidate() -> None:
    """A changed number at 0.98 similarity is a new record, never a NOOP."""
    advisor = HeuristicAdvisor(SubjectConflictDetector())
    existing = _neighbour("The deploy target is v2.0.", 0.98)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(existing,))
    decision = await advisor.advise(belief("The deploy target is v2.1."), context)
    assert AdvisorAction.ADD == decision.action
    assert existing.record.record_id == decision.update_candidate_of
    assert [ConflictClassification.SUPERSESSION] == [c.classification for c in decision.conflicts]


async def test_advisor_routes_repeated_and_clustered_records_to_consolidation() -> None:
    """A third repetition, or four related records, flags consolidation."""
    advisor = HeuristicAdvisor(SubjectConflictDetector())
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


async def test_conflict_detector_classifies_by_cue() -> None:
    """Negation is a contradiction; added detail a refinement; a weaker change unresolvable."""
    detector = SubjectConflictDetector()
    old = belief("Payments are settled nightly.")
    sims = {old.id: 0.85}
    negated = await detector.detect(
        belief("Payments are not settled nightly."), [old], similarities=sims
    )
    refined = await detector.detect(
        belief("Payments are settled nightly by the ledger job."), [old], similarities=sims
    )
    base = belief("The cache TTL is 60 seconds.", event_time=datetime.now(UTC))
    older_weaker = belief(
        "The cache TTL is 90 seconds.",
        event_time=datetime.now(UTC) - timedelta(days=3),
        source_confidence=0.5,
    )
    unresolved = await detector.detect(older_weaker, [base], similarities={base.id: 0.97})
    unrelated = await detector.detect(
        belief("Cats sleep a lot."), [old], similarities={old.id: 0.1}
    )
    assert [ConflictClassification.CONTRADICTION] == [c.classification for c in negated]
    assert [ConflictClassification.REFINEMENT] == [c.classification for c in refined]
    assert [ConflictClassification.UNRESOLVABLE] == [c.classification for c in unresolved]
    assert [] == unrelated
    assert uuid.UUID(str(old.record_id)) == negated[0].existing_record_id
