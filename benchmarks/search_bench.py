"""Search benchmark: hybrid retrieval latency at 100,000 records.

Prints one JSON object. Seeds ``--records`` records exactly as ``gate_bench.py`` does
(generated agent-memory text, real model embeddings of ``--pool`` texts reused with a small
perturbation, by COPY, HNSW built afterwards), then runs ``--queries`` searches of fresh short
queries (6-14 words cut from newly generated texts) through ``kernel.retrieval.search`` as a
standard agent, and reports:

- ``search_excluding_embedding_ms``: both legs, fusion and hydration (``query_ms``);
- ``search_including_embedding_ms``: wall time of the whole call, query embedding included;
- the same two for as-of searches (``as_of_ingestion`` = a past instant) and type-filtered ones;
- how many rows each leg returned on average.

    python -m benchmarks.search_bench [--records 100000] [--queries 500]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.agent_text import texts
from benchmarks.gate_bench import rss_mb, seed
from benchmarks.harness import report, runtime_settings, scratch_server
from benchmarks.stats import percentiles
from engram import open_kernel
from engram.memory.gate.access import caller_for_tier
from engram.memory.types import MemoryType, TrustLevel

READER = caller_for_tier("bench-reader", TrustLevel.STANDARD)


def queries(count: int, seed_value: int) -> list[str]:
    """Short queries: a run of 6-14 words from fresh generated texts."""
    rng = random.Random(seed_value)
    out = []
    for text in texts(count, seed=seed_value):
        words = text.split()
        size = rng.randint(6, 14)
        start = rng.randint(0, max(0, len(words) - size))
        out.append(" ".join(words[start : start + size]))
    return out


async def run_case(kernel: Any, items: list[str], **options: Any) -> dict[str, Any]:
    excluding, including, vector_rows, text_rows, hits = [], [], [], [], []
    for query in items:
        started = time.perf_counter()
        result = await kernel.retrieval.search(READER, query, **options)
        including.append((time.perf_counter() - started) * 1000)
        excluding.append(result.query_ms)
        vector_rows.append(result.legs.get("vector", 0))
        text_rows.append(result.legs.get("text", 0))
        hits.append(len(result.hits))
    return {
        "excluding_embedding_ms": percentiles(excluding),
        "including_embedding_ms": percentiles(including),
        "mean_rows": {
            "vector": round(statistics.fmean(vector_rows), 1),
            "text": round(statistics.fmean(text_rows), 1),
            "hits": round(statistics.fmean(hits), 1),
        },
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    async with scratch_server("engram-search-bench-") as server:
        settings = runtime_settings(server)
        async with open_kernel(settings=settings) as kernel:
            seeding = await seed(
                server,
                kernel_embed=kernel.embeddings,
                records=args.records,
                pool=args.pool,
                rng=rng,
            )
            past = datetime.now(UTC) - timedelta(seconds=1)
            items = queries(args.queries + 50, args.seed + 2000)
            for query in items[:50]:  # warm caches and the model
                await kernel.retrieval.search(READER, query)
            items = items[50:]
            current = await run_case(kernel, items, limit=args.limit)
            typed = await run_case(
                kernel,
                items[: args.queries // 2],
                limit=args.limit,
                types=[MemoryType.BELIEF, MemoryType.EPISODE],
            )
            as_of = await run_case(
                kernel, items[: args.queries // 2], limit=args.limit, as_of_ingestion=past
            )
            rss = rss_mb()
    excluding = current["excluding_embedding_ms"]["p95"]
    including = current["including_embedding_ms"]["p95"]
    return {
        "benchmark": "search",
        "parameters": {
            "records_seeded": args.records,
            "seed_vector_pool": args.pool,
            "queries": args.queries,
            "limit": args.limit,
            "seed": args.seed,
            "query_words": "6-14, cut from fresh generated texts (benchmarks/agent_text.py)",
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        },
        "seeding": seeding,
        "current": current,
        "types_filtered": typed,
        "as_of_ingestion": as_of,
        "rss_mb_process_and_workers": rss,
        "targets": {"excluding_embedding_p95_ms": 30.0, "including_embedding_p95_ms": 40.0},
        "met": {
            "excluding_embedding_p95": excluding <= 30.0,
            "including_embedding_p95": including <= 40.0,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records to seed")
    parser.add_argument("--pool", type=int, default=2_000, help="distinct seed embeddings")
    parser.add_argument("--queries", type=int, default=500, help="searches per case")
    parser.add_argument("--limit", type=int, default=10, help="hits per search")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    args.pool = min(args.pool, args.records)
    report(measure(args))


if __name__ == "__main__":
    main()
