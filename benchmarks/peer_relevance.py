"""How well engram's search finds the right memory beside Mem0's, in one run (issue 19).

Prints one JSON object. Both systems store the labelled set of ``tests/data/retrieval`` (its
README) on one embedded PostgreSQL with pgvector, each in its own database, with the same
model directory, and answer the same half of its queries (``--half``, by default the test
half; the dev half is for choosing settings):

- engram as ``benchmarks.retrieval_eval`` runs it: every memory written through the Gate by
  one trusted agent, then the product's search (``engram``) and vector search alone on the
  same store (``vector``);
- Mem0 2.2.1 in its own virtual environment (``benchmarks.peer_mem0`` makes it): every
  memory stored with ``add(text, infer=False)``, a memory that replaces another with
  ``update`` of the record that one became, then ``search`` with its defaults and
  ``top_k=10``. Mem0 ranks by cosine similarity plus a keyword score from PostgreSQL's full
  text search (and entity boosts, which need spaCy; a plain ``pip install mem0ai`` has none).

The figures (MRR@10, recall@1/5/10, nDCG@10, overall and per query style) are computed for
all three by the same function from the memory keys each system's hits hold now. Search
latency is wall-clock per query with the query's embedding (``search_ms``); relevance does
not depend on the order the systems run in, so there is one round.

    python -m benchmarks.peer_relevance [--half test|dev] [--venv DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from benchmarks import retrieval_eval
from benchmarks.harness import report, runtime_settings, scratch_server
from benchmarks.peer_mem0 import (
    MEM0_VERSION,
    add_venv_option,
    ensure_venv,
    peer_versions,
    prepare,
    run_driver,
)
from benchmarks.recall_floor_eval import read_jsonl
from engram import open_kernel
from engram.config import EngramSettings
from engram.infra.model_files import ensure_default_model


def goals(engram: dict[str, Any], vector: dict[str, Any], mem0: dict[str, Any]) -> dict[str, bool]:
    """Issue 19's relevance goals: MRR@10 and recall@1 at least 5 % above vector search alone
    and above Mem0's, recall@5 not lower than either."""
    result = {}
    for name, other in (("vector", vector), ("mem0", mem0)):
        for figure in ("mrr@10", "recall@1"):
            result[f"{figure}>=1.05x_{name}"] = engram[figure] >= 1.05 * other[figure]
        result[f"recall@5>={name}"] = engram["recall@5"] >= other["recall@5"]
    return result


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    python = await asyncio.to_thread(ensure_venv, Path(args.venv))
    model_dir = EngramSettings().model_dir
    await asyncio.to_thread(ensure_default_model, model_dir)
    queries_path = retrieval_eval.SET / f"{args.half}.jsonl"
    queries = read_jsonl(queries_path)
    started = time.perf_counter()
    async with scratch_server("engram-peer-relevance-") as server:
        async with open_kernel(settings=runtime_settings(server)) as kernel:
            ours = await retrieval_eval.evaluate(
                kernel, args.half, grid=False, limit=None, memories=None
            )
        job = {
            "mode": "relevance",
            "database_url": await prepare(server, "mem0"),
            "model_dir": str(model_dir),
            "model_name": EngramSettings().embedding_model_name,
            "dimension": 384,
            "threads": EngramSettings().embedding_threads,
            "writers": 1,
            "memories_path": str(retrieval_eval.SET / "memories.jsonl"),
            "queries_path": str(queries_path),
        }
        theirs = await asyncio.to_thread(run_driver, python, "mem0", job)
    mem0 = {
        **retrieval_eval.figures(theirs["ranked"], queries, set(theirs["heads"])),
        "search_ms": theirs["search_ms"],
        "stored": theirs["stored"],
    }
    engram, vector = ours["engram"], ours["vector"]
    return {
        "benchmark": "peer_relevance",
        "half": args.half,
        "queries": len(queries),
        "peer": f"mem0ai=={MEM0_VERSION}",
        "peer_versions": peer_versions(python),
        "engram_store": ours["store"],
        "product": ours["product"],
        "engram": engram,
        "vector": vector,
        "mem0": mem0,
        "engram_over_vector": retrieval_eval.ratios(engram, vector),
        "engram_over_mem0": retrieval_eval.ratios(engram, mem0),
        "search_p50_ms": {
            name: figures["search_ms"]["p50"]
            for name, figures in (("engram", engram), ("vector", vector), ("mem0", mem0))
        },
        "goals": goals(engram, vector, mem0),
        "seconds": round(time.perf_counter() - started, 1),
        "rounds": 1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("dev", "test"), default="test")
    add_venv_option(parser)
    report(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
