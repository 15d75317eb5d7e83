"""Layer 2's agreement with an expert on proposed writes (issue 15; the specification's A5).

Prints one JSON object. Each line of ``tests/data/advisor/{dev,test}.jsonl`` holds a small
``store`` of records, a ``proposal`` (a CREATE) and the action an expert would take: ``ADD``,
``UPDATE`` of a stored record, or ``NOOP`` (nothing new over a stored record); see the set's
README. ``--half test`` (the default) reads the half nothing was tuned on.

- A private embedded PostgreSQL; each item gets its own namespace, and its store is written
  through the Gate by a trusted writer (the real write path: embeddings, version rows, audit).
  The set gives content and only some metadata; what a type's schema requires and the set
  leaves out is completed the same way for every record, so that no stored record is
  refused (see :func:`complete`): a skill's one step is its content, a decision's rationale
  and a preference's subject are "not recorded" / "general", every episode happened at one
  instant, and a reflection cites one evidence record written first in the item's namespace.
  An item whose store the kernel refuses to hold (a "belief" that reads as an instruction)
  is not judged: it is listed under ``refused_items`` and left out of the agreement.
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
from datetime import UTC, datetime
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


#: When every episode of the set happened (the set gives no times; one instant for all
#: keeps the accounts of one item comparable).
EPISODE_TIME = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


#: Metadata a type's schema requires, where the set leaves it out.
def _required(kind: MemoryType, content: str) -> tuple[str, object] | None:
    """The metadata key a type's schema requires and the value used where the set has none."""
    if kind is MemoryType.DECISION:
        return "rationale", "not recorded"
    if kind is MemoryType.PREFERENCE:
        return "subject", "general"
    if kind is MemoryType.SKILL:
        return "steps", [content]
    return None


def complete(side: dict[str, Any], evidence: UUID) -> dict[str, Any]:
    """The record's fields with what its type's schema requires and the set leaves out."""
    kind = MemoryType(side["type"])
    metadata = dict(side.get("metadata") or {})
    required = _required(kind, side["content"])
    if required is not None:
        metadata.setdefault(*required)
    return {
        "metadata": metadata,
        "event_time": EPISODE_TIME if kind is MemoryType.EPISODE else None,
        "evidence_links": [evidence] if kind is MemoryType.REFLECTION else [],
    }


def _draft(side: dict[str, Any], namespace: str, evidence: UUID) -> MemoryRecord:
    return MemoryRecord.draft(
        MemoryType(side["type"]),
        side["content"],
        source_agent=WRITER.agent_id,
        source_confidence=side.get("source_confidence"),
        namespace=namespace,
        **complete(side, evidence),
    )


class Refused(Exception):
    """The kernel refused a record of an item's store (the item cannot be judged)."""


async def _write(kernel: Kernel, record: MemoryRecord) -> MemoryRecord:
    """Write one store record through the Gate."""
    request = GateRequest(GateAction.CREATE, record, WRITER, GateDecisionType.EXTERNAL)
    result = await kernel.gate.evaluate(request)
    if result.modified_record is None:
        raise Refused(result.reason)
    return result.modified_record


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
    evidence = await _write(
        kernel,
        MemoryRecord.draft(
            MemoryType.EPISODE,
            f"Observations behind the reflections of item {item['id']}.",
            source_agent=WRITER.agent_id,
            namespace=namespace,
            event_time=EPISODE_TIME,
        ),
    )
    keys: dict[UUID, str] = {}
    for stored in item["store"]:
        written = await _write(kernel, _draft(stored, namespace, evidence.record_id))
        keys[written.record_id] = stored["key"]
    await kernel.events.settled()
    proposal = GateRequest(
        GateAction.CREATE,
        _draft(item["proposal"], namespace, evidence.record_id),
        WRITER,
        GateDecisionType.EXTERNAL,
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
        judged: list[tuple[str, str | None]] = []
        refused: list[dict[str, str]] = []
        kept: list[dict[str, Any]] = []
        for n, item in enumerate(items):
            try:
                judged.append(await judge(kernel, n, item))
            except Refused as exc:
                refused.append({"id": item["id"], "reason": str(exc)})
                continue
            kept.append(item)
        advisor = kernel.gate.advisor.version
    items = kept
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
        "refused_items": refused,
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
