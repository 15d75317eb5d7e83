"""Relevance of engram's search against vector search alone, on the labelled set (issue 19).

Prints one JSON object. ``tests/data/retrieval/`` (its README has the details) holds the
memories of one store and graded queries (2: answers it, 1: partly relevant) split into dev
and test halves; tune on ``--half dev``, report ``--half test``.

- Every memory is written through the Gate as one trusted agent (``AgentSession``), with the
  metadata its type needs (ADR-004) derived from it (:func:`type_metadata`); a memory
  with ``replaces`` is an UPDATE of the record the memory it names became, so that record's
  older text is a superseded version. What the Gate did with each write is counted
  (``store``): a write it judged a restatement of a stored record (NOOP) is not a record of
  its own, and a record the conflict resolver ended is no longer a head; both count against
  every variant alike.
- A hit is a record; its grade is the grade of the memory that record's head holds.
- Per query, over the top ``limit`` (10) hits: ``mrr@10`` (1 / rank of the first grade-2
  hit), ``recall@k`` for k = 1, 5, 10 (grade-2 records among the first k, over
  ``min(k, grade-2 records)``: for a query with one answer, whether it is among the first k)
  and ``ndcg@10`` (gain 2^grade - 1; the ideal order holds the query's graded memories that
  are heads: a superseded memory's record is found as its newer version). Reported as
  means over the half, overall and per style, with ``query_ms`` (search without the query
  embedding) and ``search_ms`` (with it) p50/p95.
- Variants run on the same store in the same process: ``vector`` (the text leg and the
  lexical evidence off: nearest neighbours by cosine, what a plain vector store does) and
  ``engram`` (the product's defaults), plus with ``--grid`` the text-leg rules and lexical
  weights compared on dev.

    python -m benchmarks.retrieval_eval [--half dev|test] [--grid]
        [--limit-queries N] [--limit-memories N]   # the limits: a smoke run, figures void
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from benchmarks.harness import bulk_writer, report, runtime_settings, scratch_server
from benchmarks.recall_floor_eval import read_jsonl
from benchmarks.stats import percentiles
from engram import Kernel, open_kernel
from engram.protocols.inprocess import AgentSession
from engram.retrieval.search import Retrieval, SearchTuning

SET = Path(__file__).resolve().parent.parent / "tests" / "data" / "retrieval"
LIMIT = 10
CALLER = "retrieval-eval"
VECTOR_ONLY = SearchTuning(
    text_leg=False, lexical_weight=0.0, query_adapter=False, type_prior=False
)
GRID = [
    SearchTuning(text_leg=leg, min_pieces=pieces, lexical_weight=weight)
    for leg, pieces in ((False, 3), (True, 2), (True, 3), (True, 4))
    for weight in (0.0, 0.2, 0.3, 0.4, 0.5)
]


_LOCATOR = re.compile(r"((?:[a-z][a-z0-9+.-]*://|~?/)[^\s,;()]+|[\w.-]+/[^\s,;()]+)")
_SENTENCE = re.compile(r"(?<=[.;!])\s+")


def type_metadata(row: dict[str, Any], evidence: UUID | None) -> dict[str, Any]:
    """The metadata a memory of the set needs to be stored as its type, made from its own
    text (the set holds texts only): a decision's rationale, a skill's steps (its sentences),
    an entity's name and kind, a preference's subject (its topic), a resource's locator (the
    last URL or path in it); a reflection cites ``evidence``."""
    content, kind = row["content"], row["type"]
    metadata: dict[str, Any] = {"topic": row["topic"]}
    if row.get("tags"):
        metadata["tags"] = row["tags"]
    if kind == "decision":
        metadata["rationale"] = "Recorded as stated; the reasons are in the text."
    elif kind == "skill":
        metadata["steps"] = [part for part in _SENTENCE.split(content) if part.strip()][:100]
    elif kind == "entity":
        metadata["name"] = row["topic"]
        metadata["kind"] = "thing"
    elif kind == "preference":
        metadata["subject"] = row["topic"]
    elif kind == "resource":
        metadata["locator"] = _LOCATOR.findall(content)[-1].rstrip(".")
    if kind == "reflection" and evidence is None:
        raise RuntimeError(f"{row['key']}: a reflection with nothing stored before it to cite")
    return metadata


@dataclass(frozen=True)
class Stored:
    """The store the queries run against: record id -> the memory key its head holds."""

    head_key: dict[UUID, str]
    outcomes: dict[str, int]


async def store(kernel: Kernel, limit: int | None = None) -> Stored:
    """Write every memory of the set (the first ``limit``) through the Gate, in file order."""
    session = AgentSession(kernel, bulk_writer(CALLER))
    record_of: dict[str, UUID] = {}
    head_key: dict[UUID, str] = {}
    outcomes: dict[str, int] = {}
    topic_first: dict[str, UUID] = {}
    last: UUID | None = None
    for row in read_jsonl(SET / "memories.jsonl")[:limit]:
        evidence = topic_first.get(row["topic"], last)
        fields: dict[str, Any] = {"type": row["type"], "content": row["content"]}
        fields["metadata"] = type_metadata(row, evidence)
        if row["type"] == "reflection":
            fields["evidence_links"] = [str(evidence)]
        if row.get("event_time"):
            fields["event_time"] = row["event_time"]
        if row.get("replaces") and row["replaces"] not in record_of:
            outcomes["skipped (replaces a refused memory)"] = (
                outcomes.get("skipped (replaces a refused memory)", 0) + 1
            )
            continue
        if row.get("replaces"):
            target = record_of[row["replaces"]]
            head = await kernel.temporal.current(target, count_read=False)
            version = None if head is None else head.version
            result = await session.update(target, fields, expected_version=version)
            kind = f"update_{result.outcome.value}"
        else:
            result = await session.remember(fields)
            kind = result.outcome.value
        record_id = result.record_id
        if record_id is None or not result.approved:
            kind = f"refused ({result.decision.value}: {result.reason[:60]})"
        outcomes[kind] = outcomes.get(kind, 0) + 1
        if record_id is None or kind.startswith("refused"):
            continue
        record_of[row["key"]] = last = record_id
        topic_first.setdefault(row["topic"], record_id)
        if kind in ("created", "update_updated"):
            head_key[record_id] = row["key"]
    return Stored(head_key, outcomes)


def measure(
    ranked: list[str | None], relevant: dict[str, int], heads: set[str] | None = None
) -> dict[str, float]:
    """The figures of one query from the memory keys of its hits, best first; the ideal
    order of nDCG holds the graded memories that are heads (``heads``; None: all), since a
    superseded memory's record is found as its head."""
    answers = {key for key, grade in relevant.items() if grade >= 2}
    first = next((i for i, key in enumerate(ranked[:LIMIT], 1) if key in answers), None)
    figures = {"mrr@10": 1.0 / first if first else 0.0}
    for k in (1, 5, 10):
        found = len(answers & set(ranked[:k]))
        figures[f"recall@{k}"] = found / min(k, len(answers))
    gains = [(2 ** relevant.get(key, 0) - 1) if key else 0 for key in ranked[:LIMIT]]
    reachable = [g for key, g in relevant.items() if heads is None or key in heads]
    ideal = sorted((2**grade - 1 for grade in reachable), reverse=True)[:LIMIT]
    dcg = sum(gain / math.log2(i + 2) for i, gain in enumerate(gains))
    idcg = sum(gain / math.log2(i + 2) for i, gain in enumerate(ideal))
    figures["ndcg@10"] = dcg / idcg if idcg else 0.0
    return figures


def summary(rows: list[dict[str, float]]) -> dict[str, float]:
    """Means of per-query figures."""
    return {name: round(statistics.fmean(row[name] for row in rows), 4) for name in rows[0]}


def figures(
    ranked: dict[str, list[str | None]], queries: list[dict[str, Any]], heads: set[str]
) -> dict[str, Any]:
    """The figures of a half from each query's hits (memory keys, best first, by query id):
    means overall and per style."""
    per_style: dict[str, list[dict[str, float]]] = {}
    for query in queries:
        found = measure(ranked[query["id"]], query["relevant"], heads)
        per_style.setdefault(query["style"], []).append(found)
        per_style.setdefault("all", []).append(found)
    overall = summary(per_style.pop("all"))
    return {
        **overall,
        "by_style": {style: summary(rows) for style, rows in sorted(per_style.items())},
    }


async def run_variant(
    kernel: Kernel, stored: Stored, queries: list[dict[str, Any]], tuning: SearchTuning
) -> dict[str, Any]:
    """Every query through one search configuration."""
    retrieval = Retrieval(kernel.db, kernel.embeddings, kernel.temporal, tuning=tuning)
    caller = bulk_writer(CALLER)
    ranked: dict[str, list[str | None]] = {}
    timings: list[float] = []
    totals: list[float] = []
    text_leg = 0
    for query in queries:
        result = await retrieval.search(caller, query["query"], limit=LIMIT)
        if result.degraded:
            raise RuntimeError("the embedding model did not answer")
        timings.append(result.query_ms)
        totals.append(result.embed_ms + result.query_ms)
        text_leg += "text" in result.legs
        ranked[query["id"]] = [stored.head_key.get(hit.record.record_id) for hit in result.hits]
    return {
        **figures(ranked, queries, set(stored.head_key.values())),
        "queries_with_text_leg": text_leg,
        "query_ms": percentiles(timings),
        "search_ms": percentiles(totals),
    }


def ratios(candidate: dict[str, Any], baseline: dict[str, Any]) -> dict[str, float | None]:
    """Candidate over baseline for the headline figures."""
    names = ("mrr@10", "recall@1", "recall@5", "recall@10", "ndcg@10")
    return {
        name: round(candidate[name] / baseline[name], 4) if baseline[name] else None
        for name in names
    }


async def evaluate(
    kernel: Kernel, half: str, *, grid: bool, limit: int | None, memories: int | None
) -> dict[str, Any]:
    """The figures of one half on a kernel with an empty store."""
    stored = await store(kernel, memories)
    queries = read_jsonl(SET / f"{half}.jsonl")[:limit]
    baseline = await run_variant(kernel, stored, queries, VECTOR_ONLY)
    product = await run_variant(kernel, stored, queries, SearchTuning())
    result: dict[str, Any] = {
        "benchmark": "retrieval_eval",
        "half": half,
        "queries": len(queries),
        "memories": sum(stored.outcomes.values()),
        "store": stored.outcomes,
        "product": {field: getattr(SearchTuning(), field) for field in SearchTuning.__slots__},
        "vector": baseline,
        "engram": product,
        "engram_over_vector": ratios(product, baseline),
    }
    if grid:
        result["grid"] = []
        for tuning in GRID:
            found = await run_variant(kernel, stored, queries, tuning)
            result["grid"].append(
                {
                    "text_leg": tuning.text_leg,
                    "min_pieces": tuning.min_pieces,
                    "lexical_weight": tuning.lexical_weight,
                    **{name: found[name] for name in ("mrr@10", "recall@1", "recall@5")},
                    "ndcg@10": found["ndcg@10"],
                    "over_vector": ratios(found, baseline),
                }
            )
    return result


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    if args.grid and args.half != "dev":
        raise SystemExit("--grid compares settings to choose them: dev half only")
    async with (
        scratch_server("engram-retrieval-eval-") as server,
        open_kernel(settings=runtime_settings(server)) as kernel,
    ):
        return await evaluate(
            kernel,
            args.half,
            grid=args.grid,
            limit=args.limit_queries,
            memories=args.limit_memories,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("dev", "test"), default="test")
    parser.add_argument("--grid", action="store_true", help="compare settings (dev only)")
    parser.add_argument(
        "--limit-queries", type=lambda v: max(1, int(v)), default=None, help="first N (smoke)"
    )
    parser.add_argument("--limit-memories", type=int, default=None, help="first N (smoke)")
    report(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
