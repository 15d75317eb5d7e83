"""Judging a trained advisor before it may advise (ADR-020).

Two judges, both against the heuristic:

1. **Held-out lives** (:func:`simulate`): the same evaluation worlds (seeds of the ``eval``
   split, with wordings training never saw) played once under each advisor on one kernel, in
   namespaces of their own, their order alternating from seed to seed.
2. **Counterfactual replay of the logged decisions** (:func:`replay_logged`): the candidate's
   choice in every recorded state, scored by the reward of :mod:`engram.memory.rl.reward`
   (observed for logged ADDs, estimated otherwise); and, as safety, the logged ADDs whose
   record later proved uniquely useful that the candidate would have dropped, or whose nearest
   record did and that the candidate would have merged away.

:func:`verdict` says whether the candidate wins: at least the heuristic's reward on replay and
its usefulness on the lives, no more duplicates admitted, facts lost or records stored, and
better on at least one of usefulness, store size and duplicates. ``promote`` refuses any other
candidate. Safety is judged where the truth is known, on the lives (``facts_lost``): the
replay's count of dropped records that were rated useful without their nearest record is
reported, not counted against the candidate, because a NOOP may only drop words that repeat
the nearest record's every name, code and value (a restated copy that outranked its original
is "uniquely" useful without carrying anything new); its cost is in the replayed reward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engram.kernel import Kernel
from engram.memory.gate.advisor import GateAdvisor, HeuristicAdvisor
from engram.memory.gate.learned import RLAdvisor
from engram.memory.rl.policy import ACTIONS, AdvisorPolicy, allowed_actions
from engram.memory.rl.reward import RewardModel, TrainingExample, reward_table
from engram.protocols.simulator.life import LifeReport, live
from engram.protocols.simulator.world import agent_life, seeds
from engram.retrieval.budget import FeedbackBudget

_NOOP = ACTIONS.index("NOOP")
_ADD = ACTIONS.index("ADD")
_UPDATE = ACTIONS.index("UPDATE")


@dataclass
class SideBySide:
    """The lives of both advisors on the same worlds, and their totals."""

    heuristic: list[LifeReport] = field(default_factory=list)
    candidate: list[LifeReport] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "heuristic": totals(self.heuristic),
            "candidate": totals(self.candidate),
            "lives": {
                "heuristic": [r.to_json() for r in self.heuristic],
                "candidate": [r.to_json() for r in self.candidate],
            },
        }


def _share(count: int, questions: int) -> float:
    return round(count / questions, 4) if questions else 0.0


def totals(lives: Sequence[LifeReport]) -> dict[str, Any]:
    """Usefulness over all questions, and the sums of the other figures."""
    questions = sum(r.questions for r in lives)
    return {
        "usefulness": _share(sum(r.answered for r in lives), questions),
        "answered_first": _share(sum(r.answered_first for r in lives), questions),
        "stale_shown": _share(sum(r.stale_shown for r in lives), questions),
        "store_size": sum(r.store_size for r in lives),
        "duplicates_admitted": sum(r.duplicates_admitted for r in lives),
        "facts_lost": sum(r.facts_lost for r in lives),
        "merged": sum(r.merged for r in lives),
        "questions": questions,
        "writes": sum(r.writes for r in lives),
    }


async def simulate(
    kernel: Kernel,
    policy: AdvisorPolicy,
    *,
    count: int,
    writes: int,
    questions: int,
    first: int = 0,
) -> SideBySide:
    """Play ``count`` evaluation worlds (from the ``first``-th evaluation seed on) under the
    heuristic and under ``policy``, on a kernel of its own: meanwhile its ratings are not
    budgeted (a life rates every hit it reads, faster than an outside agent may; waiting
    for the budget took about six of an evaluation's seven minutes)."""
    heuristic = HeuristicAdvisor(kernel.conflicts)
    candidate = RLAdvisor(HeuristicAdvisor(kernel.conflicts), policy)
    previous = kernel.gate.advisor
    budget = kernel.retrieval.use_feedback_budget(FeedbackBudget.unlimited())
    out = SideBySide()
    try:
        for i, seed in enumerate(seeds("eval", count, first)):
            world = agent_life(seed, split="eval", writes=writes, questions=questions)
            order: list[tuple[str, GateAdvisor]] = [
                ("heuristic", heuristic),
                ("candidate", candidate),
            ]
            for name, advisor in order if i % 2 == 0 else reversed(order):
                kernel.gate.use_advisor(advisor)
                report = await live(kernel, world)
                getattr(out, name).append(report)
    finally:
        kernel.gate.use_advisor(previous)
        kernel.retrieval.use_feedback_budget(budget)
    return out


def replay_logged(examples: Sequence[TrainingExample], policy: AdvisorPolicy) -> dict[str, Any]:
    """The candidate's choices in the logged states, scored against the logged reference."""
    if not examples:
        return {"decisions": 0}
    states = np.asarray([e.state for e in examples], dtype=np.float64)
    masks = np.asarray([allowed_actions(e.state, merge_allowed=e.merge_allowed) for e in examples])
    chosen = policy.probabilities(states, masks).argmax(axis=1)
    reference = np.asarray([ACTIONS.index(e.reference) for e in examples])
    rewards = reward_table(examples, RewardModel.fit(examples))
    rows = np.arange(len(examples))
    dropped_useful = sum(
        1
        for e, c in zip(examples, chosen, strict=True)
        if e.action == "ADD"
        and (
            (c == _NOOP and e.outcome.unique > 0)  # the record itself
            or (c == _UPDATE and e.outcome.nearest_lost > 0)  # the one it would replace
        )
    )
    return {
        "decisions": len(examples),
        "changed": int((chosen != reference).sum()),
        "candidate_noops": int((chosen == _NOOP).sum()),
        "candidate_merges": int((chosen == _UPDATE).sum()),
        "heuristic_noops": int((reference == _NOOP).sum()),
        "candidate_reward": round(float(rewards[rows, chosen].mean()), 5),
        "heuristic_reward": round(float(rewards[rows, reference].mean()), 5),
        "dropped_useful_records": dropped_useful,
        "kept_records_the_heuristic_dropped": int(((chosen == _ADD) & (reference == _NOOP)).sum()),
    }


def verdict(lives: SideBySide, replay: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether the candidate wins, and every reason it does not."""
    h, c = totals(lives.heuristic), totals(lives.candidate)
    reasons = []
    if c["usefulness"] < h["usefulness"]:
        reasons.append(f"usefulness {c['usefulness']} < heuristic {h['usefulness']}")
    reasons.extend(
        f"{key} {c[key]} > heuristic {h[key]}"
        for key in ("duplicates_admitted", "facts_lost", "store_size")
        if c[key] > h[key]
    )
    if replay.get("decisions") and replay["candidate_reward"] < replay["heuristic_reward"]:
        reasons.append(
            f"replay reward {replay['candidate_reward']} < heuristic {replay['heuristic_reward']}"
        )
    better = (
        c["usefulness"] > h["usefulness"]
        or c["store_size"] < h["store_size"]
        or c["duplicates_admitted"] < h["duplicates_admitted"]
    )
    if not better:
        reasons.append("no better than the heuristic on usefulness, store size or duplicates")
    return not reasons, reasons
