"""Hostile probes of the learned advisor's path (ADR-020): what a lower tier's decision records,
a damaged model row, and two promotions racing."""

from __future__ import annotations

import asyncio
import json

import numpy as np

from engram import Kernel
from engram.memory.gate.advisor import HeuristicAdvisor
from engram.memory.gate.managed import ManagedAdvisor
from engram.memory.rl.features import FEATURE_COUNT
from engram.memory.rl.policy import AdvisorPolicy
from engram.memory.types import AccessLevel, GateDecision
from tests.integration.gate_helpers import BOSS, INTERN, belief, create

SECRET = "The incident bridge for the payments outage is room Orion on floor nine."


async def test_a_lower_tier_decision_records_nothing_of_a_record_it_cannot_read(
    kernel: Kernel,
) -> None:
    """A restricted agent writing the words of a sensitive record it cannot read: its state
    says no duplicate, no close neighbour, and names no record."""
    hidden = await kernel.gate.evaluate(
        create(
            belief(SECRET, source_agent=BOSS.agent_id, access_level=AccessLevel.SENSITIVE),
            BOSS,
        )
    )
    assert GateDecision.APPROVED == hidden.decision, hidden.reason
    mine = await kernel.gate.evaluate(create(belief(SECRET, source_agent=INTERN.agent_id), INTERN))
    assert "created" == mine.outcome.value
    row = await kernel.db.fetchval(
        "SELECT layer2_decision FROM engram.librarian_audit WHERE decision_id = $1",
        mine.decision_id,
    )
    features = json.loads(row)["features"]
    assert features["nearest"] is None
    assert 0.0 == features["values"]["exact_duplicate"]
    assert 0.0 == features["values"]["closest"]
    assert str(hidden.record_id) not in row


async def _insert(kernel: Kernel, version: str, policy: object, status: str = "candidate") -> None:
    await kernel.db.execute(
        "INSERT INTO engram.advisor_models (version, feature_schema, policy, digest, decisions, "
        "metrics, status) VALUES ($1, 'advisor-features@1', $2, $3, 0, '{}', $4)",
        version,
        policy,
        f"{int(version[3:]):064x}",
        status,
    )


async def test_a_damaged_active_model_row_means_the_heuristic_not_an_error(
    kernel: Kernel,
) -> None:
    """Weights of the wrong shape, NaN, or missing: the managed advisor serves the heuristic,
    counts the bad row, and every write still gets its answer."""
    advisor = ManagedAdvisor(
        HeuristicAdvisor(kernel.conflicts),
        kernel.advisor_models,
        mode="rl",
        shadow=False,
        reload_seconds=3600,
        metrics=kernel.metrics,
    )
    good = AdvisorPolicy("rl@1", np.zeros((3, FEATURE_COUNT)), np.zeros(3)).to_json()
    damaged = [
        {**good, "weights": [[1.0, 2.0]]},
        {**good, "bias": ["NaN", 0.0]},
        {key: value for key, value in good.items() if key != "weights"},
    ]
    counter = kernel.metrics.advisor_fallbacks.labels(reason="model_not_loadable")
    for n, policy in enumerate(damaged, start=1):
        await kernel.db.execute("UPDATE engram.advisor_models SET status = 'retired'")
        await _insert(kernel, f"rl@{n}", policy, status="active")
        before = counter._value.get()
        await advisor.refresh()
        assert before + 1 == counter._value.get()
        assert advisor.version == "rl@0"  # no model: the heuristic, marked fallback
        kernel.gate.use_advisor(advisor)
        result = await kernel.gate.evaluate(
            create(belief(f"The build cache {n} lives on S3."), BOSS)
        )
        assert GateDecision.APPROVED == result.decision
        assert result.layer2_decision is not None
        assert result.layer2_decision.source == "rl@0(fallback:heuristic@2)"


async def test_two_promotions_at_once_leave_exactly_one_active_model(kernel: Kernel) -> None:
    """Promotions race under one lock: whichever commits last is active, the other retired,
    and never two active rows."""
    good = AdvisorPolicy("rl@1", np.zeros((3, FEATURE_COUNT)), np.zeros(3)).to_json()
    for version in ("rl@1", "rl@2"):
        await _insert(kernel, version, {**good, "version": version})
        await kernel.advisor_models.record_evaluation(version, {"wins": True})
    for _ in range(5):
        await asyncio.gather(
            kernel.advisor_models.promote("rl@1"), kernel.advisor_models.promote("rl@2")
        )
        statuses = await kernel.db.fetch(
            "SELECT version, status FROM engram.advisor_models ORDER BY version"
        )
        assert 1 == sum(1 for r in statuses if r["status"] == "active")
        await kernel.advisor_models.rollback()


async def test_a_crafted_long_write_beside_its_neighbours_is_decided_in_bounded_time(
    kernel: Kernel,
) -> None:
    """Records near the content limit made of one endless 'sentence', or of hundreds of
    sentences: each write is judged against close neighbours (conflicts, restatement) in
    seconds, not minutes (one such pair took 57 s to judge)."""
    texts = [
        ("Python 3.12 release " * 800)[:15_900],
        ("Python 3.12 is here. " * 750)[:15_900],
        ("Server " + " ".join(f"Host{i} node-{i}x" for i in range(1500)))[:15_900],
    ]
    for text in texts:
        first = await kernel.gate.evaluate(create(belief(text, source_agent=BOSS.agent_id), BOSS))
        assert GateDecision.APPROVED == first.decision, first.reason
        started = asyncio.get_running_loop().time()
        second = await kernel.gate.evaluate(
            create(belief(text.replace("1", "2"), source_agent=BOSS.agent_id), BOSS)
        )
        assert asyncio.get_running_loop().time() - started < 15.0
        assert GateDecision.APPROVED == second.decision, second.reason
