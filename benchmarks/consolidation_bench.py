"""Consolidation throughput: a deep pass over 10,000 fast-path records, and writes beside it.

Prints one JSON object. A private embedded PostgreSQL gets ``--records`` episodes (20-60
words of agent text, event times spread over 300 days) written through the Gate by 16
concurrent writers; then:

- **pass**: one ``scheduled_deep`` pass through ``kernel.consolidation.run``: seconds for
  planning (read, cluster, summarise) and in all, records consumed and created, batches,
  and the peak RSS of the process (and of the embedding worker, its child);
- **writes beside a pass**: ``--probe`` sequential governed writes alone (baseline); the
  same number while a pass over ``--second`` newly written records runs in this process
  (one event loop and one GIL shared with the writes); and the same number while such a
  pass runs in a separate worker process on the same database, as an operator who keeps
  serving and consolidation apart runs it; p50/p95/p99 of each.

Target (issue 13): 10,000 candidates in at most 60 s on this 2-core machine.

    python -m benchmarks.consolidation_bench [--records 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import resource
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.agent_text import texts
from benchmarks.harness import bulk_writer, report, runtime_settings, scratch_server
from benchmarks.stats import percentiles
from engram import open_kernel
from engram.config import EngramSettings
from engram.kernel import Kernel
from engram.memory.consolidation import ConsolidationTrigger
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
)

WRITER = bulk_writer("bench-writer")
START = datetime(2026, 1, 1, tzinfo=UTC)


def _record(text: str, rng: random.Random) -> MemoryRecord:
    return MemoryRecord.draft(
        MemoryType.EPISODE,
        text,
        source_agent=WRITER.agent_id,
        event_time=START + timedelta(minutes=rng.uniform(0, 300 * 24 * 60)),
    )


async def _write(kernel: Kernel, record: MemoryRecord) -> float:
    started = time.perf_counter()
    result = await kernel.gate.evaluate(
        GateRequest(GateAction.CREATE, record, WRITER, GateDecisionType.EXTERNAL)
    )
    if result.record_id is None:
        raise RuntimeError(result.reason)
    return (time.perf_counter() - started) * 1000


async def _seed(kernel: Kernel, corpus: list[str], rng: random.Random) -> float:
    queue = list(corpus)
    started = time.perf_counter()

    async def writer() -> None:
        while queue:
            await _write(kernel, _record(queue.pop(), rng))

    await asyncio.gather(*(writer() for _ in range(16)))
    return time.perf_counter() - started


def _peak_rss_mb() -> dict[str, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"process": round(own, 1), "largest_child": round(children, 1)}


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    corpus = texts(args.records + 2 * args.second + 3 * args.probe, args.seed)
    first, rest = corpus[: args.records], corpus[args.records :]
    second, third = rest[: args.second], rest[args.second : 2 * args.second]
    probes = rest[2 * args.second :]
    async with (
        scratch_server("engram-consolidation-bench-") as server,
        open_kernel(settings=runtime_settings(server)) as kernel,
    ):
        seeded = await _seed(kernel, first, rng)
        rss_before_pass = _peak_rss_mb()
        started = time.perf_counter()
        planned = await kernel.consolidation.evaluate_candidates()
        plan_seconds = time.perf_counter() - started
        started = time.perf_counter()
        result = await kernel.consolidation.run(ConsolidationTrigger.SCHEDULED_DEEP)
        pass_seconds = time.perf_counter() - started

        rss_after_pass = _peak_rss_mb()

        await _seed(kernel, second, rng)
        alone = [await _write(kernel, _record(t, rng)) for t in probes[: args.probe]]
        running = asyncio.ensure_future(
            kernel.consolidation.run(ConsolidationTrigger.SCHEDULED_DEEP)
        )
        beside = [
            await _write(kernel, _record(t, rng)) for t in probes[args.probe : 2 * args.probe]
        ]
        overlapped = not running.done()
        second_pass = await running

        await _seed(kernel, third, rng)
        url = runtime_settings(server).database_url
        assert url is not None
        worker = asyncio.ensure_future(_pass_in_a_worker(url.get_secret_value()))
        await asyncio.sleep(args.worker_start)  # the worker loads the model before its pass
        apart = [await _write(kernel, _record(t, rng)) for t in probes[2 * args.probe :]]
        worker_pass = await worker
    return {
        "benchmark": "consolidation_bench",
        "records": args.records,
        "seed_seconds": round(seeded, 1),
        "pass": {
            "candidates": result.candidates,
            "planned_topics": len(planned),
            "plan_seconds": round(plan_seconds, 2),
            "seconds": round(pass_seconds, 2),
            "consumed": len(result.consumed),
            "created": len(result.created),
            "batches": len(result.batches),
            "skipped": result.skipped,
            "candidates_per_second": round(result.candidates / pass_seconds, 1),
        },
        "peak_rss_mb": {"before_pass": rss_before_pass, "after_pass": rss_after_pass},
        "writes_beside_a_pass_ms": {
            "alone": percentiles(alone),
            "pass_in_the_same_process": percentiles(beside),
            "pass_in_a_worker_process": percentiles(apart),
            "same_process_pass_outlasted_the_probe": overlapped,
            "same_process_pass": {
                "candidates": second_pass.candidates,
                "seconds": round(second_pass.duration_seconds, 2),
            },
            "worker_pass": worker_pass,
        },
        "target": {"seconds_for_10000": 60.0},
        "met": {"pass_seconds": pass_seconds * 10_000 / max(1, args.records) <= 60.0},
        "python": platform.python_version(),
    }


async def _pass_in_a_worker(database_url: str) -> dict[str, Any]:
    """One deep pass run by another process on the same database (as ``engram worker``
    would run it); what it reported, with its wall time."""
    env = {
        **os.environ,
        "ENGRAM_DATABASE_URL": database_url,
        "ENGRAM_MIGRATE_ON_START": "false",
        "ENGRAM_LOG_LEVEL": "warning",
    }
    started = time.perf_counter()
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "benchmarks.consolidation_bench",
        "--pass-only",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"the worker pass failed (exit {child.returncode})")
    reported: dict[str, Any] = json.loads(out)
    reported["wall_seconds_with_start"] = round(time.perf_counter() - started, 2)
    return reported


async def _pass_only() -> dict[str, Any]:
    """The ``--pass-only`` mode: open a kernel from the environment, run one deep pass."""
    async with open_kernel(settings=EngramSettings()) as kernel:
        result = await kernel.consolidation.run(ConsolidationTrigger.SCHEDULED_DEEP)
    return {
        "candidates": result.candidates,
        "consumed": len(result.consumed),
        "seconds": round(result.duration_seconds, 2),
        "peak_rss_mb": _peak_rss_mb()["process"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--second", type=int, default=2_000, help="records of the second pass")
    parser.add_argument("--probe", type=int, default=200, help="writes timed alone and beside")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument(
        "--worker-start", type=float, default=3.0, help="seconds to let the worker start"
    )
    parser.add_argument("--pass-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    report(_pass_only() if args.pass_only else measure(args))


if __name__ == "__main__":
    main()
