"""The learned advisor's costs: GRPO training time and the policy's share of a decision.

Prints one JSON object. Measured here (issue 16, ADR-020):

- ``training``: wall time of :func:`engram.memory.rl.training.train_policy` (reward model
  and GRPO) on ``--decisions`` logged decisions (goal: 10,000 in ≤ 60 s), and the learning
  curve. The decisions are *synthetic*, drawn from a seeded mixture of the situations Layer 2
  meets (new facts, restatements, near and exact duplicates, short chatter) with seeded
  outcomes; they time training and show that it learns, nothing more. Usefulness against the
  heuristic needs the simulator driving the real kernel, which is not built yet (listed under
  ``not_measured``).
- ``decision``: per-decision latency of the heuristic advisor and of the RL advisor with the
  trained policy on the same proposals and neighbours (real conflict detector, no database),
  and of the policy's scoring alone (goal: ≤ 1 ms p95 for the advisor's part).

    python -m benchmarks.advisor_rl [--decisions 10000] [--proposals 300]
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

import numpy as np

from benchmarks.agent_text import texts
from benchmarks.harness import report
from benchmarks.stats import percentiles
from engram.memory.conflict.detection import ConflictDetector
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.advisor import AdvisorContext, HeuristicAdvisor
from engram.memory.gate.learned import RLAdvisor
from engram.memory.rl.features import FEATURE_COUNT, FEATURE_NAMES
from engram.memory.rl.policy import allowed_actions
from engram.memory.rl.reward import Outcome, TrainingExample
from engram.memory.rl.training import train_policy
from engram.memory.types import (
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    Neighbour,
    TrustLevel,
)

SEED = 20261125
NOT_MEASURED = (
    "usefulness, store size, duplicates and wrong replacements against the heuristic on "
    "held-out simulator seeds (the simulator driving the real kernel is not built)"
)
_F = {name: i for i, name in enumerate(FEATURE_NAMES)}
#: Situations Layer 2 meets, with their share of writes.
_KINDS: tuple[tuple[str, float], ...] = (
    ("new", 0.45),
    ("restatement", 0.25),
    ("near", 0.1),
    ("exact", 0.05),
    ("chatter", 0.15),
)


def synthetic_decisions(count: int, seed: int) -> list[TrainingExample]:
    """Seeded logged decisions with outcomes: the heuristic's action, as it would be logged."""
    rng = random.Random(seed)
    names = [name for name, _share in _KINDS]
    weights = [share for _name, share in _KINDS]
    out: list[TrainingExample] = []
    for _ in range(count):
        kind = rng.choices(names, weights)[0]
        row = [0.0] * FEATURE_COUNT
        row[_F[f"type_{rng.choice(list(MemoryType)).value}"]] = 1.0
        row[_F[f"trust_{rng.choice(['trusted', 'standard', 'restricted'])}"]] = 1.0
        row[_F["source_confidence"]] = rng.choice([0.6, 0.75, 0.9])
        row[_F["words"]] = rng.uniform(0.2, 0.9) if kind != "chatter" else rng.uniform(0, 0.3)
        row[_F["specificity"]] = min(1.0, row[_F["words"]] * rng.uniform(0.6, 1.1))
        closest = {
            "new": rng.uniform(0.1, 0.75),
            "restatement": rng.uniform(0.75, 0.95),
            "near": rng.uniform(0.95, 1.0),
            "exact": 1.0,
            "chatter": rng.uniform(0.3, 0.9),
        }[kind]
        row[_F["closest"]] = closest
        row[_F["second"]] = closest * rng.uniform(0.7, 1.0)
        row[_F["restates"]] = float(kind in {"restatement", "near", "exact"} and rng.random() < 0.8)
        row[_F["incompatible"]] = rng.uniform(0, 0.4) if kind != "new" else rng.uniform(0, 1)
        row[_F["near_duplicate"]] = float(kind == "near")
        row[_F["exact_duplicate"]] = float(kind == "exact")
        noop = kind in {"near", "exact"} or (
            kind == "restatement" and row[_F["restates"]] and closest >= 0.85
        )
        row[_F["heuristic_noop"]] = float(noop)
        action = "NOOP" if noop else "ADD"
        useful = {"new": 2, "restatement": 1, "near": 1, "exact": 1, "chatter": 0}[kind]
        hits = sum(rng.random() < 0.5 for _ in range(useful * 2))
        redundant = hits if kind in {"restatement", "near", "exact"} else 0
        missed = sum(rng.random() < 0.3 for _ in range(2)) if kind == "chatter" else 0
        outcome = Outcome(hits, redundant, missed) if action == "ADD" else Outcome()
        out.append(TrainingExample(tuple(row), action, action, outcome))
    return out


def _proposals(count: int) -> list[tuple[MemoryRecord, tuple[Neighbour, ...]]]:
    rng = random.Random(SEED)
    pool = texts(count * 4, SEED)
    out = []
    for i in range(count):
        record = MemoryRecord.draft(MemoryType.BELIEF, pool[i], source_agent="bench")
        neighbours = tuple(
            Neighbour(
                MemoryRecord.draft(MemoryType.BELIEF, rng.choice(pool), source_agent="bench"),
                rng.uniform(0.3, 0.97),
            )
            for _ in range(8)
        )
        out.append((record, neighbours))
    return out


async def _timed(
    advisors: dict[str, Any], cases: list[tuple[MemoryRecord, tuple[Neighbour, ...]]]
) -> dict[str, list[float]]:
    """Milliseconds per decision of each advisor on the same cases, their order alternating
    from case to case (the text caches one fills would otherwise favour the other)."""
    caller = caller_for_tier("bench", TrustLevel.STANDARD)
    times: dict[str, list[float]] = {name: [] for name in advisors}
    names = list(advisors)
    for i, (record, neighbours) in enumerate(cases):
        context = AdvisorContext(
            GateAction.CREATE, GateDecisionType.EXTERNAL, caller, neighbours=neighbours
        )
        for name in names if i % 2 == 0 else reversed(names):
            started = time.perf_counter()
            await advisors[name].advise(record, context)
            times[name].append((time.perf_counter() - started) * 1000)
    return times


async def measure(decisions: int, proposals: int) -> dict[str, Any]:
    batch = synthetic_decisions(decisions, SEED)
    started = time.perf_counter()
    trained = train_policy(batch, version="rl-bench@1")
    seconds = time.perf_counter() - started
    states = np.asarray([e.state for e in batch])
    allowed = np.asarray([allowed_actions(e.state) for e in batch])
    chosen = trained.policy.probabilities(states, allowed).argmax(axis=1)
    advisors = {
        "heuristic": HeuristicAdvisor(ConflictDetector()),
        "rl": RLAdvisor(HeuristicAdvisor(ConflictDetector()), trained.policy),
    }
    cases = _proposals(proposals)
    await _timed(advisors, _proposals(20))  # warm-up (lexicon, caches)
    timed = await _timed(advisors, cases)
    scoring = []
    for row, mask in zip(states[:proposals], allowed[:proposals], strict=True):
        at = time.perf_counter()
        trained.policy.probabilities(row[None, :], mask[None, :])
        scoring.append((time.perf_counter() - at) * 1000)
    return {
        "benchmark": "advisor_rl",
        "parameters": {"decisions": decisions, "proposals": proposals, "seed": SEED},
        "training": {
            "seconds": round(seconds, 3),
            "goal_seconds_for_10k": 60,
            **trained.to_json(),
            "noop_share_heuristic": round(float(states[:, _F["heuristic_noop"]].mean()), 4),
            "noop_share_policy": round(float((chosen == 1).mean()), 4),
        },
        "decision_ms": {
            "heuristic": percentiles(timed["heuristic"]),
            "rl": percentiles(timed["rl"]),
            "policy_scoring": percentiles(scoring),
            "goal_p95_policy_ms": 1.0,
        },
        "not_measured": [NOT_MEASURED],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=10_000)
    parser.add_argument("--proposals", type=int, default=300)
    args = parser.parse_args()
    report(measure(args.decisions, args.proposals))


if __name__ == "__main__":
    main()
