"""Learn the query adapter (``engram.retrieval.adapter``) from the retrieval training sets.

Reads every ``tests/data/retrieval/train_<w>_memories.jsonl`` with its
``train_<w>_queries.jsonl`` (stores and questions by writers who never saw the evaluation
set), embeds them with the real model, and fits ``A`` so that ``normalize((I + A) q)`` ranks
each question's grade-2 records ahead of the rest of its writer's store: the loss is the
negative log of the softmax mass (temperature ``--tau``) the question's answers get among all
the records of its store, plus ``--reg`` / 2 times the squared size of ``A``, minimised by
full-batch Adam from ``A = 0`` (deterministic: no sampling). Writes
``src/engram/retrieval/query_adapter.npz`` (``A`` as float32 and the model's name).

``--check`` instead holds out each writer in turn (trained on the others) and prints its
store's MRR@10 before and after: how the adapter does on a writer it never saw. The
evaluation set (``memories.jsonl``, dev and test) is never read here; its dev half chooses the
settings through ``benchmarks/retrieval_eval.py``.

    python tools/train_query_adapter.py [--check] [--reg 0.1] [--tau 0.02] [--epochs 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.conflict_eval import embedder_for_evaluation  # noqa: E402
from benchmarks.recall_floor_eval import read_jsonl  # noqa: E402
from engram.config import EngramSettings  # noqa: E402

SET = ROOT / "tests" / "data" / "retrieval"
OUT = ROOT / "src" / "engram" / "retrieval" / "query_adapter.npz"
Matrix = npt.NDArray[np.float64]


@dataclass
class Group:
    """One writer's questions, store and answers (indices of grade-2 records)."""

    name: str
    questions: Matrix
    records: Matrix
    answers: list[list[int]]


def training_sets() -> Iterator[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]]:
    """Each training writer's name, memories and questions, by name (``train_<w>_*``)."""
    for memories_file in sorted(SET.glob("train_*_memories.jsonl")):
        name = memories_file.name.removeprefix("train_").removesuffix("_memories.jsonl")
        yield name, read_jsonl(memories_file), read_jsonl(SET / f"train_{name}_queries.jsonl")


async def load_groups() -> list[Group]:
    embedder = await embedder_for_evaluation()
    groups = []
    try:
        for name, memories, queries in training_sets():
            index = {m["key"]: i for i, m in enumerate(memories)}
            answers = [[index[k] for k, g in q["relevant"].items() if g == 2] for q in queries]
            kept = [i for i, a in enumerate(answers) if a]
            records = await embedder.embed_batch([m["content"] for m in memories])
            asked = await embedder.embed_batch([queries[i]["query"] for i in kept])
            groups.append(
                Group(
                    name,
                    np.asarray(asked, dtype=np.float64),
                    np.asarray(records, dtype=np.float64),
                    [answers[i] for i in kept],
                )
            )
    finally:
        await embedder.close()
    return groups


def adapted(delta: Matrix, questions: Matrix) -> Matrix:
    moved = questions + questions @ delta.T
    norms: Matrix = np.linalg.norm(moved, axis=1, keepdims=True)
    return moved / norms


def fit(groups: list[Group], *, reg: float, tau: float, epochs: int, rate: float = 0.01) -> Matrix:
    """``A`` by full-batch Adam (see the module docstring)."""
    size = groups[0].questions.shape[1]
    delta = np.zeros((size, size))
    first, second = np.zeros_like(delta), np.zeros_like(delta)
    beta1, beta2 = 0.9, 0.999
    for step in range(1, epochs + 1):
        gradient = np.zeros_like(delta)
        asked = 0
        for group in groups:
            moved = group.questions + group.questions @ delta.T
            norms = np.linalg.norm(moved, axis=1, keepdims=True)
            unit = moved / norms
            cosine = unit @ group.records.T
            logits = cosine / tau
            logits -= logits.max(axis=1, keepdims=True)
            share = np.exp(logits)
            share /= share.sum(axis=1, keepdims=True)
            target = np.zeros_like(share)
            for row, answers in enumerate(group.answers):
                mass = share[row, answers]
                target[row, answers] = mass / mass.sum()
            d_cosine = (share - target) / tau
            d_moved = (
                d_cosine @ group.records - (d_cosine * cosine).sum(axis=1, keepdims=True) * unit
            ) / norms
            gradient += d_moved.T @ group.questions
            asked += len(group.answers)
        gradient = gradient / asked + reg * delta
        first = beta1 * first + (1 - beta1) * gradient
        second = beta2 * second + (1 - beta2) * gradient**2
        delta -= rate * (first / (1 - beta1**step)) / (np.sqrt(second / (1 - beta2**step)) + 1e-8)
    return delta


def mrr(group: Group, delta: Matrix | None) -> float:
    questions = group.questions if delta is None else adapted(delta, group.questions)
    total = 0.0
    for row, scores in enumerate(questions @ group.records.T):
        top = np.argsort(-scores)[:10]
        answers = set(group.answers[row])
        total += next((1 / (rank + 1) for rank, i in enumerate(top) if i in answers), 0.0)
    return total / len(group.answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="hold out each writer in turn")
    parser.add_argument("--reg", type=float, default=0.1)
    parser.add_argument("--tau", type=float, default=0.02)
    parser.add_argument("--epochs", type=int, default=300)
    args = parser.parse_args()
    groups = asyncio.run(load_groups())
    settings = {"reg": args.reg, "tau": args.tau, "epochs": args.epochs}
    if args.check:
        held = {}
        for group in groups:
            delta = fit([g for g in groups if g is not group], **settings)
            held[group.name] = {
                "mrr@10_before": round(mrr(group, None), 4),
                "mrr@10_after": round(mrr(group, delta), 4),
            }
        print(json.dumps({"held_out_writer": held, **settings}, indent=2))
        return
    delta = fit(groups, **settings)
    model = EngramSettings().embedding_model_name
    np.savez(OUT, delta=delta.astype(np.float32), model=np.array(model))
    print(
        json.dumps(
            {
                "written": str(OUT.relative_to(ROOT)),
                "writers": [g.name for g in groups],
                "questions": sum(len(g.answers) for g in groups),
                "size_of_a": round(float(np.linalg.norm(delta)), 3),
                "model": model,
                **settings,
            }
        )
    )


if __name__ == "__main__":
    main()
