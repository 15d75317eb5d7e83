"""The learned advisor: state features, policy, reward, GRPO, and the Gate's RL and shadow
advisors (engram.memory.rl, engram.memory.gate.learned)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.errors import ValidationFailed
from engram.memory.conflict.detection import ConflictDetector
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.advisor import (
    AdvisorAction,
    AdvisorContext,
    AdvisorDecision,
    HeuristicAdvisor,
)
from engram.memory.gate.learned import RLAdvisor, ShadowAdvisor
from engram.memory.rl.features import (
    FEATURE_COUNT,
    FEATURE_NAMES,
    MAX_LOOKUP_PARTS,
    WholeWords,
    features_from_json,
    features_json,
    mentions,
)
from engram.memory.rl.grpo import GRPOConfig, train_grpo
from engram.memory.rl.policy import (
    ACTIONS,
    MERGE_FLOOR,
    MERGE_MIN_INCOMPATIBLE,
    AdvisorPolicy,
    allowed_actions,
)
from engram.memory.rl.reward import (
    LOSS_WEIGHT,
    NOT_USEFUL_COST,
    STORE_COST,
    Outcome,
    RewardModel,
    TrainingExample,
    reward_table,
)
from engram.memory.rl.training import train_policy
from engram.memory.types import (
    AccessLevel,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    Neighbour,
    TrustLevel,
)

EXTERNAL = GateDecisionType.EXTERNAL
STANDARD = caller_for_tier("a", TrustLevel.STANDARD)
F = {name: i for i, name in enumerate(FEATURE_NAMES)}


def belief(text: str) -> MemoryRecord:
    """A draft belief from agent a."""
    return MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="a")


def state(**values: float) -> tuple[float, ...]:
    """A state vector of a standard agent's belief, zero but for ``values``."""
    row = [0.0] * FEATURE_COUNT
    row[F["type_belief"]] = 1.0
    row[F["trust_standard"]] = 1.0
    for name, value in values.items():
        row[F[name]] = value
    return tuple(row)


# --- features ------------------------------------------------------------------------------


async def test_heuristic_records_the_state_it_saw_for_an_outside_create() -> None:
    """Every CREATE from an agent carries a full, bounded state vector into the audit JSON."""
    advisor = HeuristicAdvisor(ConflictDetector())
    existing = Neighbour(belief("The staging database is restored from backups nightly."), 0.99)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(existing,))
    decision = await advisor.advise(
        belief("The staging database is restored from backup nightly."), context
    )
    assert decision.features is not None
    assert FEATURE_COUNT == len(decision.features)
    assert all(0.0 <= v <= 1.0 for v in decision.features)
    assert 1.0 == decision.features[F["near_duplicate"]]
    assert 1.0 == decision.features[F["heuristic_noop"]]
    assert 0.99 == decision.features[F["closest"]]
    recorded = decision.to_json(audit=True)["features"]
    assert "features" not in decision.to_json()  # the caller's answer does not carry it
    assert decision.features == features_from_json(recorded)


async def test_marks_tell_a_new_value_from_the_same_one_in_other_words() -> None:
    """A host the nearest does not name is a new mark; the same host in other words keeps
    every mark; a change word is seen."""
    advisor = HeuristicAdvisor(ConflictDetector())
    existing = Neighbour(belief("The billing API runs on db-7.internal in the main cluster."), 0.8)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(existing,))

    async def marks_of(text: str) -> tuple[float, float, float]:
        features = (await advisor.advise(belief(text), context)).features
        assert features is not None
        return tuple(features[F[n]] for n in ("new_marks", "kept_marks", "change_words"))  # type: ignore[return-value]

    assert (0.0, 1.0, 0.0) == await marks_of("All billing API traffic is served by db-7.internal.")
    moved = await marks_of("The billing API moved from db-7.internal to db-9.internal.")
    assert (1.0, 1.0, 1.0) == moved
    old_url = "https://grafana.example/d/m4y3a9/billing"
    dashboard = Neighbour(belief(f"The billing API dashboard is {old_url}."), 0.8)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(dashboard,))
    new_url = "https://grafana.example/d/htqayp/billing"
    rebuilt = f"The billing API got a rebuilt dashboard at {new_url}; {old_url} is gone."
    features = (await advisor.advise(belief(rebuilt), context)).features
    assert features is not None
    assert 1.0 == features[F["new_marks"]]  # a new URL is a new mark, letters only or not


async def test_updates_and_internal_writes_record_no_state() -> None:
    """The policy decides outside CREATEs only, so only they are training data."""
    advisor = HeuristicAdvisor(ConflictDetector())
    context = AdvisorContext(GateAction.UPDATE, EXTERNAL, STANDARD)
    decision = await advisor.advise(belief("The build uses Bazel."), context)
    assert decision.features is None
    assert "features" not in decision.to_json()


def test_features_of_another_schema_are_not_read() -> None:
    """A row written under another feature schema is not training data."""
    data = features_json(state())
    assert features_from_json({**data, "schema": "advisor-features@0"}) is None
    assert features_from_json({"schema": data["schema"], "values": {"closest": 1}}) is None


# --- policy --------------------------------------------------------------------------------


def test_policy_round_trips_and_pins_its_digest() -> None:
    """A stored policy scores as before, and any change of weight changes its digest."""
    rng = np.random.default_rng(1)
    policy = AdvisorPolicy("rl@1", rng.normal(size=(3, FEATURE_COUNT)), rng.normal(size=3))
    again = AdvisorPolicy.from_json(policy.to_json())
    assert policy.digest() == again.digest()
    x = np.asarray([state(closest=0.9)])
    assert np.allclose(policy.probabilities(x), again.probabilities(x), atol=1e-6)
    changed = policy.to_json()
    changed["bias"] = [0.0, 0.0, 0.0]
    assert AdvisorPolicy.from_json(changed).digest() != policy.digest()


def test_a_policy_trained_before_update_existed_loads_and_never_merges() -> None:
    """A stored two-action model (ADD, NOOP) keeps its digest and gives UPDATE no chance,
    however the mask reads."""
    rng = np.random.default_rng(2)
    old = AdvisorPolicy(
        "rl@1", rng.normal(size=(2, FEATURE_COUNT)), rng.normal(size=2), ("ADD", "NOOP")
    )
    data = old.to_json()
    assert ["ADD", "NOOP"] == data["actions"]
    loaded = AdvisorPolicy.from_json(data)
    assert old.digest() == loaded.digest()
    x = np.asarray([state(closest=0.9)] * 2)
    p = loaded.probabilities(x, np.ones((2, 3)))
    assert np.all(p[:, ACTIONS.index("UPDATE")] == 0)
    assert np.allclose(p.sum(axis=1), 1.0)
    with pytest.raises(ValidationFailed):
        AdvisorPolicy.from_json({**data, "actions": ["NOOP", "ADD"]})


def test_policy_of_another_schema_or_shape_is_refused() -> None:
    """A policy fitted to other features, of the wrong shape or not finite is refused."""
    data = AdvisorPolicy.zeros("rl@1").to_json()
    with pytest.raises(ValidationFailed):
        AdvisorPolicy.from_json({**data, "schema": "advisor-features@0"})
    with pytest.raises(ValidationFailed):
        AdvisorPolicy("rl@1", np.zeros((2, FEATURE_COUNT)), np.zeros(2))
    with pytest.raises(ValidationFailed):
        AdvisorPolicy("rl@1", np.full((3, FEATURE_COUNT), np.nan), np.zeros(3))


def test_allowed_actions_keep_duplicates_out_and_noops_in_scope() -> None:
    """Exact duplicates only reinforce; a NOOP needs a close, same-scope, compatible record."""
    assert (0.0, 1.0, 0.0) == allowed_actions(state(exact_duplicate=1, closest=1))
    assert (1.0, 0.0, 0.0) == allowed_actions(state(closest=0.5))
    assert (1.0, 0.0, 0.0) == allowed_actions(state(closest=0.9, other_scope=1))
    assert (1.0, 0.0, 0.0) == allowed_actions(state(closest=0.9, incompatible=0.8))
    assert (1.0, 1.0, 0.0) == allowed_actions(state(closest=0.9, incompatible=0.8, restates=1))
    assert (1.0, 1.0, 0.0) == allowed_actions(state(closest=0.9, incompatible=0.2))
    assert (1.0, 0.0, 0.0) == allowed_actions(state(closest=0.9, incompatible=0.2, new_marks=1))
    same = {"closest": 0.9, "incompatible": 0.8, "kept_marks": 1.0}
    assert (1.0, 1.0, 0.0) == allowed_actions(state(**same))
    assert (1.0, 0.0, 0.0) == allowed_actions(state(**same, in_conflict=1))
    assert (1.0, 0.0, 0.0) == allowed_actions(state(**same, new_marks=1))
    assert (1.0, 0.0, 0.0) == allowed_actions(state(**same, change_words=1))
    assert (1.0, 0.0, 0.0) == allowed_actions(state(**{**same, "kept_marks": 0.5}))


def test_a_merge_needs_a_stated_change_with_a_new_value_of_a_close_same_scope_record() -> None:
    """UPDATE is allowed only for a change in the proposal's own words that brings a new value
    and repeats one of the nearest record's (same scope, >= MERGE_FLOOR), with no dispute."""
    change = {
        "closest": 0.8,
        "incompatible": MERGE_MIN_INCOMPATIBLE,
        "new_marks": 1.0,
        "kept_marks": 0.5,
        "change_words": 1.0,
    }
    assert (1.0, 0.0, 1.0) == allowed_actions(state(**change))
    assert (1.0, 0.0, 1.0) == allowed_actions(state(**{**change, "closest": MERGE_FLOOR}))
    for refused in (
        {"closest": MERGE_FLOOR - 0.01},
        {"incompatible": MERGE_MIN_INCOMPATIBLE - 0.01},
        {"other_scope": 1.0},
        {"new_marks": 0.0},
        {"kept_marks": 0.0},
        {"change_words": 0.0},
        {"change_words": 0.0, "supersedes": 1.0},
        {"contested": 1.0},
    ):
        assert 0.0 == allowed_actions(state(**{**change, **refused}))[ACTIONS.index("UPDATE")]
    assert (0.0, 1.0, 0.0) == allowed_actions(state(**change, exact_duplicate=1))


# --- reward --------------------------------------------------------------------------------


def test_reward_is_observed_for_adds_and_estimated_for_noops() -> None:
    """A logged ADD's two rewards come from its outcome; a duplicate NOOP's ADD reward is the
    storage cost (a duplicate can bring nothing unique)."""
    add = TrainingExample(state(closest=0.3), "ADD", "ADD", Outcome(useful=3, redundant=1))
    noop = TrainingExample(state(closest=1, exact_duplicate=1), "NOOP", "NOOP")
    table = reward_table([add, noop], RewardModel.fit([add, noop]))
    assert pytest.approx(2 - STORE_COST) == table[0, ACTIONS.index("ADD")]
    assert pytest.approx(-LOSS_WEIGHT * 2) == table[0, ACTIONS.index("NOOP")]
    assert pytest.approx(-STORE_COST) == table[1, ACTIONS.index("ADD")]
    assert 0 == table[1, ACTIONS.index("NOOP")]


def test_a_merge_earns_only_what_the_stale_nearest_record_cost() -> None:
    """R(UPDATE) is R(ADD) plus the nearest record's later stale ratings saved, minus its
    later unique useful answers lost (weighed as a lost fact); a logged merge's own ratings
    are its observed UPDATE reward."""
    change = state(closest=0.8, incompatible=0.9, new_marks=1, kept_marks=0.5, change_words=1)
    stale = TrainingExample(change, "ADD", "ADD", Outcome(useful=2, nearest_stale=3))
    still_true = TrainingExample(change, "ADD", "ADD", Outcome(useful=2, nearest_lost=1))
    idle = TrainingExample(change, "ADD", "ADD", Outcome(useful=2))
    merged = TrainingExample(change, "UPDATE", "ADD", Outcome(useful=1, not_useful=1))
    batch = [stale, still_true, idle, merged]
    table = reward_table(batch, RewardModel.fit(batch))
    add, update = ACTIONS.index("ADD"), ACTIONS.index("UPDATE")
    assert pytest.approx(2 - STORE_COST + NOT_USEFUL_COST * 3) == table[0, update]
    assert pytest.approx(2 - STORE_COST) == table[0, add]
    assert pytest.approx(2 - STORE_COST - LOSS_WEIGHT) == table[1, update]
    assert table[2, update] == table[2, add]  # merging is worth nothing by itself
    assert pytest.approx(1 - NOT_USEFUL_COST - STORE_COST) == table[3, update]


# --- GRPO ----------------------------------------------------------------------------------


def _bandit(n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """States where a restatement is worth a NOOP and a new fact an ADD; the reference
    always adds."""
    rng = np.random.default_rng(seed)
    restates = rng.random(n) < 0.5
    rows = [
        state(closest=0.8 + 0.2 * rng.random(), restates=float(r), words=rng.random())
        for r in restates
    ]
    states = np.asarray(rows)
    allowed = np.asarray([allowed_actions(row) for row in rows])
    reward = np.where(restates[:, None], [[-0.2, 0.0, -0.2]], [[1.0, -1.5, 1.0]])
    reference = np.tile([[1.0, 0.0, 0.0]], (n, 1))
    return states, allowed, reward, reference, restates


def test_grpo_learns_what_the_rewards_prefer_over_the_reference() -> None:
    """GRPO leaves an always-ADD reference where NOOP earns more (training and held-out)."""
    states, allowed, reward, reference, restates = _bandit(400)
    result = train_grpo(states, allowed, reward, reference, version="rl@test")
    chosen = result.policy.probabilities(states, allowed).argmax(axis=1)
    assert (chosen[restates] == ACTIONS.index("NOOP")).mean() > 0.95
    assert (chosen[~restates] == ACTIONS.index("ADD")).mean() > 0.95
    assert result.reward_curve[-1] > result.reference_reward
    assert result.reward_curve[-1] > result.reward_curve[0]
    held_out = _bandit(200, seed=7)
    p = result.policy.probabilities(held_out[0], held_out[1]).argmax(axis=1)
    assert (p == np.where(held_out[4], 1, 0)).mean() > 0.95


def test_grpo_with_flat_rewards_stays_the_reference() -> None:
    """No advantage anywhere: the KL term keeps the imitated reference."""
    states, allowed, _reward, reference, _ = _bandit(300)
    flat = np.zeros_like(reference)
    result = train_grpo(states, allowed, flat, reference, version="rl@flat")
    assert 1.0 == result.agreement_with_reference
    assert result.kl_to_reference < 0.05


def test_grpo_is_deterministic_for_a_seed() -> None:
    """The same data and seed give the same policy, bit for bit."""
    states, allowed, reward, reference, _ = _bandit(200)
    config = GRPOConfig(epochs=5)
    a = train_grpo(states, allowed, reward, reference, version="v", config=config)
    b = train_grpo(states, allowed, reward, reference, version="v", config=config)
    assert a.policy.digest() == b.policy.digest()


def test_training_refuses_examples_of_another_schema() -> None:
    """Examples of another length or with unknown actions are a typed error."""
    with pytest.raises(ValidationFailed):
        train_policy([TrainingExample((0.5,), "ADD", "ADD")], version="v")
    with pytest.raises(ValidationFailed):
        train_policy([TrainingExample(state(), "DELETE", "ADD")], version="v")


def test_training_on_nothing_returns_the_untrained_policy() -> None:
    """No data: a zero policy and a result that says so."""
    result = train_policy([], version="v")
    assert 0 == result.states
    assert np.all(result.policy.weights == 0)


# --- the Gate's advisors -------------------------------------------------------------------


def _noop_policy(strength: float) -> AdvisorPolicy:
    weights = np.zeros((3, FEATURE_COUNT))
    bias = np.asarray([0.0, strength, 0.0])
    return AdvisorPolicy("rl@noop", weights, bias)


async def test_rl_advisor_reinforces_the_nearest_when_its_policy_says_so() -> None:
    """The policy, not the heuristic, chooses between NOOP and ADD where both are allowed."""
    heuristic = HeuristicAdvisor(ConflictDetector())
    existing = Neighbour(belief("The staging cluster is patched every Tuesday night."), 0.8)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(existing,))
    proposal = belief("Every Tuesday night the staging cluster gets patched.")
    rl = RLAdvisor(heuristic, _noop_policy(5.0))
    decision = await rl.advise(proposal, context)
    assert AdvisorAction.NOOP == decision.action
    assert existing.record.record_id == decision.target_record_id
    assert "rl@noop" == decision.source
    keep = await RLAdvisor(heuristic, _noop_policy(-5.0)).advise(proposal, context)
    assert AdvisorAction.ADD == keep.action


async def test_rl_advisor_never_noops_where_the_gate_does_not_allow_it() -> None:
    """A distant nearest record, or nothing near: the policy's NOOP is masked out."""
    heuristic = HeuristicAdvisor(ConflictDetector())
    far = Neighbour(belief("Lunch orders go in the #food channel."), 0.4)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(far,))
    decision = await RLAdvisor(heuristic, _noop_policy(50.0)).advise(
        belief("The VPN config lives in the infra repo."), context
    )
    assert AdvisorAction.ADD == decision.action


def _merge_policy() -> AdvisorPolicy:
    return AdvisorPolicy("rl@merge", np.zeros((3, FEATURE_COUNT)), np.asarray([0.0, 0.0, 9.0]))


async def test_rl_advisor_merges_a_stated_change_into_the_callers_own_nearest_record() -> None:
    """A change of value of the agent's own record becomes that record's next version; the
    conflicts with it are not resolved a second time."""
    heuristic = HeuristicAdvisor(ConflictDetector())
    existing = Neighbour(belief("The data team's standup is at 09:30 every weekday."), 0.85)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(existing,))
    proposal = belief("The data team moved its standup from 09:30 to 10:15.")
    decision = await RLAdvisor(heuristic, _merge_policy()).advise(proposal, context)
    assert decision.features is not None
    assert 1.0 == allowed_actions(decision.features)[ACTIONS.index("UPDATE")]
    assert AdvisorAction.UPDATE == decision.action
    assert existing.record.record_id == decision.target_record_id
    assert all(c.existing_record_id != existing.record.record_id for c in decision.conflicts)
    assert decision.rationale.startswith("the policy merges it into the nearest record")


async def test_rl_advisor_never_merges_into_a_record_the_caller_does_not_own() -> None:
    """Another agent's record, or one of another access level, is never rewritten by a
    merge, whatever the policy prefers: the write is the heuristic's (an ADD)."""
    heuristic = HeuristicAdvisor(ConflictDetector())
    theirs = MemoryRecord.draft(
        MemoryType.BELIEF, "The data team's standup is at 09:30 every weekday.", source_agent="b"
    )
    hidden = belief("The data team's standup is at 09:30 every weekday.").model_copy(
        update={"access_level": AccessLevel.USER}
    )
    proposal = belief("The data team moved its standup from 09:30 to 10:15.")  # the newer
    for existing in (theirs, hidden):
        context = AdvisorContext(
            GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(Neighbour(existing, 0.85),)
        )
        decision = await RLAdvisor(heuristic, _merge_policy()).advise(proposal, context)
        assert decision.features is not None
        # the state alone would allow the merge: only the access answer stops it
        assert 1.0 == allowed_actions(decision.features)[ACTIONS.index("UPDATE")]
        assert not decision.merge_allowed
        assert AdvisorAction.ADD == decision.action
        assert decision.target_record_id is None


async def test_rl_advisor_falls_back_to_the_heuristic_and_counts_it() -> None:
    """A failing or missing policy leaves the heuristic's decision, marked and counted."""
    heuristic = HeuristicAdvisor(ConflictDetector())
    fallbacks: list[str] = []

    class Broken(AdvisorPolicy):
        def probabilities(
            self, states: np.ndarray, allowed: np.ndarray | None = None
        ) -> np.ndarray:
            raise FloatingPointError("boom")

    broken = Broken("rl@broken", np.zeros((3, FEATURE_COUNT)), np.zeros(3))
    rl = RLAdvisor(heuristic, broken, on_fallback=fallbacks.append)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD)
    decision = await rl.advise(belief("The build uses Bazel."), context)
    assert AdvisorAction.ADD == decision.action
    assert decision.source.startswith("rl@broken(fallback:heuristic@2")
    assert ["error"] == fallbacks
    untrained = await RLAdvisor(heuristic).advise(belief("The build uses Bazel."), context)
    assert "rl@0(fallback:heuristic@2)" == untrained.source


async def test_rl_advisor_leaves_updates_to_the_heuristic() -> None:
    """An explicit UPDATE is not the policy's to decide."""
    heuristic = HeuristicAdvisor(ConflictDetector())
    context = AdvisorContext(GateAction.UPDATE, EXTERNAL, STANDARD)
    decision = await RLAdvisor(heuristic, _noop_policy(50.0)).advise(belief("x y z"), context)
    assert AdvisorAction.UPDATE == decision.action
    assert "rl@noop(heuristic@2)" == decision.source


async def test_shadow_records_the_candidate_without_acting_on_it() -> None:
    """Shadow mode: the active advisor decides; the candidate's advice is in the audit JSON."""
    heuristic = HeuristicAdvisor(ConflictDetector())
    existing = Neighbour(belief("The staging cluster is patched every Tuesday night."), 0.8)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD, neighbours=(existing,))
    proposal = belief("Every Tuesday night the staging cluster gets patched.")
    shadow = ShadowAdvisor(heuristic, RLAdvisor(heuristic, _noop_policy(5.0)))
    decision = await shadow.advise(proposal, context)
    alone = await heuristic.advise(proposal, context)
    assert alone.action == decision.action
    assert decision.shadow is not None
    assert "NOOP" == decision.shadow["action"]
    assert "rl@noop" == decision.to_json(audit=True)["shadow"]["source"]
    assert "shadow" not in decision.to_json()


async def test_a_failing_shadow_never_touches_the_write() -> None:
    """A crashing candidate is recorded as an error; the write goes on as decided."""
    heuristic = HeuristicAdvisor(ConflictDetector())
    errors: list[str] = []

    class Failing:
        version = "rl@bad"

        async def advise(self, record: MemoryRecord, context: AdvisorContext) -> AdvisorDecision:
            raise RuntimeError("candidate crashed")

    shadow = ShadowAdvisor(heuristic, Failing(), on_error=errors.append)
    context = AdvisorContext(GateAction.CREATE, EXTERNAL, STANDARD)
    decision = await shadow.advise(belief("The build uses Bazel."), context)
    assert AdvisorAction.ADD == decision.action
    assert {"source": "rl@bad", "error": "RuntimeError"} == decision.shadow
    assert ["error"] == errors


@settings(max_examples=400, deadline=None)
@given(
    text=st.text(alphabet="ab_ -.é1٣\u00a0", max_size=30),
    mark=st.text(alphabet="ab_ -.é1٣", min_size=1, max_size=4),
)
def test_mentions_finds_a_whole_word_as_the_pattern_does(text: str, mark: str) -> None:
    """The advisor's mark look-up agrees with ``(?<!\\w)mark(?!\\w)`` on any text (word
    characters of several scripts, digits, underscores, separators)."""
    pattern = re.compile(rf"(?<!\w){re.escape(mark)}(?!\w)")
    assert mentions(text, mark) == (pattern.search(text) is not None)


@settings(max_examples=400, deadline=None)
@given(
    text=st.text(alphabet="ab_ -.é1٣\u00a0", max_size=40),
    marks=st.lists(st.text(alphabet="ab_ -.é1٣", min_size=1, max_size=6), max_size=6),
)
def test_whole_words_finds_what_mentions_finds(text: str, marks: list[str]) -> None:
    """A text's whole-word spans, read once, say of every mark what ``mentions`` says."""
    spans = WholeWords(text)
    assert [mentions(text, mark) for mark in marks] == [spans.mention(mark) for mark in marks]


def test_whole_words_finds_a_mark_of_many_parts_as_mentions_does() -> None:
    """A mark spanning more word runs than are looked up is still found as a whole word."""
    mark = ".".join(["1"] * (MAX_LOOKUP_PARTS + 2))
    assert [True, False, False] == [
        WholeWords(f"see {mark}, then").mention(mark),
        WholeWords(f"see 1{mark}").mention(mark),
        WholeWords(f"see {mark}_").mention(mark),
    ]
