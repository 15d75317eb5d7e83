"""The workload every peer driver runs, and how it is timed (standard library only).

A driver supplies the operations (add, update, search, and adds from concurrent writers)
and :func:`run` times them in one fixed order on the job's texts:

1. ``warmup`` adds, not timed (the model, pools and caches warm up);
2. ``single``: every text of ``texts`` added by one writer, one after another;
3. ``update``: ``updates`` of records added in step 2, each to a new text;
4. ``search``: each of ``queries`` as a top-10 search over what is stored;
5. ``concurrent``: ``concurrent_texts`` added by ``writers`` writers at once.

Latencies are wall-clock milliseconds around the one call; throughput is operations over the
phase's wall-clock seconds. The resident memory is that of the driver's process and every
process it started (model workers), read after the search phase (and again at the end);
the shared PostgreSQL is not counted.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.stats import percentiles


def tree_rss_mb(pid: int | None = None) -> float:
    """Resident memory of process ``pid`` (this one by default) and all its descendants, MiB."""
    root = os.getpid() if pid is None else pid
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: fields start after the last ')'.
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
    tree = {root}
    grew = True
    while grew:
        grew = False
        for child, parent in parents.items():
            if parent in tree and child not in tree:
                tree.add(child)
                grew = True
    total_kb = 0
    for process in tree:
        try:
            status = Path(f"/proc/{process}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total_kb += int(line.split()[1])
    return round(total_kb / 1024, 1)


@dataclass(frozen=True)
class Operations:
    """One system's operations, as its driver calls them."""

    add: Callable[[str], Awaitable[str]]
    """Store one text; returns the new record's id."""
    update: Callable[[str, str], Awaitable[None]]
    """Replace the text of record ``id`` (first argument) by the second argument."""
    search: Callable[[str], Awaitable[int]]
    """Top-10 search; returns the number of hits."""
    concurrent_adds: Callable[[Sequence[str], int], Awaitable[dict[str, Any]]]
    """Add the texts with that many writers at once; the figures of :func:`concurrent_figures`."""


async def timed(call: Awaitable[Any]) -> tuple[float, Any]:
    """Milliseconds the awaitable took, and its value."""
    started = time.perf_counter()
    value = await call
    return (time.perf_counter() - started) * 1000, value


def phase(latencies: list[float], seconds: float) -> dict[str, Any]:
    return {
        "ms": percentiles(latencies),
        "per_second": round(len(latencies) / seconds, 1),
        "seconds": round(seconds, 2),
    }


async def run(job: dict[str, Any], ops: Operations) -> dict[str, Any]:
    """Run the workload of ``job`` through ``ops``; the figures of each phase."""
    for text in job["warmup_texts"]:
        await ops.add(text)

    ids: list[str] = []
    latencies: list[float] = []
    started = time.perf_counter()
    for text in job["texts"]:
        elapsed, record_id = await timed(ops.add(text))
        latencies.append(elapsed)
        ids.append(record_id)
    single = phase(latencies, time.perf_counter() - started)

    latencies = []
    started = time.perf_counter()
    for index, text in enumerate(job["update_texts"]):
        target = ids[(index * 7919) % len(ids)]
        elapsed, _ = await timed(ops.update(target, text))
        latencies.append(elapsed)
    update = phase(latencies, time.perf_counter() - started)

    latencies = []
    hits = 0
    started = time.perf_counter()
    for query in job["queries"]:
        elapsed, found = await timed(ops.search(query))
        latencies.append(elapsed)
        hits += found
    search = phase(latencies, time.perf_counter() - started)
    search["hits_per_query"] = round(hits / max(1, len(job["queries"])), 2)
    # Read before the concurrent phase: a driver may open a second instance there (Mem0's
    # AsyncMemory, with a model of its own), which is not the work being compared.
    rss_mb = tree_rss_mb()

    concurrent = await ops.concurrent_adds(job["concurrent_texts"], job["writers"])
    return {
        "single": single,
        "update": update,
        "search": search,
        "concurrent": concurrent,
        "rss_mb": rss_mb,
        "rss_mb_at_end": tree_rss_mb(),
    }


async def searches(job: dict[str, Any], search: Callable[[str], Awaitable[int]]) -> dict[str, Any]:
    """Top-10 searches over a large store: ``warmup`` queries untimed, then each of
    ``queries`` timed."""
    for query in job["warmup_queries"]:
        await search(query)
    latencies: list[float] = []
    hits = 0
    started = time.perf_counter()
    for query in job["queries"]:
        elapsed, found = await timed(search(query))
        latencies.append(elapsed)
        hits += found
    figures = phase(latencies, time.perf_counter() - started)
    figures["hits_per_query"] = round(hits / max(1, len(job["queries"])), 2)
    return figures


def concurrent_figures(latencies: list[float], seconds: float, writers: int) -> dict[str, Any]:
    """Figures of a concurrent phase: per-write latency and total throughput."""
    return {**phase(latencies, seconds), "writers": writers}


def read_job() -> dict[str, Any]:
    job: dict[str, Any] = json.load(sys.stdin)
    return job


def emit(result: dict[str, Any]) -> None:
    """The driver's one line of output."""
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


def read_rows(path: str) -> list[dict[str, Any]]:
    """The objects of a JSON-lines file."""
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


async def relevance(
    job: dict[str, Any],
    add: Callable[[str], Awaitable[str]],
    update: Callable[[str, str], Awaitable[None]],
    ranked: Callable[[str], Awaitable[list[str]]],
) -> dict[str, Any]:
    """Store the labelled retrieval set (``memories_path``: a memory with ``replaces`` updates
    the record the memory it names became) and answer each query of ``queries_path``.

    Returns each query's hits as the keys of the memories their records hold now (best
    first), which memory keys are heads, and the search latency (embedding included)."""
    record_of: dict[str, str] = {}
    head_of: dict[str, str] = {}
    for row in read_rows(job["memories_path"]):
        if row.get("replaces"):
            record_id = record_of[row["replaces"]]
            await update(record_id, row["content"])
        else:
            record_id = await add(row["content"])
        record_of[row["key"]] = record_id
        head_of[record_id] = row["key"]
    answers: dict[str, list[str | None]] = {}
    latencies: list[float] = []
    for query in read_rows(job["queries_path"]):
        elapsed, found = await timed(ranked(query["query"]))
        latencies.append(elapsed)
        answers[query["id"]] = [head_of.get(record_id) for record_id in found]
    return {
        "ranked": answers,
        "heads": sorted(head_of.values()),
        "stored": len(head_of),
        "search_ms": percentiles(latencies),
    }
