"""engram's side of ``benchmarks.peer_mem0``: the workload through the in-process adapter.

A trusted agent writes through :class:`~engram.protocols.inprocess.AgentSession` (every write
passes the Gate: screening, duplicate and conflict search, a version row, an audit row and an
outbox event) and searches with ``kernel.retrieval.search``, as an application embedding the
kernel would. Its write rate limit is raised, as a benchmark's writer's would be, and its
connection pool holds as many connections for the writers as Mem0's. Each of the
``writers`` concurrent writers is a task with its own session.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import uvloop

from benchmarks.peers.workload import (
    Operations,
    concurrent_figures,
    emit,
    read_job,
    run,
    searches,
    timed,
)
from benchmarks.stats import percentiles
from engram import open_kernel
from engram.config import EngramSettings
from engram.infra.embeddings import EmbeddingAdapter
from engram.kernel import Kernel
from engram.memory import store
from engram.memory.fingerprint import content_hash
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.librarian import NEIGHBOURS
from engram.memory.types import (
    CallerIdentity,
    GateDecision,
    MemoryRecord,
    MemoryType,
    TrustLevel,
    readable_levels,
)
from engram.observability.logging import configure_logging
from engram.protocols.inprocess import AgentSession


async def _main() -> None:
    job = read_job()
    configure_logging("warning", "json")
    settings = EngramSettings(
        database_url=job["database_url"],
        migrate_on_start=False,
        embedding_model_path=Path(job["model_dir"]),
        # as many connections for the writers as Mem0's pool gets, and the kernel's own
        db_pool_max_size=job["writers"] + 8,
        **job.get("engram_settings", {}),
    )
    caller = caller_for_tier("bench-writer", TrustLevel.TRUSTED, writes_per_minute=1e9)
    decisions: dict[str, int] = {}
    versions: dict[str, int] = {}
    async with open_kernel(settings=settings) as kernel:
        if job.get("mode") == "search":
            reader = caller_for_tier("bench-reader", TrustLevel.STANDARD)

            async def search_as_reader(query: str) -> int:
                return len((await kernel.retrieval.search(reader, query, limit=10)).hits)

            emit(await searches(job, search_as_reader))
            return
        session = AgentSession(kernel, caller)

        async def add(text: str) -> str:
            result = await session.remember({"type": "belief", "content": text})
            decisions[result.decision.value] = decisions.get(result.decision.value, 0) + 1
            if result.decision is GateDecision.REJECTED or result.record_id is None:
                raise RuntimeError(f"write not stored ({result.decision}): {result.reason}")
            versions[str(result.record_id)] = result.version or 1
            return str(result.record_id)

        async def update(record_id: str, text: str) -> None:
            result = await session.update(
                UUID(record_id),
                {"type": "belief", "content": text},
                expected_version=versions[record_id],
            )
            if result.decision is GateDecision.REJECTED:
                raise RuntimeError(f"update rejected: {result.reason}")
            versions[record_id] = result.version or versions[record_id]

        async def search(query: str) -> int:
            return len((await kernel.retrieval.search(caller, query, limit=10)).hits)

        async def concurrent_adds(texts: Sequence[str], writers: int) -> dict[str, Any]:
            queue = list(texts)
            latencies: list[float] = []

            async def writer() -> None:
                while queue:
                    text = queue.pop()
                    started = time.perf_counter()
                    await add(text)
                    latencies.append((time.perf_counter() - started) * 1000)

            started = time.perf_counter()
            await asyncio.gather(*(writer() for _ in range(writers)))
            figures = concurrent_figures(latencies, time.perf_counter() - started, writers)
            return {**figures, "mode": "tasks"}

        result = await run(job, Operations(add, update, search, concurrent_adds))
        result["decisions"] = decisions
        result["model_alone"] = await model_alone(kernel.embeddings, job)
        result["governance_alone"] = await governance_alone(kernel, caller, job)
        emit(result)


async def governance_alone(
    kernel: Kernel, caller: CallerIdentity, job: dict[str, Any]
) -> dict[str, Any]:
    """What a governed write must do after its embedding that Mem0's ``add`` does not, each
    step alone on the store the run left: the duplicate and neighbour query, and the conflict
    judgement against those neighbours. Texts this store has never seen (the second
    concurrent set, which only Mem0 writes), as a new write's are; nothing is written."""
    texts = job["concurrent_texts_alt"][:100]
    levels = readable_levels(caller)
    query_ms: list[float] = []
    judgement_ms: list[float] = []
    for text in texts:
        vector = await kernel.embeddings.embed_one(text)
        record = MemoryRecord.draft(MemoryType.BELIEF, text, source_agent=caller.agent_id)
        elapsed, found = await timed(
            store.candidates(
                kernel.db,
                embedding=vector,
                namespace=record.namespace,
                memory_type=record.type,
                content_hash=content_hash(text),
                levels=levels,
                limit=NEIGHBOURS,
            )
        )
        query_ms.append(elapsed)
        neighbours = found[1]
        elapsed, _ = await timed(
            kernel.conflicts.detect(
                record,
                [n.record for n in neighbours],
                similarities={n.record.id: n.similarity for n in neighbours},
            )
        )
        judgement_ms.append(elapsed)
    both = [q + j for q, j in zip(query_ms, judgement_ms, strict=True)]
    return {
        "neighbour_query_ms": percentiles(query_ms),
        "conflict_judgement_ms": percentiles(judgement_ms),
        "both_ms": percentiles(both),
    }


async def model_alone(embeddings: EmbeddingAdapter, job: dict[str, Any]) -> dict[str, Any]:
    """The floors the model sets on this machine now, through the kernel's own embedding
    port: one text at a time (a single writer's floor), and the concurrent phase's texts in
    batches of 16 (a sustained floor: no write can be faster than its embedding)."""
    latencies = []
    for text in job["texts"][:200]:
        elapsed, _ = await timed(embeddings.embed_one(text))
        latencies.append(elapsed)
    # A search's query is shorter than a write's text and embeds faster (here about 0.42 of
    # the time): the floor of a search is its query's embedding.
    asked = []
    for query in job["queries"][:200]:
        elapsed, _ = await timed(embeddings.embed_one(query))
        asked.append(elapsed)
    texts = job["concurrent_texts"]
    started = time.perf_counter()
    for start in range(0, len(texts), 16):
        await embeddings.embed_batch(texts[start : start + 16])
    seconds = time.perf_counter() - started
    return {
        "single_ms": percentiles(latencies),
        "query_ms": percentiles(asked),
        "batched_per_second": round(len(texts) / seconds, 1),
    }


if __name__ == "__main__":
    uvloop.run(_main())
