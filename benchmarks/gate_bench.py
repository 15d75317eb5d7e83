"""Gate benchmark: decision latency, governed-write latency and sustained write throughput.

Prints one JSON object. Steps:

1. Start a private embedded PostgreSQL in a temporary directory and migrate it.
2. Seed ``--records`` versions (default 100,000) of generated agent-memory text (20-60 words),
   each with its audit row (hash-chained like the Gate's own), by COPY, building the HNSW index
   afterwards. Embedding 100,000 texts would take about 15 minutes on 2 cores, so seed vectors
   are real model embeddings of ``--pool`` distinct texts, each reused with a small random
   perturbation (renormalised); the texts themselves are all distinct. Queries and writes in
   the measured phases embed their own fresh texts with the real model.
3. Open a kernel on that database and measure, with fresh texts:
   - single writer, ``--single`` sequential CREATEs: Gate evaluation time (Layer 1 + neighbour
     lookups + Layer 2, embedding and persistence excluded, from each result's timings) and
     end-to-end time as the caller waits for it (embed + Gate + persist + audit; conflict
     resolutions follow from the outbox in the background, competing for the same CPU);
   - the embedding-only floor: ``--sustained`` texts embedded by ``--writers`` concurrent
     callers through the kernel's own embedding adapter;
   - sustained throughput: ``--sustained`` CREATEs by ``--writers`` concurrent writers.

    python -m benchmarks.gate_bench [--records 100000] [--single 400] [--sustained 800]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np
import psutil
from pgvector.asyncpg import register_vector

from benchmarks.agent_text import texts
from benchmarks.harness import DATABASE, report, runtime_settings, scratch_server
from benchmarks.stats import percentiles
from engram import open_kernel
from engram.infra.embedded_server import EmbeddedPostgres
from engram.memory.audit.log import LANES, AuditEntry, canonical_json, genesis_hash
from engram.memory.fingerprint import content_hash
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.requests import GateRequest, WriteOutcome
from engram.memory.types import (
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    TrustLevel,
)

CALLER = replace(caller_for_tier("bench-writer", TrustLevel.TRUSTED), writes_per_minute=10_000_000)


async def seed_corpus(
    kernel_embed: Any, *, records: int, pool: int, rng: random.Random
) -> tuple[list[str], np.ndarray]:
    """``records`` generated texts and their vectors: real model embeddings of the first
    ``pool`` texts, reused with a small perturbation (unit length)."""
    seed_texts = texts(records, seed=11)
    pooled: list[list[float]] = []
    for start in range(0, pool, 32):
        pooled.extend(await kernel_embed.embed_batch(seed_texts[start : start + 32]))
    pool_vectors = np.array(pooled, dtype=np.float32)
    noise = np.random.default_rng(rng.randint(0, 2**31)).normal(
        0.0, 0.015, size=(records, pool_vectors.shape[1])
    )
    vectors = pool_vectors[np.arange(records) % pool] + noise.astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return seed_texts, vectors


async def seed(
    server: EmbeddedPostgres,
    *,
    kernel_embed: Any,
    records: int,
    pool: int,
    rng: random.Random,
    ef_construction: int = 64,
    corpus: tuple[list[str], np.ndarray] | None = None,
    database: str = DATABASE,
) -> dict[str, float]:
    """Bulk-load ``records`` versions and their audit rows (``corpus``: texts and vectors
    made by :func:`seed_corpus`, made here when not given); return timings in seconds."""
    started = time.perf_counter()
    if corpus is None:
        corpus = await seed_corpus(kernel_embed, records=records, pool=pool, rng=rng)
    seed_texts, vectors = corpus
    embedded = time.perf_counter()

    heads = {lane: genesis_hash(lane) for lane in range(LANES)}
    audit_rows, memory_rows = [], []
    now = datetime.now(UTC)
    for index, text in enumerate(seed_texts):
        record_id, decision_id = uuid.uuid4(), uuid.uuid4()
        entry = AuditEntry(
            decision_id=decision_id,
            request_id=str(decision_id),
            occurred_at=now,
            action="CREATE",
            decision="approved",
            outcome="created",
            decision_type="external",
            reason="seeded by the benchmark",
            agent_id="bench-seed",
            caller=canonical_json({"agent_id": "bench-seed"}),
            record_id=record_id,
            version_id=record_id,
            input_snapshot=canonical_json({"action": "CREATE", "content": text}),
            layer1_checks="[]",
            layer2_decision=None,
            decision_source="seed",
            duration_ms=0.0,
        )
        lane = entry.lane
        row_hash = entry.digest(heads[lane], seq=index + 1)  # the log starts empty
        audit_rows.append(
            (index + 1, decision_id, entry.request_id, now, "CREATE", "approved", "created",
             "external", entry.reason, "bench-seed", entry.caller, record_id, record_id,
             entry.input_snapshot, "[]", "seed", 0.0, lane, heads[lane], row_hash)
        )  # fmt: skip
        heads[lane] = row_hash
        memory_rows.append(
            (record_id, record_id, 1, MemoryType.BELIEF.value, text, "{}", "bench-seed", 0.75,
             now, now, "agent", decision_id, "external", "default", 0.5,
             content_hash(text), vectors[index], "sentence-transformers/all-MiniLM-L6-v2-int8")
        )  # fmt: skip
    conn = await asyncpg.connect(server.admin_url(database))
    try:
        await register_vector(conn)
        await conn.execute("SET ROLE engram_owner")
        await conn.execute("DROP INDEX engram.memories_embedding_hnsw_idx")
        await conn.copy_records_to_table(
            "librarian_audit",
            schema_name="engram",
            columns=[
                "seq",
                "decision_id",
                "request_id",
                "occurred_at",
                "action",
                "decision",
                "outcome",
                "decision_type",
                "reason",
                "agent_id",
                "caller",
                "record_id",
                "version_id",
                "input_snapshot",
                "layer1_checks",
                "decision_source",
                "duration_ms",
                "lane",
                "prev_hash",
                "row_hash",
            ],
            records=audit_rows,
        )
        await conn.copy_records_to_table(
            "memories",
            schema_name="engram",
            columns=[
                "id",
                "record_id",
                "version",
                "type",
                "content",
                "metadata",
                "source_agent",
                "source_confidence",
                "event_time",
                "ingestion_time",
                "access_level",
                "gate_decision_id",
                "gate_decision_type",
                "namespace",
                "importance",
                "content_hash",
                "embedding",
                "embedding_model",
            ],
            records=memory_rows,
        )
        # COPY wrote seq itself (the hash covers it): move the identity past the rows.
        await conn.execute(
            "SELECT setval('engram.librarian_audit_seq_seq', $1)", max(len(audit_rows), 1)
        )
        for lane, tip in heads.items():
            await conn.execute(
                "UPDATE engram.audit_chain_heads SET last_hash = $2, "
                "last_seq = (SELECT max(seq) FROM engram.librarian_audit WHERE lane = $1) "
                "WHERE lane = $1",
                lane,
                tip,
            )
        copied = time.perf_counter()
        await conn.execute("SET maintenance_work_mem = '512MB'")
        await conn.execute(
            "CREATE INDEX memories_embedding_hnsw_idx ON engram.memories "
            f"USING hnsw (embedding vector_cosine_ops) WITH (ef_construction = {ef_construction})"
        )
        await conn.execute("ANALYZE engram.memories")
        await conn.execute("ANALYZE engram.librarian_audit")
    finally:
        await conn.close()
    indexed = time.perf_counter()
    return {
        "embed_pool_seconds": round(embedded - started, 1),
        "copy_seconds": round(copied - embedded, 1),
        "hnsw_build_seconds": round(indexed - copied, 1),
    }


def request_for(text: str) -> GateRequest:
    """A CREATE of ``text`` as a belief by the benchmark's trusted writer."""
    record = MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="bench-writer")
    return GateRequest(GateAction.CREATE, record, CALLER, GateDecisionType.EXTERNAL)


def cpu_seconds(pgdata: Path) -> dict[str, float]:
    """CPU time (user + system) so far of this process, its embedding workers and PostgreSQL."""
    me = psutil.Process()
    own = sum(me.cpu_times()[:2])
    workers = 0.0
    for child in me.children(recursive=True):
        try:
            workers += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            continue
    postgres = 0.0
    for proc in psutil.process_iter(["name", "cmdline"]):
        if proc.info["name"] == "postgres" and str(pgdata.resolve()) in " ".join(
            proc.info["cmdline"] or []
        ):
            for member in [proc, *proc.children(recursive=True)]:
                try:
                    times = member.cpu_times()
                    postgres += times.user + times.system
                except psutil.NoSuchProcess:
                    continue
    return {"kernel": own, "embedding_workers": workers, "postgres": postgres}


def cpu_per_item(before: dict[str, float], after: dict[str, float], items: int) -> dict[str, float]:
    """Milliseconds of CPU per item, by component."""
    return {key: round((after[key] - before[key]) * 1000 / items, 2) for key in before}


def rss_mb() -> float:
    """RSS of this process and its children (the embedding workers), in MiB."""
    me = psutil.Process()
    total = me.memory_info().rss
    for child in me.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return round(total / 2**20, 1)


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    async with scratch_server("engram-gate-bench-") as server:
        # The model in a worker process (not the default), so that the CPU split below can
        # tell the model's CPU from the kernel's; docs/peers.md compares the default.
        settings = runtime_settings(server, db_pool_max_size=args.writers + 8, embedding_workers=1)
        async with open_kernel(settings=settings) as kernel:
            seeding = await seed(
                server,
                kernel_embed=kernel.embeddings,
                records=args.records,
                pool=args.pool,
                rng=rng,
                ef_construction=args.ef_construction,
            )
            fresh = texts(args.single + 2 * args.sustained + 50, seed=args.seed + 1000)
            warmup, fresh = fresh[:50], fresh[50:]
            for text in warmup:
                await kernel.gate.evaluate(request_for(text))

            single_texts, fresh = fresh[: args.single], fresh[args.single :]
            evaluation, end_to_end, embedding, outcomes = [], [], [], []
            with_conflicts = 0
            for text in single_texts:
                started = time.perf_counter()
                result = await kernel.gate.evaluate(request_for(text))
                # what the caller waits for (conflict resolutions follow in the background)
                end_to_end.append((time.perf_counter() - started) * 1000)
                assert result.timings is not None
                evaluation.append(result.timings.evaluation_ms)
                embedding.append(result.timings.embedding_ms)
                outcomes.append(result.outcome)
                advice = result.layer2_decision
                with_conflicts += bool(advice is not None and advice.conflicts)
            await kernel.events.settled()

            floor_texts, write_texts = fresh[: args.sustained], fresh[args.sustained :]
            queue = list(floor_texts)

            async def embed_worker() -> None:
                while queue:
                    await kernel.embeddings.embed_one(queue.pop())

            pgdata = server.pgdata
            cpu_before = cpu_seconds(pgdata)
            started = time.perf_counter()
            await asyncio.gather(*(embed_worker() for _ in range(args.writers)))
            floor = len(floor_texts) / (time.perf_counter() - started)
            floor_cpu = cpu_per_item(cpu_before, cpu_seconds(pgdata), len(floor_texts))

            pending = list(write_texts)
            decisions: list[GateDecision] = []

            async def write_worker() -> None:
                while pending:
                    result = await kernel.gate.evaluate(request_for(pending.pop()))
                    decisions.append(result.decision)

            cpu_before = cpu_seconds(pgdata)
            started = time.perf_counter()
            await asyncio.gather(*(write_worker() for _ in range(args.writers)))
            sustained = len(write_texts) / (time.perf_counter() - started)
            write_cpu = cpu_per_item(cpu_before, cpu_seconds(pgdata), len(write_texts))
            rss = rss_mb()
            verify_started = time.perf_counter()
            report = await kernel.audit.verify()
            verify_seconds = time.perf_counter() - verify_started
            stored = await kernel.db.fetchval("SELECT count(*) FROM memories")

    gate = percentiles(evaluation)
    e2e = percentiles(end_to_end)
    ratio = sustained / floor
    return {
        "benchmark": "gate",
        "parameters": {
            "records_seeded": args.records,
            "seed_vector_pool": args.pool,
            "single_writer_writes": args.single,
            "sustained_writes": args.sustained,
            "concurrent_writers": args.writers,
            "seed": args.seed,
            "embedding_workers": settings.embedding_workers,
            "embedding_threads": settings.embedding_threads,
            "embedding_batch_size": settings.embedding_batch_size,
            "embedding_spin": settings.embedding_spin,
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "text": "generated agent-memory text, 20-60 words (benchmarks/agent_text.py)",
        },
        "seeding": seeding,
        "gate_evaluation_ms": gate,
        "write_end_to_end_ms": e2e,
        "single_writer_writes_with_conflicts": with_conflicts,
        "embedding_in_write_ms": percentiles(embedding),
        "single_writer_outcomes": {
            outcome.value: sum(1 for o in outcomes if o is outcome) for outcome in WriteOutcome
        },
        "embedding_only_texts_per_second": round(floor, 1),
        "sustained_writes_per_second": round(sustained, 1),
        "sustained_vs_embedding_floor": round(ratio, 3),
        "cpu_ms_per_text_embedding_only": floor_cpu,
        "cpu_ms_per_write_sustained": write_cpu,
        "sustained_decisions": {d.value: sum(1 for x in decisions if x is d) for d in GateDecision},
        "rss_mb_process_and_workers": rss,
        "audit_verify": {
            "ok": report.ok,
            "rows": report.rows_checked,
            "seconds": round(verify_seconds, 2),
        },
        "stored_versions": stored,
        "targets": {
            "gate_p95_ms": 5.0,
            "end_to_end_p95_ms": 25.0,
            "sustained_vs_floor": 0.9,
        },
        "met": {
            "gate_p95": gate["p95"] <= 5.0,
            "end_to_end_p95": e2e["p95"] <= 25.0,
            "sustained_vs_floor": ratio >= 0.9,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="versions to seed")
    parser.add_argument("--pool", type=int, default=2_000, help="distinct seed embeddings")
    parser.add_argument("--single", type=int, default=400, help="single-writer writes")
    parser.add_argument("--sustained", type=int, default=800, help="writes per sustained phase")
    parser.add_argument("--writers", type=int, default=16, help="concurrent writers")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--ef-construction", type=int, default=64, help="HNSW build parameter (64 = schema's)"
    )
    args = parser.parse_args()
    args.pool = min(args.pool, args.records)
    report(measure(args))


if __name__ == "__main__":
    main()
