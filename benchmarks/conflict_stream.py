"""Conflicts the detector reports in a stream of true records (issue 15, ADR-010).

Prints one JSON object. The labelled pairs ask whether the detector tells a change from a
compatible detail *within a pair about one subject*; a store asks something else: a new
record is compared with its nearest neighbours, which are often about other things. This
benchmark replays the records of one half of ``tests/data/consolidation`` (episodes, beliefs,
skills and the other types, by several writers, with event times) in event-time order, as an
agent would write them, and runs the detector as the Gate does: each record against the
``NEIGHBOURS`` most similar earlier records of its type, through
``ConflictDetector.detect`` with their cosine similarities (it judges the ``JUDGED`` closest).

Every record of those sets is a true account when it was written. A record of another
topic never changes it: each ``supersession`` or ``contradiction`` reported against one is a
true record ended or challenged (``retirements_by_topic.other_topic``, errors by
construction). Within one topic a later step may change a state an earlier one described
("piloted in one store" / "deployed to all stores"), but a later occurrence of a recurring
event ("the sump pump cycles every 40 minutes again") never does, so ``same_topic`` is read
pair by pair. Every ``unresolvable`` is an escalation a person would have to read.

    python -m benchmarks.conflict_stream [--half dev|test] [--file PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.conflict_eval import BATCH, embedder_for_evaluation
from benchmarks.consolidation_eval import files, load
from engram.memory.conflict.detection import JUDGED, ConflictDetector
from engram.memory.gate.librarian import NEIGHBOURS
from engram.memory.types import MemoryRecord, MemoryType
from engram.observability.logging import configure_logging

ACTED_ON = ("supersession", "contradiction")


def stream(topics: list[dict[str, Any]]) -> list[tuple[str, MemoryRecord]]:
    """Every record with its topic id, in event-time order (file order breaks ties)."""
    rows = [
        (
            topic["id"],
            MemoryRecord.draft(
                MemoryType(row["type"]),
                row["content"],
                source_agent="conflict-stream",
                event_time=datetime.fromisoformat(row["event_time"].replace("Z", "+00:00")),
            ),
        )
        for topic in topics
        for row in topic["records"]
    ]
    return sorted(rows, key=lambda row: row[1].event_time or datetime.min)


async def replay(paths: list[Path]) -> dict[str, Any]:
    """Run the stream of these files through the detector; the printed object."""
    rows = stream(load(paths))
    embedder = await embedder_for_evaluation()
    try:
        contents = [record.content for _, record in rows]
        vectors: list[list[float]] = []
        for start in range(0, len(contents), BATCH):
            vectors += await embedder.embed_batch(contents[start : start + BATCH])
    finally:
        await embedder.close()
    matrix = np.asarray(vectors) @ np.asarray(vectors).T
    detector = ConflictDetector()
    found: Counter[str] = Counter()
    retirements = {"same_topic": 0, "other_topic": 0}
    judged = 0
    examples: list[dict[str, Any]] = []
    for i, (topic, record) in enumerate(rows):
        earlier = [j for j in range(i) if rows[j][1].type is record.type]
        nearest = sorted(earlier, key=lambda j: -matrix[i, j])[:NEIGHBOURS]
        judged += min(JUDGED, len(nearest))
        results = await detector.detect(
            record,
            [rows[j][1] for j in nearest],
            similarities={rows[j][1].id: float(matrix[i, j]) for j in nearest},
        )
        for result in results:
            kind = result.classification.value
            found[kind] += 1
            if kind in ACTED_ON:
                other = next(
                    j for j in nearest if rows[j][1].record_id == result.existing_record_id
                )
                where = "same_topic" if rows[other][0] == topic else "other_topic"
                retirements[where] += 1
                examples.append(
                    {
                        "kind": kind,
                        "old": rows[other][0],
                        "new": topic,
                        "similarity": round(result.similarity, 3),
                    }
                )
    return {
        "benchmark": "conflict_stream",
        "files": [path.name for path in paths],
        "records": len(rows),
        "pairs_judged": judged,
        "reported": {
            kind: found[kind]
            for kind in ("supersession", "contradiction", "unresolvable", "refinement")
        },
        "retirements": sum(retirements.values()),
        "retirements_by_topic": retirements,
        "escalations": found["unresolvable"],
        "retired_pairs": examples,
        "detector": detector.version,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("dev", "test"), default="test")
    parser.add_argument("--file", type=Path, help="one writer's file instead of a half")
    args = parser.parse_args()
    configure_logging("warning")
    paths = [args.file] if args.file else files(args.half)
    print(json.dumps(asyncio.run(replay(paths)), indent=2))


if __name__ == "__main__":
    main()
