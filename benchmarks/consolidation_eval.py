"""Consolidation quality on a labelled set: topics found, key facts kept, nothing lost.

Prints one JSON object. Every record of one half of ``tests/data/consolidation`` (``dev`` or
``test``: each writer's file of that half, or ``--file`` one; topics of 3-8 records, single
verbose records, single distractors, all shuffled) is
written through the Gate into a private embedded PostgreSQL; then one ``scheduled_deep`` pass
runs through ``kernel.consolidation`` and the result is read back from the database:

- **B-cubed** precision, recall and F1 of the topics the pass formed (every record not
  consumed is a topic of its own) against the labelled topics (a distractor is its own);
- **key-fact retention**: each labelled fact of a topic must appear (case aside) in the live
  text that now stands for it: a consolidated record derived from the topic's records, or a
  topic record left unconsumed;
- **words kept**: words of the consolidated records over words of the sources they consumed;
- **sources lost**: consumed sources without a ``derived_from`` edge from a live consolidated
  record to the version consumed, or no longer readable (must be 0);
- action agreement with the labels (merge / promote / skill / compress), for information.

The clustering and action thresholds were chosen on ``dev`` only (``--grid`` prints the dev
grid); ``test`` is the held-out half.

    python -m benchmarks.consolidation_eval --half test
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import datetime
from itertools import product
from pathlib import Path
from typing import Any
from uuid import UUID

from benchmarks.harness import bulk_writer, report, runtime_settings, scratch_server
from engram import open_kernel
from engram.kernel import Kernel
from engram.memory.consolidation import ConsolidationTrigger
from engram.memory.consolidation.candidates import Planner, PlannerSettings
from engram.memory.consolidation.summarize import ExtractiveSummarizer
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
)

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "consolidation"
WRITER = bulk_writer("eval-writer")


def files(half: str) -> list[Path]:
    """One half's files: the first writer's ``<half>.jsonl`` and each later writer's
    ``<half>_<writer>.jsonl``."""
    return [DATA / f"{half}.jsonl", *sorted(DATA.glob(f"{half}_*.jsonl"))]


def load(paths: list[Path]) -> list[dict[str, Any]]:
    """The topics of these files."""
    topics: list[dict[str, Any]] = []
    for path in paths:
        with path.open(encoding="utf-8") as handle:
            topics += [json.loads(line) for line in handle if line.strip()]
    return topics


def _metadata(kind: MemoryType, content: str) -> dict[str, Any]:
    """What each type's schema asks for beyond the text (the set gives text and time only)."""
    head = " ".join(content.split()[:4])
    extra: dict[MemoryType, dict[str, Any]] = {
        MemoryType.DECISION: {"rationale": "as recorded"},
        MemoryType.SKILL: {"steps": [content[:400]]},
        MemoryType.ENTITY: {"name": head, "kind": "thing"},
        MemoryType.PREFERENCE: {"subject": head},
        MemoryType.RESOURCE: {"locator": "https://example.org/resource"},
    }
    return extra.get(kind, {})


async def seed(kernel: Kernel, topics: list[dict[str, Any]], seed_value: int) -> dict[UUID, str]:
    """Write every record through the Gate (shuffled); its record id -> its topic id."""
    rows = [(t["id"], r) for t in topics for r in t["records"]]
    random.Random(seed_value).shuffle(rows)
    owner: dict[UUID, str] = {}
    first: UUID | None = None
    for topic_id, row in rows:
        kind = MemoryType(row["type"])
        record = MemoryRecord.draft(
            kind,
            row["content"],
            source_agent=WRITER.agent_id,
            metadata=_metadata(kind, row["content"]),
            event_time=datetime.fromisoformat(row["event_time"].replace("Z", "+00:00")),
            evidence_links=[first] if kind is MemoryType.REFLECTION and first else [],
        )
        if kind is MemoryType.REFLECTION and first is None:
            continue
        result = await kernel.gate.evaluate(
            GateRequest(GateAction.CREATE, record, WRITER, GateDecisionType.EXTERNAL)
        )
        if result.record_id is None:
            raise RuntimeError(f"seeding refused {topic_id}: {result.reason}")
        owner[result.record_id] = topic_id
        first = first or result.record_id
    return owner


def bcubed(found: list[list[UUID]], owner: dict[UUID, str]) -> dict[str, float]:
    """B-cubed precision, recall and F1 of ``found`` clusters against the labels."""
    cluster_of = {r: n for n, members in enumerate(found) for r in members}
    members_of: dict[int, list[UUID]] = defaultdict(list)
    for r, n in cluster_of.items():
        members_of[n].append(r)
    gold: dict[str, list[UUID]] = defaultdict(list)
    for r, t in owner.items():
        gold[t].append(r)
    precision = recall = 0.0
    for r, topic in owner.items():
        mine = members_of[cluster_of[r]]
        same = sum(1 for o in mine if owner[o] == topic)
        precision += same / len(mine)
        recall += same / len(gold[topic])
    n = len(owner)
    p, rc = precision / n, recall / n
    return {"precision": round(p, 4), "recall": round(rc, 4), "f1": round(2 * p * rc / (p + rc), 4)}


def clusters_from(planned: list[list[UUID]], owner: dict[UUID, str]) -> list[list[UUID]]:
    """The planned topics plus every other record as a topic of its own."""
    used = {r for members in planned for r in members}
    return planned + [[r] for r in owner if r not in used]


async def grid(kernel: Kernel, owner: dict[UUID, str], topics: list[dict[str, Any]]) -> list[Any]:
    """B-cubed F1 and action agreement over a grid of clustering thresholds (dev only)."""
    rows = []
    base = PlannerSettings()
    for threshold, entity_weight, time_weight, lexical_weight, horizon in product(
        (0.36, 0.40, 0.44, 0.50), (0.3, 0.5, 0.7), (0.3, 0.5), (0.3, 0.5), (21.0, 60.0)
    ):
        settings = replace(
            base,
            topics=replace(
                base.topics,
                threshold=threshold,
                link=threshold - 0.1,
                entity_weight=entity_weight,
                time_weight=time_weight,
                lexical_weight=lexical_weight,
                time_horizon_days=horizon,
            ),
        )
        planner = Planner(kernel.db, ExtractiveSummarizer(), settings)
        planned, _, _ = await planner.plan(since=None, limit=100_000, min_topic=1)
        found = clusters_from([list(c.source_ids) for c in planned], owner)
        rows.append(
            {
                "threshold": threshold,
                "entity_weight": entity_weight,
                "time_weight": time_weight,
                "lexical_weight": lexical_weight,
                "time_horizon_days": horizon,
                **bcubed(found, owner),
                "action_agreement": _agreement(planned, owner, topics),
            }
        )
    return sorted(rows, key=lambda r: -r["f1"])


def _agreement(planned: Any, owner: dict[UUID, str], topics: list[dict[str, Any]]) -> float:
    label = {t["id"]: t["action"] for t in topics}
    hits = total = 0
    for candidate in planned:
        votes = Counter(owner[r] for r in candidate.source_ids)
        topic, _ = votes.most_common(1)[0]
        total += 1
        hits += int(label[topic] == candidate.action.value)
    return round(hits / total, 4) if total else 0.0


async def outcome(
    kernel: Kernel, owner: dict[UUID, str], topics: list[dict[str, Any]]
) -> dict[str, Any]:
    """Run one deep pass and measure what it left in the database."""
    # the writes' conflict resolutions are delivered first, as a nightly pass finds them
    await kernel.events.settled()
    started = time.perf_counter()
    result = await kernel.consolidation.run(ConsolidationTrigger.SCHEDULED_DEEP)
    seconds = time.perf_counter() - started
    items = [item for batch in result.batches if batch.committed for item in batch.items]
    found = clusters_from([list(item.sources) for item in items], owner)
    texts: dict[UUID, str] = {}
    for item in items:
        head = await kernel.db.fetchrow(
            "SELECT content, status::text AS status FROM engram.memories "
            "WHERE record_id = $1 AND superseded_by IS NULL",
            item.record_id,
        )
        texts[item.record_id] = head["content"] if head else ""
    derived_of: dict[UUID, list[UUID]] = defaultdict(list)
    for item in items:
        for source in item.sources:
            derived_of[source].append(item.record_id)
    lost = 0
    for item in items:
        for version in item.source_versions:
            linked = await kernel.db.fetchval(
                "SELECT count(*) FROM engram.memory_edges e JOIN engram.memories m "
                "ON m.id = e.source_id WHERE e.target_id = $1 AND e.kind = 'derived_from' "
                "AND m.record_id = $2",
                version,
                item.record_id,
            )
            readable = await kernel.db.fetchval(
                "SELECT count(*) FROM engram.memories WHERE id = $1", version
            )
            lost += int(not linked or not readable)
    record_text = {
        r["record_id"]: r["content"]
        for r in await kernel.db.fetch(
            "SELECT record_id, content FROM engram.memories WHERE version = 1"
        )
    }
    kept = total = 0
    lost_examples: list[dict[str, str]] = []
    for topic in topics:
        members = [r for r, t in owner.items() if t == topic["id"]]
        standing = [record_text[r] for r in members if r not in derived_of]
        standing += [texts[c] for r in members for c in derived_of.get(r, [])]
        body = " ".join(standing).casefold()
        for fact in topic["key_facts"]:
            total += 1
            if " ".join(fact.casefold().split()) in " ".join(body.split()):
                kept += 1
            elif len(lost_examples) < 10:
                lost_examples.append({"topic": topic["id"], "fact": fact})
    source_words = sum(len(record_text[s].split()) for item in items for s in item.sources)
    summary_words = sum(len(texts[item.record_id].split()) for item in items)
    by_action = Counter(item.action.value for item in items)
    return {
        "bcubed": bcubed(found, owner),
        "key_facts": {
            "total": total,
            "kept": kept,
            "retention": round(kept / total, 4) if total else 1.0,
            "lost_examples": lost_examples,
        },
        "words_kept_ratio": round(summary_words / source_words, 4) if source_words else None,
        "sources_consumed": sum(len(item.sources) for item in items),
        "sources_lost": lost,
        "consolidated_records": len(items),
        "by_action": dict(by_action),
        "action_agreement": _agreement(
            [type("C", (), {"source_ids": i.sources, "action": i.action})() for i in items],
            owner,
            topics,
        ),
        "skipped": result.skipped,
        "pass_seconds": round(seconds, 3),
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    paths = [args.file] if args.file else files(args.half)
    topics = load(paths)
    async with (
        scratch_server("engram-consolidation-eval-") as server,
        open_kernel(settings=runtime_settings(server)) as kernel,
    ):
        owner = await seed(kernel, topics, args.seed)
        result: dict[str, Any] = {
            "benchmark": "consolidation_eval",
            "half": args.half,
            "files": [path.name for path in paths],
            "topics": sum(1 for t in topics if t["action"] != "none"),
            "distractors": sum(1 for t in topics if t["action"] == "none"),
            "records": len(owner),
            "python": platform.python_version(),
        }
        if args.grid:
            if args.half != "dev" or args.file:
                raise SystemExit("--grid tunes: dev half only")
            result["grid"] = (await grid(kernel, owner, topics))[:15]
            return result
        result.update(await outcome(kernel, owner, topics))
        result["targets"] = {"bcubed_f1": 0.95, "key_fact_retention": 0.98, "sources_lost": 0}
        result["met"] = {
            "bcubed_f1": result["bcubed"]["f1"] >= 0.95,
            "key_fact_retention": result["key_facts"]["retention"] >= 0.98,
            "sources_lost": result["sources_lost"] == 0,
        }
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("dev", "test"), default="test")
    parser.add_argument("--file", type=Path, help="one writer's file instead of a half")
    parser.add_argument("--grid", action="store_true", help="tune on dev: print the grid")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    report(measure(args))


if __name__ == "__main__":
    main()
