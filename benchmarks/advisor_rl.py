"""The learned advisor beside the heuristic: usefulness, store, duplicates, lost facts, cost.

Prints one JSON object (issue 16, ADR-020):

- ``simulation``: the whole loop on a private embedded PostgreSQL with the real model.
  ``--train-lives`` seeded agent lives (training seeds) are played under the heuristic, as a
  deployment would log them: writes through the Gate, questions as top-5 searches, every hit
  rated. A candidate is trained by GRPO from that database alone (audit rows + feedback), then
  the heuristic and the candidate each live the same ``--eval-lives`` evaluation worlds
  (seeds and wordings never trained on) in namespaces of their own: usefulness (share of
  questions answered in the top 5), the finer ``answered_first`` and ``stale_shown``
  (docs/advisor.md), store size, duplicates admitted and facts lost, side by side, with the
  verdict ``engram advisor promote`` would need. The replay figure is in-sample (the logged
  decisions it was trained on).
- ``training``: wall time of training on ``--decisions`` *synthetic* logged decisions (a seeded
  mixture of new facts, restatements, duplicates and chatter; goal: 10,000 in ≤ 60 s) and the
  learning curve.
- ``decision_ms``: per-decision latency of the heuristic and of the RL advisor on the same
  proposals (real conflict detector, alternating order), and of the policy's scoring alone
  (goal: ≤ 1 ms p95).

    python -m benchmarks.advisor_rl [--train-lives 6] [--eval-lives 3] [--eval-from 30]
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from benchmarks.agent_text import texts
from benchmarks.harness import report, runtime_settings, scratch_server
from benchmarks.stats import percentiles
from engram import open_kernel
from engram.memory.conflict.detection import ConflictDetector
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.advisor import AdvisorContext, HeuristicAdvisor
from engram.memory.gate.learned import RLAdvisor
from engram.memory.rl.decisions import training_data
from engram.memory.rl.features import FEATURE_COUNT, FEATURE_NAMES
from engram.memory.rl.policy import ACTIONS, allowed_actions
from engram.memory.rl.reward import Outcome, TrainingExample
from engram.memory.rl.runs import train_candidate
from engram.memory.rl.training import train_policy
from engram.memory.types import (
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    Neighbour,
    TrustLevel,
)
from engram.protocols.simulator.evaluation import replay_logged, simulate, totals, verdict
from engram.protocols.simulator.life import live
from engram.protocols.simulator.world import agent_life, seeds
from engram.retrieval.budget import FeedbackBudget

SEED = 20261125
_F = {name: i for i, name in enumerate(FEATURE_NAMES)}
#: Situations Layer 2 meets, with their share of writes.
_KINDS: tuple[tuple[str, float], ...] = (
    ("new", 0.38),
    ("change", 0.07),
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
            "change": rng.uniform(0.65, 0.9),
            "restatement": rng.uniform(0.75, 0.95),
            "near": rng.uniform(0.95, 1.0),
            "exact": 1.0,
            "chatter": rng.uniform(0.3, 0.9),
        }[kind]
        row[_F["closest"]] = closest
        row[_F["second"]] = closest * rng.uniform(0.7, 1.0)
        row[_F["restates"]] = float(kind in {"restatement", "near", "exact"} and rng.random() < 0.8)
        row[_F["incompatible"]] = {"new": rng.uniform(0, 1), "change": rng.uniform(0.5, 1)}.get(
            kind, rng.uniform(0, 0.4)
        )
        if kind == "change":  # a new value said to replace one the nearest record states
            row[_F["new_marks"]], row[_F["change_words"]] = 1.0, 1.0
            row[_F["kept_marks"]] = rng.uniform(0.3, 1.0)
        row[_F["near_duplicate"]] = float(kind == "near")
        row[_F["exact_duplicate"]] = float(kind == "exact")
        noop = kind in {"near", "exact"} or (
            kind == "restatement" and row[_F["restates"]] and closest >= 0.85
        )
        row[_F["heuristic_noop"]] = float(noop)
        action = "NOOP" if noop else "ADD"
        useful = {"new": 2, "change": 2, "restatement": 1, "near": 1, "exact": 1, "chatter": 0}
        hits = sum(rng.random() < 0.5 for _ in range(useful[kind] * 2))
        redundant = hits if kind in {"restatement", "near", "exact"} else 0
        missed = sum(rng.random() < 0.3 for _ in range(2)) if kind == "chatter" else 0
        # the value a change replaced is rated stale afterwards
        stale = sum(rng.random() < 0.5 for _ in range(3)) if kind == "change" else 0
        outcome = Outcome(hits, redundant, missed, stale) if action == "ADD" else Outcome()
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


def _relative(candidate: float, heuristic: float) -> float:
    """The candidate's figure as a change relative to the heuristic's (0 when that is 0)."""
    return (candidate - heuristic) / heuristic if heuristic else 0.0


async def pipeline(
    train_lives: int, eval_lives: int, writes: int, questions: int, eval_from: int
) -> dict[str, Any]:
    """Log heuristic lives, train from the database, judge on held-out lives."""
    async with (
        scratch_server("engram-advisor-rl-") as server,
        open_kernel(settings=runtime_settings(server, scheduler=False)) as kernel,
    ):
        kernel.retrieval.use_feedback_budget(
            FeedbackBudget.unlimited()
        )  # its only agent is simulated
        started = time.perf_counter()
        logged = [
            await live(kernel, agent_life(seed, split="train", writes=writes, questions=questions))
            for seed in seeds("train", train_lives)
        ]
        logging_seconds = time.perf_counter() - started
        until = datetime.now(UTC) + timedelta(seconds=1)
        since = until - timedelta(days=1)
        started = time.perf_counter()
        # the lives are over: every outcome is in, so decisions up to now are complete
        run = await train_candidate(
            kernel.db, until=until, window=timedelta(days=1), min_decisions=1
        )
        train_seconds = time.perf_counter() - started
        if run.model is None:
            raise SystemExit(f"nothing trained: {run.reason}")
        policy = run.model.load()
        data = await training_data(kernel.db, since=since, until=until)
        replay = replay_logged(data.examples, policy)
        side = await simulate(
            kernel, policy, count=eval_lives, writes=writes, questions=questions, first=eval_from
        )
    wins, reasons = verdict(side, replay)
    result = side.to_json()
    h, c = result["heuristic"], result["candidate"]
    gain = _relative(c["usefulness"], h["usefulness"])
    return {
        "train_lives": train_lives,
        "eval_lives": eval_lives,
        "eval_seeds": [r.seed for r in side.heuristic],
        "writes_per_life": writes,
        "questions_per_life": questions,
        "logged": {
            "decisions": run.decisions,
            "seconds": round(logging_seconds, 1),
            "heuristic_usefulness_on_training_lives": totals(logged)["usefulness"],
        },
        "model": {
            "version": run.model.version,
            "digest": run.model.digest,
            "train_seconds": round(train_seconds, 3),
            "reward_curve": run.model.metrics.get("reward_curve"),
            "reference_reward": run.model.metrics.get("reference_reward"),
        },
        "heuristic": h,
        "candidate": c,
        "usefulness_gain": round(gain, 4),
        "answered_first_gain": round(_relative(c["answered_first"], h["answered_first"]), 4),
        "stale_shown_change": round(_relative(c["stale_shown"], h["stale_shown"]), 4),
        "goals": {
            "usefulness>=heuristic+10%": gain >= 0.10,
            "duplicates<=heuristic": c["duplicates_admitted"] <= h["duplicates_admitted"],
            "facts_lost<=heuristic": c["facts_lost"] <= h["facts_lost"],
            "store<=heuristic": c["store_size"] <= h["store_size"],
        },
        "verdict": {"wins": wins, "reasons": reasons},
        "replay_in_sample": replay,
        "lives": result["lives"],
    }


async def measure(
    decisions: int,
    proposals: int,
    lives: tuple[int, int, int, int, int] | None,
) -> dict[str, Any]:
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
    simulation = None if lives is None else await pipeline(*lives)
    return {
        "benchmark": "advisor_rl",
        "parameters": {"decisions": decisions, "proposals": proposals, "seed": SEED},
        "simulation": simulation,
        "training": {
            "seconds": round(seconds, 3),
            "goal_seconds_for_10k": 60,
            **trained.to_json(),
            "noop_share_heuristic": round(float(states[:, _F["heuristic_noop"]].mean()), 4),
            "noop_share_policy": round(float((chosen == ACTIONS.index("NOOP")).mean()), 4),
            "merge_share_policy": round(float((chosen == ACTIONS.index("UPDATE")).mean()), 4),
        },
        "decision_ms": {
            "heuristic": percentiles(timed["heuristic"]),
            "rl": percentiles(timed["rl"]),
            "policy_scoring": percentiles(scoring),
            "goal_p95_policy_ms": 1.0,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=10_000)
    parser.add_argument("--proposals", type=int, default=300)
    parser.add_argument("--train-lives", type=int, default=6)
    parser.add_argument("--eval-lives", type=int, default=3)
    parser.add_argument("--writes", type=int, default=400)
    parser.add_argument("--questions", type=int, default=120)
    parser.add_argument(
        "--eval-from", type=int, default=0, help="skip this many evaluation seeds (fresh lives)"
    )
    parser.add_argument("--no-simulation", action="store_true", help="costs only")
    args = parser.parse_args()
    lives = (args.train_lives, args.eval_lives, args.writes, args.questions, args.eval_from)
    report(measure(args.decisions, args.proposals, None if args.no_simulation else lives))


if __name__ == "__main__":
    main()
