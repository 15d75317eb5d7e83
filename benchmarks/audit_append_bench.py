"""Audit append: what chaining one Gate decision into the audit log costs, and what sealing
a checkpoint costs.

Prints one JSON object. Each append runs in its own transaction as the runtime role (the
Gate's rejected-evaluation path: the audit row alone), so the figures are the append
statement plus its commit:

1. ``single``: ``--appends`` appends one after another: the latency of each transaction and,
   inside it, of the append statement alone.
2. ``concurrent``: the same number of appends from ``--writers`` concurrent writers (the lanes
   spread them), as throughput and per-transaction latency.
3. ``seal``: sealing a checkpoint of the log just written (the first covers every row), then
   ``--rounds`` seals each after ``--every`` more appends.
4. ``concurrent_sealing``: phase 2 again while the log seals itself every ``--seal-every``
   appends in the background (each seal waits for the appends in flight and holds new ones
   back for a moment).

    python -m benchmarks.audit_append_bench [--appends 2000] [--writers 8] [--every 1000]
        [--seal-every 100]
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from benchmarks.harness import DATABASE, report, scratch_server
from benchmarks.stats import percentiles
from engram.infra.postgres import PostgresDatabase
from engram.infra.resilience import CircuitBreaker, Resilience
from engram.memory.audit.log import AuditEntry, AuditLog, canonical_json


def _entry(n: int) -> AuditEntry:
    """A rejected CREATE with a realistic input snapshot."""
    snapshot = canonical_json(
        {
            "record": {
                "content": f"Host {n} serves region {n % 5} and answers on port {8000 + n}.",
                "namespace": "default",
                "type": "belief",
                "access_level": "agent",
                "metadata": {"source": "bench"},
                "source_confidence": 0.8,
            }
        }
    )
    return AuditEntry(
        decision_id=uuid.uuid4(),
        request_id=f"bench-{n}-{uuid.uuid4().hex[:8]}",
        occurred_at=datetime.now(UTC),
        action="CREATE",
        decision="rejected",
        outcome="none",
        decision_type="external",
        reason="classification: reads as an instruction",
        agent_id="bench-writer",
        caller='{"agent_id":"bench-writer","trust":"standard"}',
        record_id=None,
        version_id=None,
        input_snapshot=snapshot,
        layer1_checks='[{"check":"schema","passed":true},{"check":"classification","passed":false}]',
        layer2_decision=None,
        decision_source="layer1",
        duration_ms=1.25,
    )


async def _append(db: PostgresDatabase, audit: AuditLog, n: int) -> tuple[float, float]:
    """One append in its own transaction: (transaction ms, statement ms)."""
    entry = _entry(n)
    started = time.perf_counter()
    statement = 0.0
    async with db.transaction() as conn:
        step = time.perf_counter()
        await audit.append(conn, entry)
        statement = time.perf_counter() - step
    return (time.perf_counter() - started) * 1000, statement * 1000


async def _concurrent(
    db: PostgresDatabase, audit: AuditLog, appends: int, writers: int, first: int
) -> dict[str, Any]:
    """``appends`` appends from ``writers`` concurrent writers: throughput and latency."""
    queue = iter(range(first, first + appends))
    latencies: list[float] = []

    async def writer() -> None:
        for n in queue:
            latencies.append((await _append(db, audit, n))[0])  # noqa: PERF401 - shared

    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(writers)))
    elapsed = time.perf_counter() - started
    return {
        "writers": writers,
        "appends_per_second": round(appends / elapsed, 1),
        "transaction_ms": percentiles(latencies),
    }


async def _measure(
    appends: int, writers: int, every: int, rounds: int, seal_every: int
) -> dict[str, Any]:
    async with scratch_server("engram-audit-bench-") as server:
        db = await PostgresDatabase.connect(
            server.url(user="engram_runtime", database=DATABASE),
            resilience=Resilience(CircuitBreaker("bench", fail_max=5, reset_seconds=30.0)),
            min_size=writers,
            max_size=writers + 2,
        )
        try:
            audit = AuditLog(db)
            for n in range(200):  # warm up the pool, plans and caches
                await _append(db, audit, n)
            single = [await _append(db, audit, n) for n in range(appends)]
            result: dict[str, Any] = {
                "appends": appends,
                "single": {
                    "transaction_ms": percentiles([t for t, _ in single]),
                    "statement_ms": percentiles([s for _, s in single]),
                },
                "concurrent": await _concurrent(db, audit, appends, writers, appends),
            }
            seal = getattr(audit, "seal", None)
            if seal is None:  # a version of engram without checkpoints
                return result
            rows = await audit.count()
            step = time.perf_counter()
            await seal()
            first = (time.perf_counter() - step) * 1000
            periodic = []
            for r in range(rounds):
                for n in range(every):
                    await _append(db, audit, 10_000 * (r + 1) + n)
                step = time.perf_counter()
                await seal()
                periodic.append((time.perf_counter() - step) * 1000)
            result["seal"] = {
                "first_ms": round(first, 3),
                "first_rows": rows,
                "every": every,
                "periodic_ms": percentiles(periodic),
            }
            sealing = AuditLog(db, checkpoint_every=seal_every)
            result["concurrent_sealing"] = {
                "checkpoint_every": seal_every,
                **await _concurrent(db, sealing, appends, writers, 100_000),
            }
            await sealing.drain()
            return result
        finally:
            await db.close()


def main() -> None:
    """Parse the options and print the measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seal-every", type=int, default=100)
    args = parser.parse_args()
    report(_measure(args.appends, args.writers, args.every, args.rounds, args.seal_every))


if __name__ == "__main__":
    main()
