"""Temporal benchmark: version chains and as-of reads at a million stored versions.

Prints one JSON object. A private embedded PostgreSQL is seeded in bulk
(``benchmarks/seed_versions.py``: ``--records`` lineages of ``--versions`` versions each, plus
``--chains`` records of 100 versions), then every read goes through ``kernel.temporal`` as the
runtime role, exactly as adapters call it:

- version chain of a 100-version record;
- as-of query of one record at random (T, E) instants (T only, E only, both);
- filtered as-of listing: one type, 50 rows, current and at a past T.

    python -m benchmarks.temporal_bench [--records 200000 --versions 5]   # 1,000,000 versions
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from benchmarks.harness import DATABASE, report, runtime_settings, scratch_server
from benchmarks.seed_versions import TYPES, seed_versions
from benchmarks.stats import percentiles
from engram import open_kernel
from engram.memory.gate.access import caller_for_tier
from engram.memory.types import MemoryType, TrustLevel

START = datetime(2025, 1, 1, tzinfo=UTC)
READER = caller_for_tier("bench-reader", TrustLevel.STANDARD)


async def timed(n: int, call: Callable[[int], Awaitable[Any]]) -> tuple[dict[str, float], int]:
    """Run ``call(i)`` n times sequentially; latency percentiles and total rows returned."""
    samples, rows = [], 0
    for i in range(n):
        started = time.perf_counter()
        result = await call(i)
        samples.append((time.perf_counter() - started) * 1000)
        rows += len(result) if isinstance(result, list) else int(result is not None)
    return percentiles(samples), rows


def record_id(r: int) -> uuid.UUID:
    """The lineage id the seeding SQL gives record ``r`` (md5 of "r:1")."""
    import hashlib  # noqa: PLC0415

    return uuid.UUID(hashlib.md5(f"{r}:1".encode()).hexdigest())  # noqa: S324 - an id, not security


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    async with scratch_server("engram-temporal-bench-") as server:
        conn = await asyncpg.connect(server.admin_url(DATABASE))
        started = time.perf_counter()
        try:
            await seed_versions(conn, records=args.records, versions_per_record=args.versions)
            await seed_versions(
                conn, records=args.chains, versions_per_record=100, first=args.records + 1
            )
            stored = await conn.fetchval("SELECT count(*) FROM engram.memories")
        finally:
            await conn.close()
        seed_seconds = time.perf_counter() - started
        settings = runtime_settings(server)
        async with open_kernel(settings=settings) as kernel:
            temporal = kernel.temporal
            span = args.records * args.versions * 10  # seconds of seeded ingestion history
            chains = [record_id(args.records + 1 + c) for c in range(args.chains)]
            records = [record_id(rng.randint(1, args.records)) for _ in range(args.queries)]
            instants = [START + timedelta(seconds=rng.uniform(0, span)) for _ in records]
            events = [START + timedelta(days=rng.uniform(0, 330)) for _ in records]
            types = [MemoryType(rng.choice(TYPES)) for _ in records]
            for rid in records[:50]:  # warm the caches a little
                await temporal.query(record_id=rid)

            chain, _ = await timed(
                args.queries,
                lambda i: temporal.get_version_chain(chains[i % len(chains)], caller=READER),
            )
            current, found_current = await timed(
                args.queries, lambda i: temporal.query(record_id=records[i], caller=READER)
            )
            as_of_t, found_t = await timed(
                args.queries,
                lambda i: temporal.query(
                    record_id=records[i], as_of_ingestion=instants[i], caller=READER
                ),
            )
            as_of_e, found_e = await timed(
                args.queries,
                lambda i: temporal.query(
                    record_id=records[i], as_of_event=events[i], caller=READER
                ),
            )
            as_of_te, found_te = await timed(
                args.queries,
                lambda i: temporal.query(
                    record_id=records[i],
                    as_of_ingestion=instants[i],
                    as_of_event=events[i],
                    caller=READER,
                ),
            )
            listing_now, listed_now = await timed(
                args.queries,
                lambda i: temporal.query(types=[types[i]], limit=50, caller=READER),
            )
            listing_t, listed_t = await timed(
                args.queries,
                lambda i: temporal.query(
                    types=[types[i]], limit=50, as_of_ingestion=instants[i], caller=READER
                ),
            )
            listing_te, listed_te = await timed(
                args.queries,
                lambda i: temporal.query(
                    types=[types[i]],
                    limit=50,
                    as_of_ingestion=instants[i],
                    as_of_event=events[i],
                    caller=READER,
                ),
            )
    worst_as_of = max(x["p95"] for x in (as_of_t, as_of_e, as_of_te, current))
    worst_listing = max(x["p95"] for x in (listing_now, listing_t, listing_te))
    return {
        "benchmark": "temporal",
        "parameters": {
            "records": args.records,
            "versions_per_record": args.versions,
            "hundred_version_chains": args.chains,
            "stored_versions": stored,
            "queries_per_case": args.queries,
            "seed": args.seed,
            "reader": "standard trust (reads agent, user and public levels)",
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        },
        "seed_seconds": round(seed_seconds, 1),
        "version_chain_100_ms": chain,
        "as_of_one_record_ms": {
            "current": current,
            "ingestion_only": as_of_t,
            "event_only": as_of_e,
            "ingestion_and_event": as_of_te,
        },
        "rows_found": {
            "current": found_current,
            "ingestion_only": found_t,
            "event_only": found_e,
            "ingestion_and_event": found_te,
            "listing_now": listed_now,
            "listing_at_t": listed_t,
            "listing_at_t_and_e": listed_te,
        },
        "listing_one_type_50_rows_ms": {
            "current": listing_now,
            "as_of_ingestion": listing_t,
            "as_of_ingestion_and_event": listing_te,
        },
        "targets": {"version_chain_p95_ms": 3.0, "as_of_p95_ms": 10.0, "listing_p95_ms": 10.0},
        "met": {
            "version_chain": chain["p95"] <= 3.0,
            "as_of_one_record": worst_as_of <= 10.0,
            "listing": worst_listing <= 10.0,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--versions", type=int, default=5)
    parser.add_argument("--chains", type=int, default=50, help="records with 100 versions")
    parser.add_argument("--queries", type=int, default=500, help="queries per case")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    report(measure(args))


if __name__ == "__main__":
    main()
