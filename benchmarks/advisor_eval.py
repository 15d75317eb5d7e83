"""Layer 2's agreement with an expert on proposed writes (issue 15; the specification's A5).

Prints one JSON object. Each line of ``tests/data/advisor/{dev,test}.jsonl`` holds a small
``store`` of records, a ``proposal`` (a CREATE) and the action an expert would take: ``ADD``,
``UPDATE`` of a stored record, or ``NOOP`` (nothing new over a stored record); see the set's
README. ``--half test`` (the default) reads the half nothing was tuned on.

- A private embedded PostgreSQL; each item gets its own namespace, and its store is written
  through the Gate by a trusted writer (the real write path: embeddings, version rows, audit).
- The proposal is then decided as the Gate decides it, without being written: Layer 1, the
  real neighbour query and the active advisor (``gate.decision.advise``).
- The advice is read as the Gate would act on it: ``NOOP`` is a NOOP of its target; an ADD
  that the Gate links to a stored record as a supersession or refinement, or names as an
  update candidate (cosine ≥ 0.80), is an UPDATE of that record; any other ADD adds.
- ``agreement`` counts the action; ``agreement_with_target`` also asks that an UPDATE or NOOP
  names the record the expert named.

    python -m benchmarks.advisor_eval [--half dev|test] [--items PATH]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any
from uuid import UUID

from benchmarks.harness import bulk_writer, report, runtime_settings, scratch_server
from engram import open_kernel
from engram.kernel import Kernel
from engram.memory import store
from engram.memory.fingerprint import content_hash
from engram.memory.gate.advisor import AdvisorAction, AdvisorDecision
from engram.memory.gate.decision import advise, screen
from engram.memory.gate.rate_limit import Decided, RateDecision
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    ConflictClassification,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    readable_levels,
)

ROOT = Path(__file__).resolve().parent.parent
HALVES = ROOT / "tests" / "data" / "advisor"
ACTIONS = ("ADD", "UPDATE", "NOOP")
GOAL = 0.90
WRITER = bulk_writer("advisor-eval")
_ALLOWED = Decided(RateDecision(allowed=True, retry_after_seconds=0.0, per_minute=0.0))
_REPLACING = {ConflictClassification.SUPERSESSION, ConflictClassification.REFINEMENT}


def _draft(side: dict[str, Any], namespace: str) -> MemoryRecord:
    return MemoryRecord.draft(
        MemoryType(side["type"]),
        side["content"],
        source_agent=WRITER.agent_id,
        metadata=side.get("metadata"),
        source_confidence=side.get("source_confidence"),
        namespace=namespace,
    )


def read_advice(decision: AdvisorDecision, keys: dict[UUID, str]) -> tuple[str, str | None]:
    """The action the Gate would take on this advice, and the stored record's key it names."""
    if decision.action is AdvisorAction.NOOP:
        return "NOOP", keys.get(decision.target_record_id) if decision.target_record_id else None
    replaced = [c for c in decision.conflicts if c.classification in _REPLACING]
    if replaced:
        return "UPDATE", keys.get(replaced[0].existing_record_id)
    if decision.update_candidate_of is not None:
        return "UPDATE", keys.get(decision.update_candidate_of)
    return "ADD", None


async def judge(kernel: Kernel, number: int, item: dict[str, Any]) -> tuple[str, str | None]:
    """Write the item's store, then decide its proposal without writing it."""
    namespace = f"advisor-eval-{number}"
    keys: dict[UUID, str] = {}
    for stored in item["store"]:
        request = GateRequest(
            GateAction.CREATE, _draft(stored, namespace), WRITER, GateDecisionType.EXTERNAL
        )
        result = await kernel.gate.evaluate(request)
        if result.modified_record is not None:
            keys[result.modified_record.record_id] = stored["key"]
    await kernel.events.settled()
    proposal = GateRequest(
        GateAction.CREATE, _draft(item["proposal"], namespace), WRITER, GateDecisionType.EXTERNAL
    )
    screening = screen(proposal, head=None, missing_evidence=(), limiter=_ALLOWED)
    record = screening.layer1.record
    embedding = await kernel.embeddings.embed_one(record.content)
    exact, nearest = await store.candidates(
        kernel.db,
        embedding=embedding,
        namespace=namespace,
        memory_type=record.type,
        content_hash=content_hash(record.content),
        levels=readable_levels(WRITER),
    )
    decision = await advise(
        proposal,
        screening.layer1,
        head=None,
        exact=exact,
        nearest=nearest,
        embedded=True,
        advisor=kernel.gate.advisor,
    )
    return read_advice(decision, keys)


def score(items: list[dict[str, Any]], judged: list[tuple[str, str | None]]) -> dict[str, Any]:
    """Agreement overall and per expert action, and the confusion matrix."""
    matrix = {gold: dict.fromkeys(ACTIONS, 0) for gold in ACTIONS}
    with_target = 0
    for item, (action, target) in zip(items, judged, strict=True):
        matrix[item["label"]][action] += 1
        if action == item["label"] and (action == "ADD" or target == item["target"]):
            with_target += 1
    agreed = sum(matrix[a][a] for a in ACTIONS)
    n = len(items)
    return {
        "agreement": round(agreed / n, 4) if n else 0.0,
        "agreement_with_target": round(with_target / n, 4) if n else 0.0,
        "per_action_recall": {
            a: round(matrix[a][a] / sum(matrix[a].values()), 4) if sum(matrix[a].values()) else 0.0
            for a in ACTIONS
        },
        "confusion_matrix": matrix,
        "goal": {f"agreement>={GOAL}": agreed / n >= GOAL if n else False},
    }


def load(path: Path) -> list[dict[str, Any]]:
    """The items of a set file."""
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


async def measure(path: Path) -> dict[str, Any]:
    """Judge every item of one set file and score the answers."""
    items = load(path)
    async with (
        scratch_server("engram-advisor-eval-") as server,
        open_kernel(settings=runtime_settings(server, scheduler=False)) as kernel,
    ):
        judged = [await judge(kernel, n, item) for n, item in enumerate(items)]
        advisor = kernel.gate.advisor.version
    misses = [
        {"id": item["id"], "label": item["label"], "got": action, "target": target}
        for item, (action, target) in zip(items, judged, strict=True)
        if action != item["label"]
    ]
    return {
        "benchmark": "advisor_eval",
        "items_file": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
        "items": len(items),
        "labels": dict(Counter(item["label"] for item in items)),
        "advisor": advisor,
        **score(items, judged),
        "disagreements": misses,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("dev", "test"), default="test")
    parser.add_argument("--items", type=Path, help="another set file instead of a half")
    args = parser.parse_args()
    report(measure(args.items or HALVES / f"{args.half}.jsonl"))


if __name__ == "__main__":
    main()
