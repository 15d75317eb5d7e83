"""The learned advisor on the real database (ADR-020): decisions recorded with their state,
outcomes read from feedback, a candidate trained and stored, promotion earned, a serving
kernel that follows the model rows, shadow advice in the audit row, rollback."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from engram import Kernel, open_kernel
from engram.config import EngramSettings
from engram.errors import NotFound, PromotionRefused
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.gate.advisor import HeuristicAdvisor
from engram.memory.gate.learned import RLAdvisor
from engram.memory.gate.managed import ManagedAdvisor
from engram.memory.gate.requests import result_json
from engram.memory.rl.decisions import SAME_ANSWER, training_data
from engram.memory.rl.features import FEATURE_COUNT, FEATURE_NAMES
from engram.memory.rl.grpo import GRPOConfig
from engram.memory.rl.policy import ACTIONS, AdvisorPolicy, allowed_actions
from engram.memory.rl.runs import train_candidate
from engram.memory.types import GateDecision
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import OTHER, WRITER, belief, create

FACTS = [
    "The billing API runs on db-7.internal in eu-west-1.",
    "Priya owns the fraud scorer and its alert rules.",
    "The payments team deploys on Thursdays after the freeze ends.",
    "Grafana dashboards for checkout live in the ops folder.",
]


async def _audit_rows(kernel: Kernel) -> list[dict[str, object]]:
    rows = await kernel.db.fetch(
        "SELECT record_id, outcome, decision_source, layer2_decision FROM engram.librarian_audit "
        "WHERE action = 'CREATE' ORDER BY seq"
    )
    return [{**dict(r), "advice": json.loads(r["layer2_decision"])} for r in rows]


async def _write_and_rate(kernel: Kernel) -> list[object]:
    """Four facts, a restatement of the first (heuristic NOOP), and feedback on two facts."""
    ids = []
    for text in FACTS:
        result = await kernel.gate.evaluate(create(belief(text), WRITER))
        assert GateDecision.APPROVED == result.decision, result.reason
        ids.append(result.record_id)
    again = await kernel.gate.evaluate(create(belief(FACTS[0].upper()), WRITER))
    assert "reinforced" == again.outcome.value
    for record_id, useful in ((ids[0], True), (ids[0], True), (ids[1], True), (ids[2], False)):
        await kernel.retrieval.feedback(WRITER, record_id, useful=useful)
    return ids


async def test_decisions_carry_their_state_and_outcomes_come_from_feedback(
    kernel: Kernel,
) -> None:
    """Each outside CREATE's audit row has the named state; training data joins feedback."""
    ids = await _write_and_rate(kernel)
    rows = await _audit_rows(kernel)
    assert 5 == len(rows)
    for row in rows:
        features = row["advice"]["features"]  # type: ignore[index]
        assert "advisor-features@1" == features["schema"]
        assert set(FEATURE_NAMES) == set(features["values"])
    assert 1.0 == rows[-1]["advice"]["features"]["values"]["exact_duplicate"]  # type: ignore[index]
    now = datetime.now(UTC)
    data = await training_data(kernel.db, since=now - timedelta(hours=1), until=now)
    assert 5 == len(data.examples)
    assert 0 == data.skipped
    by_record = {
        row["record_id"]: example
        for row, example in zip(rows, data.examples, strict=True)
        if row["outcome"] == "created"
    }
    assert 2 == by_record[ids[0]].outcome.useful
    assert 1 == by_record[ids[1]].outcome.useful
    assert 1 == by_record[ids[2]].outcome.not_useful
    assert ["ADD"] * 4 + ["NOOP"] == [e.action for e in data.examples]
    assert all(len(e.state) == FEATURE_COUNT for e in data.examples)


async def test_an_outcome_counts_its_nearest_records_later_stale_and_unique_ratings(
    kernel: Kernel,
) -> None:
    """The reward of a merge is read from the nearest record's ratings after the decision:
    its "not useful" ones, and its useful ones the admitted record did not share in the same
    search; ratings before the decision, or shared, do not count."""
    old = await kernel.gate.evaluate(
        create(belief("The data team's standup is at 09:30 every weekday."), WRITER)
    )
    await kernel.retrieval.feedback(WRITER, old.record_id, useful=True)  # before: not counted
    new = await kernel.gate.evaluate(
        create(belief("The data team moved its standup from 09:30 to 10:15."), WRITER)
    )
    assert "created" == new.outcome.value, new.reason
    await kernel.retrieval.feedback(WRITER, old.record_id, useful=False)
    await kernel.retrieval.feedback(WRITER, old.record_id, useful=False)
    await kernel.retrieval.feedback(WRITER, new.record_id, useful=True)
    await kernel.retrieval.feedback(WRITER, old.record_id, useful=True)  # shared: not lost
    now = datetime.now(UTC)
    data = await training_data(kernel.db, since=now - timedelta(hours=1), until=now)
    outcome = data.examples[-1].outcome
    assert (1, 1, 0) == (outcome.useful, outcome.redundant, outcome.not_useful)
    assert (2, 0) == (outcome.nearest_stale, outcome.nearest_lost)
    await asyncio.sleep(SAME_ANSWER.total_seconds() + 0.5)
    await kernel.retrieval.feedback(OTHER, old.record_id, useful=True)  # alone: lost
    data = await training_data(kernel.db, since=now - timedelta(hours=1), until=datetime.now(UTC))
    assert 1 == data.examples[-1].outcome.nearest_lost


async def test_an_add_and_a_later_merge_into_its_record_keep_their_own_outcomes(
    kernel: Kernel,
) -> None:
    """An ADD and a merge into the record it created are two decisions on one record: each
    is credited with the ratings of the version it stored, and each state records whether
    the access rules let it merge (another agent's write near the record may not)."""
    first = await kernel.gate.evaluate(
        create(belief("The data team's standup is at 09:30 every weekday."), WRITER)
    )
    merges = AdvisorPolicy("rl@m", np.zeros((3, FEATURE_COUNT)), np.asarray([0.0, 0.0, 9.0]))
    kernel.gate.use_advisor(RLAdvisor(HeuristicAdvisor(kernel.conflicts), merges))
    merged = await kernel.gate.evaluate(
        create(belief("The data team moved its standup from 09:30 to 10:15."), WRITER)
    )
    assert ("updated", first.record_id) == (merged.outcome.value, merged.record_id)
    await kernel.retrieval.feedback(WRITER, merged.record_id, useful=True)
    theirs = await kernel.gate.evaluate(
        create(
            belief("The data team moved its standup from 10:15 to 11:00.", source_agent="x"),
            OTHER,
        )
    )
    assert "created" == theirs.outcome.value, theirs.reason
    now = datetime.now(UTC)
    data = await training_data(kernel.db, since=now - timedelta(hours=1), until=now)
    assert ["ADD", "UPDATE", "ADD"] == [e.action for e in data.examples]
    assert [0, 1, 0] == [e.outcome.useful for e in data.examples]
    assert [False, True, False] == [e.merge_allowed for e in data.examples]
    theirs_state = data.examples[2]
    mask = allowed_actions(theirs_state.state, merge_allowed=theirs_state.merge_allowed)
    assert 0.0 == mask[ACTIONS.index("UPDATE")]


async def test_a_candidate_is_trained_stored_and_promoted_only_when_it_won(
    kernel: Kernel,
) -> None:
    """Too little data trains nothing; a candidate is refused promotion until an evaluation
    says it won; promotion and rollback move the one active row."""
    await _write_and_rate(kernel)
    now = datetime.now(UTC)
    nothing = await train_candidate(kernel.db, until=now)
    assert nothing.model is None
    assert "at least 100" in (nothing.reason or "")
    run = await train_candidate(
        kernel.db, until=now, min_decisions=1, config=GRPOConfig(epochs=3, imitation_steps=20)
    )
    assert run.model is not None
    assert "rl@1" == run.model.version
    assert "candidate" == run.model.status
    assert run.model.load().digest() == run.model.digest
    models = kernel.advisor_models
    with pytest.raises(PromotionRefused, match="not been evaluated"):
        await models.promote("rl@1")
    await models.record_evaluation("rl@1", {"wins": False, "reasons": ["more duplicates"]})
    with pytest.raises(PromotionRefused, match="more duplicates"):
        await models.promote("rl@1")
    await models.record_evaluation("rl@1", {"wins": True, "reasons": []})
    assert "active" == (await models.promote("rl@1")).status
    quick = GRPOConfig(epochs=1, imitation_steps=5)
    for version in ("rl@2", "rl@3"):
        trained = await train_candidate(kernel.db, until=now, min_decisions=1, config=quick)
        assert trained.model is not None
        assert version == trained.model.version
        await models.record_evaluation(version, {"wins": True})
    await models.promote("rl@2")
    assert "rl@2" == (await models.active()).version  # type: ignore[union-attr]
    assert "retired" == (await models.get("rl@1")).status
    back = await models.rollback()  # rl@2 out: back to the model it replaced
    assert back is not None
    assert "rl@1" == back.version
    await models.promote("rl@3")
    again = await models.rollback()  # rl@3 replaced rl@1, not the rolled-back rl@2
    assert again is not None
    assert "rl@1" == again.version
    assert await models.rollback() is None  # before rl@1: the heuristic
    with pytest.raises(NotFound):
        await models.rollback()


async def test_a_serving_kernel_follows_the_model_rows_and_records_shadow_advice(
    database: ScratchDatabase, embedder: FastembedEmbedder, kernel: Kernel
) -> None:
    """ENGRAM_ADVISOR=rl with shadow: no model means the heuristic, counted; a promoted model
    advises (its version in the audit row) and the newest candidate's advice is recorded."""
    settings = EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        advisor="rl",
        advisor_shadow=True,
        advisor_reload_seconds=3600,
    )
    async with open_kernel(settings=settings, embeddings=embedder) as serving:
        advisor = serving.gate.advisor
        assert isinstance(advisor, ManagedAdvisor)
        first = await serving.gate.evaluate(create(belief(FACTS[0]), WRITER))
        assert first.layer2_decision is not None
        assert first.layer2_decision.source == "rl@0(fallback:heuristic@2)"
        assert "features" not in result_json(first)["layer2_decision"]  # audit only
        fallbacks = serving.metrics.advisor_fallbacks.labels(reason="no_model")._value.get()
        assert fallbacks >= 1
        # a model that always keeps, promoted; a candidate that would always reinforce
        keep = AdvisorPolicy("rl@1", np.zeros((3, FEATURE_COUNT)), np.asarray([5.0, 0.0, 0.0]))
        noop = AdvisorPolicy("rl@2", np.zeros((3, FEATURE_COUNT)), np.asarray([0.0, 5.0, 0.0]))
        for policy in (keep, noop):
            await kernel.db.execute(
                "INSERT INTO engram.advisor_models (version, feature_schema, policy, digest, "
                "decisions, metrics) VALUES ($1, $2, $3, $4, 0, '{}')",
                policy.version,
                "advisor-features@1",
                policy.to_json(),
                policy.digest(),
            )
        await kernel.advisor_models.record_evaluation("rl@1", {"wins": True})
        await kernel.advisor_models.promote("rl@1")
        await advisor.refresh()
        assert (keep.digest(), noop.digest()) == advisor.loaded
        text = "The billing API is hosted on db-7.internal in region eu-west-1."
        result = await serving.gate.evaluate(create(belief(text), WRITER))
        advice = result.layer2_decision
        assert advice is not None
        assert advice.source == "rl@1"
        assert advice.shadow is not None
        assert advice.shadow["source"] == "rl@2"
        row = await serving.db.fetchrow(
            "SELECT decision_source, layer2_decision FROM engram.librarian_audit "
            "WHERE decision_id = $1",
            result.decision_id,
        )
        assert row is not None
        assert "rl@1" == row["decision_source"]
        assert "rl@2" == json.loads(row["layer2_decision"])["shadow"]["source"]
