"""Write CPU budget: what one governed write costs in CPU, part by part, next to its embedding.

Prints one JSON object. On a machine whose cores the embedding model saturates, sustained
write throughput can reach at most ``e / (e + rest)`` of the embedding-only throughput, where
``e`` is the model's CPU per text and ``rest`` everything else a write makes the machine do.
This script measures the parts of ``rest`` that no implementation of the specification can
skip, each on its own, and prints that ceiling (ADR-016):

1. ``e``: CPU of the embedding workers per text, ``--texts`` fresh texts sent in batches of 16
   through the kernel's own adapter (as the embedding-only phase of gate_bench does).
2. PostgreSQL, one backend measured with the server's own CPU counters, on ``--records``
   seeded versions: the Gate's neighbour query (HNSW, exact duplicate by hash); one version
   row inserted and committed with every index of the schema; the same without the HNSW index
   (the difference is the HNSW insertion).
3. Python: Layer 1 (schema, PII, rate limit, classification) and Layer 2 (the heuristic
   advisor with its conflict detector) on fresh texts against their real neighbours.

CPU counters tick every 10 ms, so with the default 400 texts (200 inserts each way) a
PostgreSQL figure is good to about 0.05 ms. Not counted, so the ceiling is generous: the audit
row, the outbox, the driver and event loop, round trips and logs.

    python -m benchmarks.write_cpu_budget [--records 100000] [--texts 400]
"""

from __future__ import annotations

import argparse
import os
import random
import time
import uuid
from typing import Any

import asyncpg
import numpy as np
import psutil
from pgvector.asyncpg import register_vector

from benchmarks.agent_text import texts
from benchmarks.gate_bench import CALLER, cpu_seconds, request_for, seed
from benchmarks.harness import DATABASE, report, runtime_settings, scratch_server
from engram import open_kernel
from engram.memory import store
from engram.memory.fingerprint import content_hash
from engram.memory.gate.decision import advise, screen
from engram.memory.gate.rate_limit import RateLimiter
from engram.memory.types import (
    MemoryType,
    readable_levels,
)

_INSERT = """
INSERT INTO memories (id, record_id, version, type, content, metadata, source_agent,
    source_confidence, event_time, ingestion_time, access_level, gate_decision_id,
    gate_decision_type, namespace, importance, content_hash, embedding, embedding_model)
VALUES ($1, $1, 1, 'belief', $2, '{}', 'bench-writer', 0.75, now(), now(), 'agent', $3,
    'external', 'default', 0.5, $4, $5, 'sentence-transformers/all-MiniLM-L6-v2-int8')
"""


def backend_cpu(backend: psutil.Process) -> float:
    """CPU seconds (user + system) so far of one PostgreSQL backend."""
    times = backend.cpu_times()
    return float(times.user + times.system)


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    n = args.texts
    async with scratch_server("engram-cpu-budget-") as server:
        # The model in a worker process: its CPU is read as the worker's (not the default).
        settings = runtime_settings(server, embedding_workers=1)
        async with open_kernel(settings=settings) as kernel:
            await seed(
                server,
                kernel_embed=kernel.embeddings,
                records=args.records,
                pool=min(2_000, args.records),
                rng=random.Random(args.seed),
            )
            fresh = texts(n, seed=args.seed + 2_000)

            # 1. the model, through the kernel's adapter, in batches of 16
            before = cpu_seconds(server.pgdata)["embedding_workers"]
            vectors: list[list[float]] = []
            for start in range(0, n, 16):
                vectors.extend(await kernel.embeddings.embed_batch(fresh[start : start + 16]))
            embedding_ms = (cpu_seconds(server.pgdata)["embedding_workers"] - before) * 1000 / n

            # 3. Layer 1 and Layer 2 in this process, against each text's real neighbours
            limiter = RateLimiter()
            layer1_s = layer2_s = 0.0
            for text, vector in zip(fresh, vectors, strict=True):
                request = request_for(text)
                exact, nearest = await store.candidates(
                    kernel.db,
                    embedding=vector,
                    namespace=request.record.namespace,
                    memory_type=MemoryType.BELIEF,
                    content_hash=content_hash(text),
                    levels=readable_levels(CALLER),
                )
                started = time.process_time()
                screening = screen(request, head=None, missing_evidence=(), limiter=limiter)
                middle = time.process_time()
                await advise(
                    request,
                    screening.layer1,
                    head=None,
                    exact=exact,
                    nearest=nearest,
                    embedded=True,
                    advisor=kernel.gate.advisor,
                )
                layer1_s += middle - started
                layer2_s += time.process_time() - middle

        # 2. PostgreSQL, one backend of the owner role
        conn = await asyncpg.connect(server.admin_url(DATABASE))
        try:
            await register_vector(conn)
            await conn.execute("SET ROLE engram_owner")
            await conn.execute("SET search_path = engram, public")
            await conn.execute("SET hnsw.iterative_scan = strict_order")
            backend = psutil.Process(await conn.fetchval("SELECT pg_backend_pid()"))
            decision = await conn.fetchval("SELECT decision_id FROM librarian_audit LIMIT 1")
            arrays = [np.array(v, dtype=np.float32) for v in vectors]

            before = backend_cpu(backend)
            for text, array in zip(fresh, arrays, strict=True):
                await store.candidates(
                    conn,  # type: ignore[arg-type]  # an asyncpg connection has the same calls
                    embedding=array,  # type: ignore[arg-type]  # pgvector's codec, raw connection
                    namespace="default",
                    memory_type=MemoryType.BELIEF,
                    content_hash=content_hash(text),
                    levels=readable_levels(CALLER),
                )
            neighbours_ms = (backend_cpu(backend) - before) * 1000 / n

            async def insert_all(rows: list[tuple[str, np.ndarray]]) -> float:
                before = backend_cpu(backend)
                for text, vector in rows:
                    await conn.execute(
                        _INSERT, uuid.uuid4(), text, decision, content_hash(text), vector
                    )
                return (backend_cpu(backend) - before) * 1000 / len(rows)

            half = n // 2
            pairs = list(zip(fresh, arrays, strict=True))
            insert_ms = await insert_all(pairs[:half])
            await conn.execute("DROP INDEX memories_embedding_hnsw_idx")
            insert_without_hnsw_ms = await insert_all(pairs[half:])
        finally:
            await conn.close()

    layer1_ms, layer2_ms = layer1_s * 1000 / n, layer2_s * 1000 / n
    rest = neighbours_ms + insert_ms + layer1_ms + layer2_ms
    return {
        "benchmark": "write_cpu_budget",
        "parameters": {
            "records_seeded": args.records,
            "texts": n,
            "seed": args.seed,
            "embedding_threads": settings.embedding_threads,
            "cpu_count": os.cpu_count(),
            "text": "generated agent-memory text, 20-60 words (benchmarks/agent_text.py)",
        },
        "cpu_ms_per_write": {
            "embedding_model": round(embedding_ms, 3),
            "postgres_neighbour_query": round(neighbours_ms, 3),
            "postgres_version_insert_and_commit": round(insert_ms, 3),
            "of_which_hnsw_insertion": round(insert_ms - insert_without_hnsw_ms, 3),
            "python_layer1": round(layer1_ms, 3),
            "python_layer2": round(layer2_ms, 3),
            "counted_besides_embedding": round(rest, 3),
        },
        "budget_for_90_percent_ms": round(embedding_ms / 9, 3),
        "ceiling_sustained_vs_embedding_floor": round(embedding_ms / (embedding_ms + rest), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="versions to seed")
    parser.add_argument("--texts", type=int, default=400, help="fresh texts per measurement")
    parser.add_argument("--seed", type=int, default=7)
    report(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
