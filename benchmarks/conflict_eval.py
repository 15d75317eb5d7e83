"""Conflict detection quality on the labelled pair set (issue 15, ADR-010).

Prints one JSON object. ``--half test`` (the default) reads ``tests/data/conflict/test.jsonl``,
the half no rule, threshold or model was tuned on; ``--half dev`` the half the classifier
was trained on (so its figures flatter it). Each line of the set is a JSON object with
``id``, ``type``, ``label`` (``contradiction``, ``supersession``, ``refinement``,
``unresolvable`` or ``none``) and the ``old`` and ``new`` records (``content`` and,
optionally, ``metadata``, ``event_time`` and ``source_confidence``).

- Both records of a pair are built with ``MemoryRecord.draft`` and must pass the type schema
  (a reflection gets one random evidence link). The old record is ingested a minute before
  the new one, as it would be in the store.
- Every content is embedded with the real model, in batches; the similarity of a pair is the
  dot product of the two unit vectors (their cosine).
- The detector runs as the Gate runs it, through the one entry point
  ``ConflictDetector.detect(new, [old], similarities={old.id: cosine})`` (what
  ``kernel.conflicts.detect`` is); an empty answer is the prediction ``none``. Its time per
  pair is measured around that call (features, classifier and rules; not the embedding).
- The confusion matrix maps each label to the counts of what was predicted for it.
- ``silent_retirements`` counts pairs labelled ``none`` or ``refinement`` (both records true)
  predicted ``supersession`` or ``contradiction``: each would end or challenge a true record.
  ``unresolvable_acted_on`` counts pairs a person should decide that were acted on instead.
- ``store_noise`` measures what the labelled pairs cannot: how often the detector flags a
  record's ordinary neighbours. ``--noise-texts`` seeded agent-memory texts (the benchmarks'
  generator: two facts each, about the same services, people and numbers) are embedded; each
  goes through ``detect`` with its eight nearest, as in the Gate (which judges the
  ``JUDGED`` most similar); the share of judged pairs reported as each class. The share is not
  all noise: the generator gives one service's attribute random values in different texts
  ("the billing API keeps 63 days of history" / "keeps 12 days"), which are real conflicts a
  person should decide: in a sample of pairs a retrained model escalated and the packaged one
  did not, 8 of 10 were such conflicts (ADR-010, amendment of 2026-11-28, fourth). A rise in
  the share is a question to answer by reading the pairs, not a verdict.

    python -m benchmarks.conflict_eval [--half dev|test] [--pairs PATH] [--noise-texts N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.agent_text import texts
from benchmarks.stats import percentiles
from engram.config import EMBEDDING_DIMENSION, EngramSettings
from engram.infra.embeddings import EmbeddingAdapter
from engram.memory.conflict.detection import JUDGED, ConflictDetector
from engram.memory.schemas import validate_record
from engram.memory.types import MemoryRecord, MemoryType
from engram.observability.logging import configure_logging

ROOT = Path(__file__).resolve().parent.parent
HALVES = ROOT / "tests" / "data" / "conflict"
LABELS = ("contradiction", "supersession", "refinement", "unresolvable", "none")
ACCURACY_GOAL = 0.85
RECALL_GOAL = 0.80
ACTED_ON = ("supersession", "contradiction")
BATCH = 64
INGESTED = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Pair:
    """One labelled pair: the existing record, the proposal and the expected class."""

    id: str
    label: str
    old: MemoryRecord
    new: MemoryRecord


def _record(kind: MemoryType, side: dict[str, Any], ingested: datetime) -> MemoryRecord:
    event_time = side.get("event_time")
    record = MemoryRecord.draft(
        kind,
        side["content"],
        source_agent="conflict-eval",
        metadata=side.get("metadata"),
        event_time=datetime.fromisoformat(event_time) if event_time else None,
        source_confidence=side.get("source_confidence"),
        evidence_links=[uuid.uuid4()] if kind is MemoryType.REFLECTION else [],
    )
    return record.model_copy(update={"ingestion_time": ingested})


def load_pairs(path: Path) -> list[Pair]:
    """The pairs of a set file; stops at the first invalid line or record."""
    pairs: list[Pair] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        if row["label"] not in LABELS:
            raise SystemExit(f"{path}:{number}: unknown label {row['label']!r}")
        kind = MemoryType(row["type"])
        old = _record(kind, row["old"], INGESTED)
        new = _record(kind, row["new"], INGESTED + timedelta(minutes=1))
        for record in (old, new):
            problems = validate_record(record)
            if problems:
                raise SystemExit(f"{path}:{number}: invalid record: {'; '.join(problems)}")
        pairs.append(Pair(row["id"], row["label"], old, new))
    return pairs


async def similarities(embedder: EmbeddingAdapter, pairs: list[Pair]) -> list[float]:
    """Cosine similarity of each pair's two contents, embedding each distinct text once."""
    texts = sorted({r.content for p in pairs for r in (p.old, p.new)})
    vectors: dict[str, list[float]] = {}
    for start in range(0, len(texts), BATCH):
        chunk = texts[start : start + BATCH]
        vectors.update(zip(chunk, await embedder.embed_batch(chunk), strict=True))
    return [
        sum(a * b for a, b in zip(vectors[p.old.content], vectors[p.new.content], strict=True))
        for p in pairs
    ]


async def predict(
    pairs: list[Pair], sims: list[float], detector: ConflictDetector | None = None
) -> tuple[list[str], list[float]]:
    """The detector's class for each pair (``none`` when it reports no conflict), and the
    milliseconds each call took."""
    detector = detector or ConflictDetector()
    predicted: list[str] = []
    took: list[float] = []
    for pair, similarity in zip(pairs, sims, strict=True):
        start = time.perf_counter()
        found = await detector.detect(pair.new, [pair.old], similarities={pair.old.id: similarity})
        took.append((time.perf_counter() - start) * 1000)
        predicted.append(found[0].classification.value if found else "none")
    return predicted, took


def score(labels: list[str], predicted: list[str]) -> dict[str, Any]:
    """Confusion matrix, per-class precision/recall/F1, accuracy and the goals."""
    matrix = {gold: dict.fromkeys(LABELS, 0) for gold in LABELS}
    for gold, guess in zip(labels, predicted, strict=True):
        matrix[gold][guess] += 1
    per_class: dict[str, dict[str, float | int]] = {}
    for label in LABELS:
        hits = matrix[label][label]
        said = sum(matrix[gold][label] for gold in LABELS)
        support = sum(matrix[label].values())
        precision = hits / said if said else 0.0
        recall = hits / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class[label] = {
            "support": support,
            "precision": round(precision, 4),
            "recall": round(recall, 4),
            "f1": round(f1, 4),
        }
    accuracy = sum(matrix[label][label] for label in LABELS) / len(labels) if labels else 0.0
    retired = sum(matrix[gold][acted] for gold in ("none", "refinement") for acted in ACTED_ON)
    recalls = {label: float(per_class[label]["recall"]) for label in LABELS}
    return {
        "confusion_matrix": matrix,
        "per_class": per_class,
        "accuracy": round(accuracy, 4),
        "silent_retirements": retired,
        "unresolvable_acted_on": sum(matrix["unresolvable"][acted] for acted in ACTED_ON),
        "goals": {
            f"accuracy>={ACCURACY_GOAL}": accuracy >= ACCURACY_GOAL,
            f"supersession_recall>={RECALL_GOAL}": recalls["supersession"] >= RECALL_GOAL,
            f"contradiction_recall>={RECALL_GOAL}": recalls["contradiction"] >= RECALL_GOAL,
            "silent_retirements==0": retired == 0,
        },
    }


async def evaluate(embedder: EmbeddingAdapter, path: Path) -> dict[str, Any]:
    """Run the whole evaluation of one set file with one embedder; the printed object."""
    pairs = load_pairs(path)
    sims = await similarities(embedder, pairs)
    detector = ConflictDetector()
    predicted, took = await predict(pairs, sims, detector)
    labels = [p.label for p in pairs]
    misses = [
        {"id": p.id, "label": p.label, "predicted": guess, "similarity": round(sim, 3)}
        for p, guess, sim in zip(pairs, predicted, sims, strict=True)
        if guess != p.label
    ]
    return {
        "parameters": {
            "pairs_file": str(path),
            "pairs": len(pairs),
            "labels": dict(Counter(labels)),
            "detector": f"{type(detector).__qualname__} {detector.version}",
            "embedding_model": embedder.model_name,
        },
        **score(labels, predicted),
        "ms_per_pair": percentiles(took),
        "misclassified": misses,
    }


async def embedder_for_evaluation() -> EmbeddingAdapter:
    """The real embedding model from the project's model directory, started."""
    from engram.infra.fastembed_embedder import FastembedEmbedder  # noqa: PLC0415
    from engram.infra.model_files import ensure_default_model  # noqa: PLC0415

    configure_logging("warning", "json")  # stdout carries the JSON result only
    settings = EngramSettings(data_dir=ROOT / ".engram")
    ensure_default_model(settings.model_dir)
    embedder = FastembedEmbedder(
        settings.model_dir,
        model_name=settings.embedding_model_name,
        dimension=EMBEDDING_DIMENSION,
        timeout_seconds=60.0,
    )
    await embedder.start()
    return embedder


async def store_noise(embedder: EmbeddingAdapter, count: int) -> dict[str, Any]:
    """The share of ordinary neighbour pairs the detector reports, by class."""
    import numpy as np  # noqa: PLC0415 - only this measurement needs it

    corpus = texts(count, seed=29)
    vectors: list[list[float]] = []
    for start in range(0, len(corpus), BATCH):
        vectors += await embedder.embed_batch(corpus[start : start + BATCH])
    records = [
        MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="conflict-eval") for text in corpus
    ]
    matrix = np.asarray(vectors) @ np.asarray(vectors).T
    detector = ConflictDetector()
    found: Counter[str] = Counter()
    judged = 0
    for i, row in enumerate(matrix):
        nearest = [int(j) for j in np.argsort(-row) if j != i][:8]
        similarities = {records[j].id: float(row[j]) for j in nearest}
        judged += min(JUDGED, len(nearest))
        results = await detector.detect(
            records[i], [records[j] for j in nearest], similarities=similarities
        )
        found.update(result.classification.value for result in results)
    found["none"] = judged - sum(found.values())
    return {
        "texts": count,
        "pairs_judged": judged,
        "share": {label: round(found[label] / judged, 4) if judged else 0.0 for label in LABELS},
    }


async def _main(path: Path, noise: int) -> dict[str, Any]:
    embedder = await embedder_for_evaluation()
    try:
        if noise:
            return {
                **await evaluate(embedder, path),
                "store_noise": await store_noise(embedder, noise),
            }
        return await evaluate(embedder, path)
    finally:
        await embedder.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("dev", "test"), default="test")
    parser.add_argument("--pairs", type=Path, help="another set file instead of a half")
    parser.add_argument("--noise-texts", type=int, default=300, help="0: skip store_noise")
    args = parser.parse_args()
    path = args.pairs or HALVES / f"{args.half}.jsonl"
    print(json.dumps(asyncio.run(_main(path, args.noise_texts)), indent=2))


if __name__ == "__main__":
    main()
