"""The peer comparisons' pure parts (peer_mem0.py, peer_relevance.py, peers/workload.py)."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from benchmarks import stats
from benchmarks.peer_mem0 import (
    FIGURES,
    goals,
    job_for,
    largest_search_ratio,
    medians,
    peer_requirements,
)
from benchmarks.peer_relevance import goals as relevance_goals
from benchmarks.peers import workload
from benchmarks.peers.workload import tree_rss_mb
from benchmarks.stats import percentiles


def _result(single_p50: float, per_second: float) -> dict[str, object]:
    ms = {"p50": single_p50, "p95": single_p50 * 2}
    return {
        "single": {"ms": ms, "per_second": per_second},
        "update": {"ms": ms},
        "search": {"ms": ms},
        "concurrent": {"ms": ms, "per_second": per_second * 2},
        "rss_mb": 100.0,
    }


def test_medians_are_taken_per_figure_over_the_rounds() -> None:
    """Each figure's median comes from its own values, not from one round's."""
    rounds = [_result(10, 50), _result(30, 40), _result(20, 60)]
    figures = medians(rounds)
    assert set(FIGURES) == set(figures)
    assert 20 == figures["single_p50_ms"]
    assert 50 == figures["single_per_second"]
    assert 100 == figures["concurrent_per_second"]


def test_goals_compare_latency_down_and_throughput_up() -> None:
    """Lower latency and higher throughput meet a goal; concurrency needs twice the peer's."""
    slow, fast = medians([_result(30, 40)]), medians([_result(10, 90)])
    met = goals(fast, slow)
    assert met["single_p50<=mem0"]
    assert met["single_throughput>=mem0"]
    assert met["concurrent_throughput>=2x_mem0"]
    missed = goals(slow, fast)
    assert not missed["single_p50<=mem0"]
    assert not missed["concurrent_throughput>=2x_mem0"]
    assert not goals(medians([_result(10, 60)]), medians([_result(10, 40)]))[
        "concurrent_throughput>=2x_mem0"
    ]


def test_the_job_gives_each_phase_its_own_texts(tmp_path: Path) -> None:
    """No text is written twice across phases, so neither system sees an exact duplicate
    the other did not; queries are the opening words of texts never stored."""
    args = argparse.Namespace(
        warmup=3,
        texts=20,
        updates=5,
        queries=4,
        concurrent=8,
        writers=4,
        seed=1,
        engram_setting=["embedding_workers=0"],
    )
    job = job_for(args, tmp_path)
    phases = ("warmup_texts", "texts", "update_texts", "concurrent_texts", "concurrent_texts_alt")
    written = [text for phase in phases for text in job[phase]]
    assert len(written) == len(set(written)) == 3 + 20 + 5 + 8 + 8
    assert 4 == len(job["queries"])
    assert all(len(q.split()) <= 8 for q in job["queries"])
    assert {"embedding_workers": "0"} == job["engram_settings"]


def test_the_peer_gets_the_embedding_code_engram_runs() -> None:
    """Mem0's environment is pinned to engram's fastembed and ONNX Runtime versions."""
    wanted = peer_requirements()
    assert "mem0ai==2.2.1" in wanted
    for name in ("fastembed", "onnxruntime"):
        assert f"{name}=={metadata.version(name)}" in wanted


def test_resident_memory_counts_child_processes() -> None:
    """A child holding memory raises the tree's figure (the model workers are children)."""
    alone = tree_rss_mb()
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; b = b'x' * (100 << 20); time.sleep(30)"],
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and tree_rss_mb() < alone + 80:
            time.sleep(0.1)
        assert tree_rss_mb() >= alone + 80
    finally:
        child.kill()
        child.wait()


def test_percentiles_take_the_value_at_q_times_n() -> None:
    """The quantile q of n sorted values is the one at index int(q * n): p50 of 1..100 is 51,
    p99 is 100; n is counted (the drivers report latencies this way)."""
    figures = percentiles([float(v) for v in range(100, 0, -1)])
    assert (51.0, 96.0, 100.0, 100) == (
        figures["p50"],
        figures["p95"],
        figures["p99"],
        figures["n"],
    )


def _top_level_imports(module: object) -> set[str]:
    source = Path(str(getattr(module, "__file__", ""))).read_text(encoding="utf-8")
    imported: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module)
    return imported


def test_the_shared_workload_needs_only_the_standard_library() -> None:
    """Mem0's driver imports the workload in Mem0's own environment, where neither engram
    nor its dependencies are installed: the workload and the one module of ours it uses
    import nothing but the standard library."""
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    ours = _top_level_imports(workload)
    assert "benchmarks.stats" in ours, "the check reads the wrong file"
    outside = {name for name in ours - {"benchmarks.stats"} if name.split(".")[0] not in allowed}
    assert set() == outside
    assert set() == {n for n in _top_level_imports(stats) if n.split(".")[0] not in allowed}


async def test_the_relevance_workload_names_each_records_current_memory(tmp_path: Path) -> None:
    """The peer stores the labelled set; an update moves its record to the newer memory, so a
    hit on it counts as the newer key, and the older key is no head."""
    memories = tmp_path / "memories.jsonl"
    memories.write_text(
        '{"key": "m1", "content": "the pool has four nodes"}\n'
        '{"key": "m2", "content": "backups run nightly"}\n'
        '{"key": "m3", "content": "the pool has six nodes", "replaces": "m1"}\n'
    )
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"id": "q1", "query": "pool size"}\n')
    texts: dict[str, str] = {}

    async def add(text: str) -> str:
        texts[f"id{len(texts)}"] = text
        return f"id{len(texts) - 1}"

    async def update(record_id: str, text: str) -> None:
        texts[record_id] = text

    async def ranked(query: str) -> list[str]:
        return ["id0", "id1", "unknown"]

    job = {"memories_path": str(memories), "queries_path": str(queries)}
    result = await workload.relevance(job, add, update, ranked)
    assert {"q1": ["m3", "m2", None]} == result["ranked"]
    assert ["m2", "m3"] == result["heads"]
    assert "the pool has six nodes" == texts["id0"]
    assert 1 == result["search_ms"]["n"]


def test_relevance_goals_ask_five_percent_over_both_and_recall_at_5_not_lower() -> None:
    """The relevance goals: MRR@10 and recall@1 at least 1.05x vector search and Mem0,
    recall@5 not below either."""
    base = {"mrr@10": 0.70, "recall@1": 0.60, "recall@5": 0.90}
    better = {"mrr@10": 0.74, "recall@1": 0.63, "recall@5": 0.90}
    found = relevance_goals(better, base, base)
    assert found["mrr@10>=1.05x_vector"]
    assert found["recall@1>=1.05x_mem0"]
    assert found["recall@5>=mem0"]
    short = relevance_goals({**better, "mrr@10": 0.73, "recall@5": 0.89}, base, base)
    assert not short["mrr@10>=1.05x_vector"]
    assert not short["recall@5>=vector"]


def test_a_search_is_at_most_as_many_times_faster_as_the_query_embedding_allows() -> None:
    """Mem0 at 59.5 ms with a 22.2 ms embedding of the query: engram cannot be more than 2.68
    times faster, however cheap the rest of its search."""
    assert 2.68 == largest_search_ratio(59.5, 22.2)
    assert 27.3 == largest_search_ratio(606.0, 22.2)
    assert float("inf") == largest_search_ratio(10.0, 0.0)
