"""The similarity floor of ``recall`` (``min_score``) on the labelled query set (issue 17).

Prints one JSON object. ``tests/data/mcp_recall/memories.jsonl`` holds the stored memories
(``key``, ``type``, ``content``, ``metadata``, optionally ``event_time``); ``dev.jsonl`` and
``test.jsonl`` hold queries (``id``, ``query``, ``relevant``: the keys of the memories that
answer it, empty for a query nothing stored answers).

- Every memory is written through the Gate as one external agent (``AgentSession``, what the
  MCP and HTTP adapters use); each must be approved as a new record.
- Each query is searched once with no floor and every candidate (``limit`` 100); a floor
  ``f`` then keeps, in the search's order, the first 10 hits with similarity >= ``f``: what
  ``recall`` with ``min_score=f`` and its default ``limit`` returns, since the floor is
  applied before the limit.
- Per floor: ``precision`` (relevant hits / hits), ``recall`` (relevant hits / relevant
  memories), ``f1``, ``empty_when_unrelated`` (share of queries with nothing relevant that
  return nothing) and ``answered`` (share of the other queries with a relevant hit).
- ``balanced`` is the mean of ``answered`` and ``empty_when_unrelated``: how often the floor
  gets the question an agent asks of it right ("is anything stored about this?"), each kind
  of query weighing the same. ``--choose`` (dev half only) prints the floor with the highest
  ``balanced`` on a 0.01 grid (the lowest on a tie: when in doubt, show more); it is what
  ``DEFAULT_MIN_SCORE`` holds. The test half is read only to report that floor's figures.
  (F1 over returned hits was tried first: it counts a second, weaker hit of an answered query
  against the floor, and chose 0.46, which left 10 % of dev's answerable queries unanswered.)

    python -m benchmarks.recall_floor_eval [--half dev|test] [--choose] [--floor F]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from benchmarks.harness import bulk_writer, report, runtime_settings, scratch_server
from engram import Kernel, open_kernel
from engram.protocols.inprocess import AgentSession
from engram.retrieval.arguments import MAX_LIMIT
from engram.retrieval.search import DEFAULT_MIN_SCORE

SET = Path(__file__).resolve().parent.parent / "tests" / "data" / "mcp_recall"
RECALL_LIMIT = 10
GRID = [round(step / 100, 2) for step in range(91)]


@dataclass(frozen=True)
class Query:
    """One labelled query and what its search found (memory key, similarity), best first."""

    id: str
    text: str
    relevant: frozenset[str]
    found: tuple[tuple[str, float], ...] = ()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSON-lines file."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def store(kernel: Kernel) -> dict[UUID, str]:
    """Write every memory of the set; record id -> memory key."""
    session = AgentSession(kernel, bulk_writer("recall-eval"))
    keys: dict[UUID, str] = {}
    for row in read_jsonl(SET / "memories.jsonl"):
        fields = {name: value for name, value in row.items() if name != "key"}
        result = await session.remember(fields)
        if not result.approved or result.record_id is None or result.outcome.value != "created":
            raise RuntimeError(f"{row['key']}: {result.decision.value}, {result.reason}")
        keys[result.record_id] = row["key"]
    return keys


async def search_all(kernel: Kernel, keys: dict[UUID, str], half: str) -> list[Query]:
    """Every query of a half, searched with no floor."""
    caller = bulk_writer("recall-eval")
    queries = []
    for row in read_jsonl(SET / f"{half}.jsonl"):
        result = await kernel.retrieval.search(caller, row["query"], limit=MAX_LIMIT)
        if result.degraded:
            raise RuntimeError("the embedding model did not answer")
        found = tuple((keys[hit.record.record_id], hit.similarity or 0.0) for hit in result.hits)
        queries.append(Query(row["id"], row["query"], frozenset(row["relevant"]), found))
    return queries


def returned(query: Query, floor: float) -> list[str]:
    """The memory keys ``recall`` returns for ``query`` with ``min_score=floor``."""
    return [key for key, score in query.found if score >= floor][:RECALL_LIMIT]


def measure(queries: list[Query], floor: float) -> dict[str, Any]:
    """Precision, recall, F1 and the per-query shares at one floor."""
    hits = relevant_hits = relevant_total = 0
    empty = answered = 0
    unrelated = [q for q in queries if not q.relevant]
    related = [q for q in queries if q.relevant]
    for query in queries:
        shown = returned(query, floor)
        good = len(set(shown) & query.relevant)
        hits += len(shown)
        relevant_hits += good
        relevant_total += len(query.relevant)
        if not query.relevant and not shown:
            empty += 1
        if query.relevant and good:
            answered += 1
    precision = relevant_hits / hits if hits else 1.0
    recall = relevant_hits / relevant_total if relevant_total else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "floor": floor,
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "empty_when_unrelated": round(empty / len(unrelated), 4) if unrelated else None,
        "answered": round(answered / len(related), 4) if related else None,
        "balanced": round((empty / len(unrelated) + answered / len(related)) / 2, 4)
        if unrelated and related
        else None,
        "hits": hits,
    }


def choose(queries: list[Query]) -> float:
    """The floor with the highest balanced share (the lowest of equals)."""
    return max(GRID, key=lambda floor: (measure(queries, floor)["balanced"] or 0.0, -floor))


def similarity_summary(queries: list[Query]) -> dict[str, float]:
    """The best relevant and the best unrelated similarity, over the half (for the report)."""
    relevant = [s for q in queries for key, s in q.found if key in q.relevant]
    unrelated_top = [q.found[0][1] for q in queries if not q.relevant and q.found]
    return {
        "lowest_relevant": round(min(relevant), 4) if relevant else 0.0,
        "highest_top_hit_of_unrelated_query": round(max(unrelated_top), 4)
        if unrelated_top
        else 0.0,
    }


async def evaluate(kernel: Kernel, half: str, *, pick: bool, floor: float) -> dict[str, Any]:
    """The figures of one half on a kernel with an empty store."""
    keys = await store(kernel)
    queries = await search_all(kernel, keys, half)
    chosen = choose(queries) if pick else floor
    return {
        "half": half,
        "queries": len(queries),
        "unrelated_queries": sum(1 for q in queries if not q.relevant),
        "memories": len(keys),
        "chosen": pick,
        **measure(queries, chosen),
        "no_floor": measure(queries, 0.0),
        **similarity_summary(queries),
    }


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    if args.choose and args.half != "dev":
        raise SystemExit("--choose tunes: dev half only")
    async with (
        scratch_server("engram-recall-eval-") as server,
        open_kernel(settings=runtime_settings(server)) as kernel,
    ):
        return await evaluate(kernel, args.half, pick=args.choose, floor=args.floor)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("dev", "test"), default="test")
    parser.add_argument("--choose", action="store_true", help="pick the floor (dev only)")
    parser.add_argument("--floor", type=float, default=DEFAULT_MIN_SCORE)
    report(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
