"""How well a hit's ``relevance`` predicts that it answers the query (issue 19).

Prints one JSON object. The relevance is a logistic function of the value a search orders its
candidates by and of that value's distance below the best candidate's
(``engram.retrieval.relevance``); this script fits and checks the two curves the kernel uses:

- ``with_words``: the default search (similarity + 0.3 x lexical share);
- ``similarity_only``: searches that do not weigh the words (as-of and history searches),
  here vector search alone on the same store.

Each is applied to the top ten hits of every query of two labelled sets: ``tests/data/retrieval``
(1,064 memories with many confusable neighbours; a hit is a positive when its record holds a
grade-2 memory of the query) and ``tests/data/mcp_recall`` (60 memories; a positive when it is
listed in ``relevant``; some questions have no answer). Per curve and set: the Brier score,
the expected calibration error over ten equal-width bins (``ece``: the hit-weighted mean gap
between the predicted and the observed share) and the bins; and for the questions nothing
answers, the mean and highest relevance of their top hit.

``--fit`` (dev half only) fits both curves on the dev halves of both sets together, by maximum
likelihood (Newton's method), and reports with the fitted curves; the constants it prints are
what ``engram.retrieval.relevance`` holds. Otherwise the kernel's curves are checked on the half
asked for (``--half test`` to report).

    python -m benchmarks.relevance_calibration [--half dev|test] [--fit]
        [--limit-memories N] [--limit-queries N]   # the limits: a smoke run, figures void
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks import recall_floor_eval, retrieval_eval
from benchmarks.harness import bulk_writer, report, runtime_settings, scratch_server
from engram import Kernel, open_kernel
from engram.retrieval.relevance import SIMILARITY_ONLY, WITH_WORDS, Calibration
from engram.retrieval.search import Retrieval, SearchHit, SearchTuning

LIMIT = 10
BINS = 10
#: Each curve: the search tuning whose hits it is fitted on.
CURVES = {"with_words": SearchTuning(), "similarity_only": retrieval_eval.VECTOR_ONLY}
KERNEL = {"with_words": WITH_WORDS, "similarity_only": SIMILARITY_ONLY}
SETS = ("retrieval", "mcp_recall")

#: One labelled hit: its value, the best value of its search, 1.0 when it answers.
Row = tuple[float, float, float]


@dataclass(frozen=True)
class Limits:
    """How much of the sets to use (None: all; smaller is a smoke run, figures void)."""

    memories: int | None = None
    queries: int | None = None


def labelled(curve: str, hits: list[SearchHit], answers: set[str], key_of: Any) -> list[Row]:
    """The hits of one search as rows of ``curve``: the ordering value of a weighed search,
    else the similarity. Each hit's relevance must be the kernel's curve of that row (the
    rows are what the kernel computed, not a re-derivation of it)."""
    values = []
    for hit in hits:
        if hit.similarity is None or hit.relevance is None:
            raise RuntimeError("the embedding model did not answer")
        values.append(hit.fused if curve == "with_words" else hit.similarity)
    best = max(values, default=0.0)
    for value, hit in zip(values, hits, strict=True):
        if not math.isclose(hit.relevance or 0.0, KERNEL[curve](value, best), abs_tol=1e-12):
            raise RuntimeError(f"{curve}: the kernel's relevance is not its curve of the row")
    return [
        (value, best, float(key_of(hit) in answers))
        for value, hit in zip(values, hits, strict=True)
    ]


Rows = dict[str, tuple[list[Row], list[float]]]  # per curve: rows, unanswered top values


async def retrieval_rows(kernel: Kernel, half: str, limits: Limits) -> Rows:
    """Per curve, the labelled top hits of a half of tests/data/retrieval (every query has an
    answer), the set stored once."""
    stored = await retrieval_eval.store(kernel, limits.memories)
    queries = recall_floor_eval.read_jsonl(retrieval_eval.SET / f"{half}.jsonl")
    found: Rows = {}
    for curve, tuning in CURVES.items():
        retrieval = Retrieval(kernel.db, kernel.embeddings, kernel.temporal, tuning=tuning)
        rows: list[Row] = []
        for query in queries[: limits.queries]:
            result = await retrieval.search(
                bulk_writer(retrieval_eval.CALLER), query["query"], limit=LIMIT
            )
            answers = {key for key, grade in query["relevant"].items() if grade >= 2}
            rows += labelled(
                curve, result.hits, answers, lambda hit: stored.head_key.get(hit.record.record_id)
            )
        found[curve] = (rows, [])
    return found


async def recall_rows(kernel: Kernel, half: str, limits: Limits) -> Rows:
    """The same on tests/data/mcp_recall, with the top hit's value of each question nothing
    answers."""
    keys = await recall_floor_eval.store(kernel)
    queries = recall_floor_eval.read_jsonl(recall_floor_eval.SET / f"{half}.jsonl")
    found: Rows = {}
    for curve, tuning in CURVES.items():
        retrieval = Retrieval(kernel.db, kernel.embeddings, kernel.temporal, tuning=tuning)
        rows: list[Row] = []
        unanswered: list[float] = []
        for query in queries[: limits.queries]:
            result = await retrieval.search(bulk_writer("recall-eval"), query["query"], limit=LIMIT)
            hits = labelled(
                curve, result.hits, set(query["relevant"]), lambda hit: keys[hit.record.record_id]
            )
            rows += hits
            if not query["relevant"] and hits:
                unanswered.append(hits[0][0])  # the value; mapped by the curve in the report
        found[curve] = (rows, unanswered)
    return found


async def collect(
    half: str, limits: Limits
) -> dict[tuple[str, str], tuple[list[Row], list[float]]]:
    """Rows per (set, curve), each set stored once in its own scratch database."""
    found = {}
    for name, gather in (("retrieval", retrieval_rows), ("mcp_recall", recall_rows)):
        async with (
            scratch_server(f"engram-calibration-{name}-") as server,
            open_kernel(settings=runtime_settings(server)) as kernel,
        ):
            for curve, rows in (await gather(kernel, half, limits)).items():
                found[(name, curve)] = rows
    return found


def fit(rows: list[Row]) -> Calibration:
    """The curve of the largest likelihood of the rows' labels given value and gap."""
    data = np.asarray(rows)
    x = np.stack([data[:, 0], data[:, 0] - data[:, 1], np.ones(len(data))], axis=1)
    y = data[:, 2]
    w = np.zeros(3)
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        hessian = (x * (p * (1.0 - p))[:, None]).T @ x + 1e-9 * np.eye(3)
        step = np.linalg.solve(hessian, x.T @ (p - y))
        w -= step
        if float(np.abs(step).max()) < 1e-10:
            break
    return Calibration(*(round(float(v), 3) for v in w))


def check(rows: list[Row], curve: Calibration) -> dict[str, Any]:
    """Brier score, expected calibration error and the bins of a curve on labelled hits."""
    predicted = [curve(value, best) for value, best, _ in rows]
    labels = [label for _, _, label in rows]
    bins: list[dict[str, Any]] = []
    gap = 0.0
    for index in range(BINS):
        low, high = index / BINS, (index + 1) / BINS
        members = [
            i for i, p in enumerate(predicted) if low <= p < high or (index == BINS - 1 and p == 1)
        ]
        if not members:
            continue
        mean_predicted = sum(predicted[i] for i in members) / len(members)
        observed = sum(labels[i] for i in members) / len(members)
        gap += len(members) * abs(mean_predicted - observed)
        bins.append(
            {
                "from": low,
                "hits": len(members),
                "predicted": round(mean_predicted, 3),
                "observed": round(observed, 3),
            }
        )
    count = len(rows)
    brier = sum((p - y) ** 2 for p, y in zip(predicted, labels, strict=True)) / count
    return {
        "hits": count,
        "positives": int(sum(labels)),
        "brier": round(brier, 4),
        "ece": round(gap / count, 4),
        "bins": bins,
    }


async def evaluate(half: str, *, refit: bool, limits: Limits) -> dict[str, Any]:
    found = await collect(half, limits)
    curves = {"with_words": WITH_WORDS, "similarity_only": SIMILARITY_ONLY}
    if refit:
        curves = {
            curve: fit([row for name in SETS for row in found[(name, curve)][0]])
            for curve in CURVES
        }
    report_: dict[str, Any] = {}
    for name in SETS:
        report_[name] = {}
        for curve, calibration in curves.items():
            rows, unanswered = found[(name, curve)]
            figures = check(rows, calibration)
            if unanswered:
                top = [calibration(value, value) for value in unanswered]
                figures["unanswered_questions_top_hit"] = {
                    "questions": len(top),
                    "mean": round(sum(top) / len(top), 4),
                    "max": round(max(top), 4),
                }
            report_[name][curve] = figures
    return {
        "benchmark": "relevance_calibration",
        "half": half,
        "fitted": refit,
        "curves": {
            curve: {"slope": c.slope, "gap_slope": c.gap_slope, "intercept": c.intercept}
            for curve, c in curves.items()
        },
        "kernel_holds_these_curves": curves["with_words"] == WITH_WORDS
        and curves["similarity_only"] == SIMILARITY_ONLY,
        **report_,
        "relevance_of_the_best_hit_at": {
            curve: {f"{v:.2f}": round(c(v, v), 3) for v in (0.3, 0.5, 0.7, 0.9)}
            for curve, c in curves.items()
        },
    }


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    if args.fit and args.half != "dev":
        raise SystemExit("--fit tunes: dev half only")
    limits = Limits(args.limit_memories, args.limit_queries)
    return await evaluate(args.half, refit=args.fit, limits=limits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("dev", "test"), default="test")
    parser.add_argument("--fit", action="store_true", help="fit the curves (dev only)")
    parser.add_argument("--limit-memories", type=int, default=None, help="first N (smoke)")
    parser.add_argument("--limit-queries", type=int, default=None, help="first N (smoke)")
    report(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
