"""The verdict that promotion needs (engram.protocols.simulator.evaluation): every way a
candidate can lose is a reason, and only a candidate with none of them wins."""

from __future__ import annotations

import numpy as np

from engram.memory.rl.features import FEATURE_COUNT, FEATURE_NAMES
from engram.memory.rl.policy import AdvisorPolicy
from engram.memory.rl.reward import Outcome, TrainingExample
from engram.protocols.simulator.evaluation import SideBySide, replay_logged, verdict
from engram.protocols.simulator.life import LifeReport

F = {name: i for i, name in enumerate(FEATURE_NAMES)}


def _life(**figures: int) -> LifeReport:
    """A life of 10 questions with the given figures."""
    base = {"questions": 10, "answered": 9, "store_size": 50, "duplicates_admitted": 5}
    return LifeReport(seed=9000, split="eval", advisor="x", namespace="n", **{**base, **figures})  # type: ignore[arg-type]


def _side(heuristic: LifeReport, candidate: LifeReport) -> SideBySide:
    return SideBySide([heuristic], [candidate])


REPLAY_OK = {"decisions": 10, "candidate_reward": 0.2, "heuristic_reward": 0.1,
             "dropped_useful_records": 0}  # fmt: skip


def test_a_smaller_store_with_nothing_lost_wins() -> None:
    """Same usefulness, fewer duplicates and records, nothing lost: the candidate wins."""
    wins, reasons = verdict(_side(_life(), _life(store_size=45, duplicates_admitted=2)), REPLAY_OK)
    assert wins
    assert [] == reasons


def test_each_way_to_lose_is_named() -> None:
    """Less useful, a lost fact, more duplicates, a lower replayed reward: each is a reason;
    a tie everywhere is no improvement."""
    worse = _life(answered=8, facts_lost=1, duplicates_admitted=6, store_size=51)
    replay = {**REPLAY_OK, "candidate_reward": 0.0, "dropped_useful_records": 2}
    wins, reasons = verdict(_side(_life(), worse), replay)
    assert not wins
    text = " | ".join(reasons)
    for expected in ("usefulness", "facts_lost", "duplicates_admitted", "store_size",
                     "replay reward", "no better"):  # fmt: skip
        assert expected in text
    tie, why = verdict(_side(_life(), _life()), REPLAY_OK)
    assert not tie
    assert ["no better than the heuristic on usefulness, store size or duplicates"] == why


def test_replay_scores_the_candidate_in_the_logged_states() -> None:
    """A policy that reinforces every allowed restatement is scored on the logged states: it
    drops a logged record that proved uniquely useful, and the replay says so."""
    row = [0.0] * FEATURE_COUNT
    row[F["closest"]], row[F["restates"]], row[F["type_belief"]] = 0.9, 1.0, 1.0
    useful = TrainingExample(tuple(row), "ADD", "ADD", Outcome(useful=2))
    idle = TrainingExample(tuple(row), "ADD", "ADD", Outcome())
    noop = AdvisorPolicy("rl@t", np.zeros((3, FEATURE_COUNT)), np.asarray([0.0, 3.0, 0.0]))
    report = replay_logged([useful, idle], noop)
    assert 2 == report["changed"]
    assert 1 == report["dropped_useful_records"]
    assert 0 == report["candidate_merges"]
    assert {"decisions": 0} == replay_logged([], noop)
