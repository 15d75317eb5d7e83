"""Learn the type prior (``engram.retrieval.type_prior``) from the retrieval training sets.

Reads every ``tests/data/retrieval/train_<w>_memories.jsonl`` with its
``train_<w>_queries.jsonl`` (stores and questions by writers who never saw the evaluation
set), embeds the questions with the real model and fits a multinomial logistic regression
from a question's embedding to the memory type of the records that answer it (its grade-2
records; a question answered by records of several types counts once per type, weighted by
the share of its answers of that type). scikit-learn's ``LogisticRegression`` (L-BFGS,
``--c`` the inverse penalty) fits it here; the kernel only multiplies by the weights. Writes
``src/engram/retrieval/query_types.npz`` (weights and intercepts as float32, the types in
row order and the model's name). ``--check`` instead holds out each writer in turn (trained on
the others) and prints how often its questions' most likely type is one of their answers'
types, and the mean probability given to those types. The evaluation set is never read here;
the prior's weight in the order was chosen on its dev half (ADR-015, 2026-11-28, second).

    python tools/train_query_types.py [--check] [--c 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from sklearn.linear_model import LogisticRegression

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.conflict_eval import embedder_for_evaluation  # noqa: E402
from engram.config import EngramSettings  # noqa: E402
from engram.memory.types import MemoryType  # noqa: E402
from tools.train_query_adapter import training_sets  # noqa: E402

OUT = ROOT / "src" / "engram" / "retrieval" / "query_types.npz"
TYPES = [t.value for t in MemoryType]


@dataclass
class Writer:
    """One writer's questions (embedded) and, per question, its answers' types."""

    name: str
    questions: npt.NDArray[np.float64]
    answer_types: list[list[str]]

    def samples(self) -> tuple[list[npt.NDArray[np.float64]], list[int], list[float]]:
        """One row per (question, answer type), weighted by that type's share of answers."""
        rows, labels, weights = [], [], []
        for vector, kinds in zip(self.questions, self.answer_types, strict=True):
            for kind in sorted(set(kinds)):
                rows.append(vector)
                labels.append(TYPES.index(kind))
                weights.append(kinds.count(kind) / len(kinds))
        return rows, labels, weights


async def load_writers() -> list[Writer]:
    embedder = await embedder_for_evaluation()
    writers = []
    try:
        for name, memories, queries in training_sets():
            kind = {m["key"]: m["type"] for m in memories}
            answers = [[kind[k] for k, g in q["relevant"].items() if g == 2] for q in queries]
            kept = [i for i, a in enumerate(answers) if a]
            asked = await embedder.embed_batch([queries[i]["query"] for i in kept])
            writers.append(
                Writer(name, np.asarray(asked, dtype=np.float64), [answers[i] for i in kept])
            )
    finally:
        await embedder.close()
    return writers


def fit(writers: list[Writer], c: float) -> LogisticRegression:
    rows, labels, weights = [], [], []
    for writer in writers:
        more = writer.samples()
        rows += more[0]
        labels += more[1]
        weights += more[2]
    model = LogisticRegression(C=c, max_iter=3000)
    model.fit(np.vstack(rows), np.asarray(labels), sample_weight=np.asarray(weights))
    if list(model.classes_) != list(range(len(TYPES))):
        raise SystemExit("every memory type must answer some training question")
    return model


def check(model: LogisticRegression, writer: Writer) -> dict[str, float]:
    probabilities = model.predict_proba(writer.questions)
    top = [
        TYPES[int(np.argmax(p))] in kinds
        for p, kinds in zip(probabilities, writer.answer_types, strict=True)
    ]
    given = [
        sum(p[TYPES.index(k)] for k in set(kinds))
        for p, kinds in zip(probabilities, writer.answer_types, strict=True)
    ]
    return {
        "top_type_answers": round(float(np.mean(top)), 4),
        "mass_on_answers": round(float(np.mean(given)), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="hold out each writer in turn")
    parser.add_argument("--c", type=float, default=1.0, help="inverse L2 penalty")
    args = parser.parse_args()
    writers = asyncio.run(load_writers())
    if args.check:
        held = {w.name: check(fit([o for o in writers if o is not w], args.c), w) for w in writers}
        print(json.dumps({"held_out_writer": held, "c": args.c}, indent=2))
        return
    model = fit(writers, args.c)
    name = EngramSettings().embedding_model_name
    np.savez(
        OUT,
        coef=model.coef_.astype(np.float32),
        intercept=model.intercept_.astype(np.float32),
        types=np.array(TYPES),
        model=np.array(name),
    )
    print(
        json.dumps(
            {
                "written": str(OUT.relative_to(ROOT)),
                "writers": [w.name for w in writers],
                "questions": sum(len(w.answer_types) for w in writers),
                "c": args.c,
                "model": name,
            }
        )
    )


if __name__ == "__main__":
    main()
