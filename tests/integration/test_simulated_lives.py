"""Simulated agent lives on the real kernel and the evaluation promotion needs (ADR-020)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engram import Kernel
from engram.errors import PromotionRefused
from engram.memory.rl.grpo import GRPOConfig
from engram.memory.rl.runs import train_candidate
from engram.protocols.cli.advisor import evaluate_model
from engram.protocols.simulator.life import live, simulated_agent
from engram.protocols.simulator.world import agent_life


async def test_a_life_writes_through_the_gate_asks_and_rates_in_its_own_namespace(
    kernel: Kernel,
) -> None:
    """Every write is one Gate decision, every question one search whose hits are rated;
    the figures add up and nothing leaks into another namespace."""
    world = agent_life(1000, writes=40, questions=12)
    report = await live(kernel, world)
    assert (
        40 == report.writes == report.created + report.reinforced + report.merged + report.rejected
    )
    assert 0 == report.merged  # the heuristic never merges
    assert 0 == report.rejected
    assert 12 == report.questions
    assert 0.0 <= report.usefulness <= 1.0
    # the finer figures: a first hit that answers is an answer; a question whose first hit
    # answers cannot show a stale value first
    assert report.answered_first <= report.answered
    assert report.stale_shown <= report.questions - report.answered_first
    active = await kernel.db.fetchval(
        "SELECT count(*) FROM engram.memories WHERE namespace = $1 "
        "AND superseded_by IS NULL AND status = 'active'",
        report.namespace,
    )
    assert report.store_size == active
    audited = await kernel.db.fetchval(
        "SELECT count(*) FROM engram.librarian_audit WHERE agent_id = $1", "sim-agent"
    )
    assert 40 == audited
    rated = await kernel.db.fetchval("SELECT count(*) FROM engram.memory_feedback")
    assert rated >= report.answered
    found = await kernel.retrieval.search(simulated_agent(), "which host", limit=5)
    assert [] == found.hits  # the default namespace holds nothing of the life


async def test_evaluation_is_recorded_and_promotion_follows_it(kernel: Kernel) -> None:
    """A candidate trained on one life is judged on a held-out one on a private database;
    the verdict is stored on its row and promotion does what it says."""
    await live(kernel, agent_life(1001, writes=40, questions=12))
    run = await train_candidate(
        kernel.db,
        until=datetime.now(UTC),
        min_decisions=1,
        config=GRPOConfig(epochs=3, imitation_steps=20),
    )
    assert run.model is not None
    report = await evaluate_model(kernel, run.model.version, lives=1, writes=30, questions=8)
    assert {"heuristic", "candidate", "lives"} <= set(report["simulation"])
    assert 1 == len(report["simulation"]["lives"]["candidate"])
    assert run.model.version == report["version"]
    stored = await kernel.advisor_models.get(run.model.version)
    assert stored.evaluation is not None
    assert stored.evaluation["wins"] == report["wins"]
    if report["wins"]:
        assert "active" == (await kernel.advisor_models.promote(run.model.version)).status
    else:
        with pytest.raises(PromotionRefused, match="did not win"):
            await kernel.advisor_models.promote(run.model.version)
