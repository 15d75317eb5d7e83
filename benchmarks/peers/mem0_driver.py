"""Mem0's side of ``benchmarks.peer_mem0``; runs in Mem0's own virtual environment.

Mem0 is used as its documentation shows: ``Memory.from_config`` with the pgvector store and
the FastEmbed embedder, ``add(text, user_id=..., infer=False)`` (the text stored as given, no
LLM), ``update(memory_id, data)`` and ``search(query, filters={"user_id": ...}, top_k=10)``.
Three things are set for the comparison and nothing else: the embedder loads the same local
model directory engram uses (Mem0's FastEmbed embedder only takes a hub name, so the
``TextEmbedding`` it constructs is given the directory) with as many ONNX threads as
engram's model, and the store's pool may hold as many connections as there are concurrent
writers. The LLM is configured but never called
(``infer=False``); telemetry is off.

Concurrent writers are run both ways Mem0 offers, threads over ``Memory`` and tasks over
``AsyncMemory``, each on its own texts; the faster of the two is Mem0's figure.

A job's ``mode`` may ask for one part instead of the workload: ``load`` and ``search``
(``peer_mem0 --large``), or ``relevance`` (``benchmarks.peer_relevance``: the labelled
retrieval set stored with ``add`` and ``update``, each query answered by ``search`` with
its defaults but ``top_k=10``).
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from benchmarks.peers.workload import (
    Operations,
    concurrent_figures,
    emit,
    read_job,
    relevance,
    run,
    searches,
)
from benchmarks.stats import percentiles

USER = "bench-user"


def _local_model(job: dict[str, Any]) -> None:
    """Make Mem0's FastEmbed embedder load ``job["model_dir"]`` instead of a hub download."""
    fastembed = importlib.import_module("fastembed")
    description = importlib.import_module("fastembed.common.model_description")
    name = job["model_name"]
    known = {entry["model"] for entry in fastembed.TextEmbedding.list_supported_models()}
    if name not in known:
        fastembed.TextEmbedding.add_custom_model(
            model=name,
            pooling=description.PoolingType.MEAN,
            normalization=True,
            sources=description.ModelSource(hf=name),
            dim=job["dimension"],
            model_file="model.onnx",
        )
    original = fastembed.TextEmbedding

    def local(model_name: str, **kwargs: Any) -> Any:
        return original(
            model_name=model_name,
            specific_model_path=job["model_dir"],
            local_files_only=True,
            threads=job["threads"],
            **kwargs,
        )

    module: Any = importlib.import_module("mem0.embeddings.fastembed")
    module.TextEmbedding = local


def _config(job: dict[str, Any], history: str) -> dict[str, Any]:
    return {
        "vector_store": {
            "provider": "pgvector",
            "config": {
                "connection_string": job["database_url"],
                "collection_name": "memories",
                "embedding_model_dims": job["dimension"],
                "hnsw": True,
                "maxconn": max(5, job["writers"]),
            },
        },
        "embedder": {
            "provider": "fastembed",
            "config": {"model": job["model_name"], "embedding_dims": job["dimension"]},
        },
        "llm": {"provider": "openai", "config": {"api_key": "not-used-infer-is-false"}},
        "history_db_path": history,
    }


def _new_id(result: Any) -> str:
    return str(result["results"][0]["id"])


async def _main() -> None:
    job = read_job()
    os.environ["MEM0_TELEMETRY"] = "False"
    _local_model(job)
    mem0 = importlib.import_module("mem0")
    with tempfile.TemporaryDirectory(prefix="mem0-peer-") as tmp:
        memory = mem0.Memory.from_config(_config(job, os.path.join(tmp, "history.db")))
        if job.get("mode") == "load":
            emit(_load(memory, job))
            return
        if job.get("mode") == "search":
            emit(await searches(job, lambda query: _search(memory, query)))
            return

        async def add(text: str) -> str:
            return _new_id(memory.add(text, user_id=USER, infer=False))

        async def update(record_id: str, text: str) -> None:
            memory.update(record_id, data=text)

        async def search(query: str) -> int:
            return await _search(memory, query)

        async def ranked(query: str) -> list[str]:
            found = memory.search(query, filters={"user_id": USER}, top_k=10)["results"]
            return [str(hit["id"]) for hit in found]

        if job.get("mode") == "relevance":
            emit(await relevance(job, add, update, ranked))
            return

        async def concurrent_adds(texts: Sequence[str], writers: int) -> dict[str, Any]:
            threads = _with_threads(memory, texts, writers)
            tasks = await _with_tasks(mem0, job, tmp, job["concurrent_texts_alt"], writers)
            best = max((threads, tasks), key=lambda figures: figures["per_second"])
            return {**best, "threads": threads, "async_memory": tasks}

        result = await run(job, Operations(add, update, search, concurrent_adds))
        result["model_alone"] = _model_alone(memory, job)
        emit(result)


def _model_alone(memory: Any, job: dict[str, Any]) -> dict[str, Any]:
    """The floor Mem0's own embedding call sets in this process: one text at a time through
    the embedder ``add`` uses, on the texts engram's driver times the same way."""
    latencies = []
    for text in job["texts"][:200]:
        started = time.perf_counter()
        memory.embedding_model.embed(text, "add")
        latencies.append((time.perf_counter() - started) * 1000)
    return {"single_ms": percentiles(latencies)}


async def _search(memory: Any, query: str) -> int:
    return len(memory.search(query, filters={"user_id": USER}, top_k=10)["results"])


def _load(memory: Any, job: dict[str, Any]) -> dict[str, Any]:
    """Store the large corpus through Mem0's own vector store, with the payload ``add``
    writes (its history rows left out: searches never read them)."""
    numpy = importlib.import_module("numpy")
    with open(job["texts_path"], encoding="utf-8") as handle:
        texts: list[str] = json.load(handle)
    vectors = numpy.load(job["vectors_path"])
    started = time.perf_counter()
    now = datetime.now(UTC).isoformat()
    for start in range(0, len(texts), 1000):
        batch = range(start, min(start + 1000, len(texts)))
        payloads = [
            {
                "data": texts[i],
                "hash": hashlib.md5(texts[i].encode()).hexdigest(),  # noqa: S324 - as Mem0 does
                "created_at": now,
                "updated_at": now,
                "text_lemmatized": texts[i],  # what Mem0 stores when spaCy is not installed
                "user_id": USER,
                "role": "user",
            }
            for i in batch
        ]
        memory.vector_store.insert(
            vectors=[vectors[i].tolist() for i in batch],
            ids=[str(uuid.uuid4()) for _ in batch],
            payloads=payloads,
        )
    return {"loaded": len(texts), "seconds": round(time.perf_counter() - started, 1)}


def _with_threads(memory: Any, texts: Sequence[str], writers: int) -> dict[str, Any]:
    def one(text: str) -> float:
        started = time.perf_counter()
        memory.add(text, user_id=USER, infer=False)
        return (time.perf_counter() - started) * 1000

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=writers) as pool:
        latencies = list(pool.map(one, texts))
    return {
        **concurrent_figures(latencies, time.perf_counter() - started, writers),
        "mode": "threads",
    }


async def _with_tasks(
    mem0: Any, job: dict[str, Any], tmp: str, texts: Sequence[str], writers: int
) -> dict[str, Any]:
    memory = mem0.AsyncMemory.from_config(_config(job, os.path.join(tmp, "history.db")))
    await memory.add(texts[0], user_id=USER, infer=False)  # its pool and embedder warm up
    queue = list(texts[1:])
    latencies: list[float] = []

    async def writer() -> None:
        while queue:
            text = queue.pop()
            started = time.perf_counter()
            await memory.add(text, user_id=USER, infer=False)
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(writers)))
    figures = concurrent_figures(latencies, time.perf_counter() - started, writers)
    return {**figures, "mode": "async_memory"}


if __name__ == "__main__":
    asyncio.run(_main())
