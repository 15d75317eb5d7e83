"""Cold start: seconds from `engram serve` to /readyz = 200, on a fresh and an existing data dir.

Prints one JSON object. Each run starts the real CLI as a subprocess on a free loopback port,
polls /readyz every 20 ms, reads the kernel's own startup timings from its JSON log line
``kernel.opened``, samples RSS at readiness, then stops it with SIGINT.

    python -m benchmarks.cold_start [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

ENGRAM = [sys.executable, "-m", "engram.protocols.cli", "serve"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _rss_mb(process: psutil.Process) -> tuple[float, float]:
    """RSS of the server process alone, and with its children (model workers, postgres)."""
    own = process.memory_info().rss
    total = own
    for child in process.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return own / 2**20, total / 2**20


def _postgres_uss_mb(pgdata: Path) -> float:
    """Unique memory of the postmaster and its backends (shared buffers counted once, not per
    process as RSS would)."""
    for proc in psutil.process_iter(["name", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if proc.info["name"] == "postgres" and str(pgdata.resolve()) in cmdline:
            family = [proc, *proc.children(recursive=True)]
            return sum(p.memory_full_info().uss for p in family) / 2**20
    return 0.0


def one_run(data_dir: Path) -> dict[str, Any]:
    """Start the server on ``data_dir``, time readiness, stop it; return the figures."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(ENGRAM_DATA_DIR=str(data_dir), ENGRAM_PORT=str(port), ENGRAM_LOG_FORMAT="json")
    started = time.perf_counter()
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        ENGRAM, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}/readyz"
    ready_s = None
    with httpx.Client(timeout=2) as client:
        while time.perf_counter() - started < 120 and process.poll() is None:
            try:
                if client.get(url).status_code == 200:
                    ready_s = time.perf_counter() - started
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.02)
    if ready_s is None:
        process.kill()
        output = process.communicate()[0].decode(errors="replace")
        raise SystemExit(f"server never became ready:\n{output}")
    own_mb, tree_mb = _rss_mb(psutil.Process(process.pid))
    pg_mb = _postgres_uss_mb(data_dir / "pg")
    stop_started = time.perf_counter()
    os.killpg(process.pid, signal.SIGINT)
    output = process.communicate(timeout=30)[0].decode(errors="replace")
    stop_s = time.perf_counter() - stop_started
    opened = next(
        json.loads(line)
        for line in output.splitlines()
        if line.startswith("{") and '"kernel.opened"' in line
    )
    return {
        "ready_seconds": round(ready_s, 3),
        "stop_seconds": round(stop_s, 3),
        "kernel_startup_ms": opened["startup_ms"],
        "embedded_server_ms": opened["embedded_server_ms"],
        "migration_seconds": round(opened["migrations_ms"] / 1000, 3),
        "first_embedding_ms": opened["first_embedding_ms"],
        "rss_mb_server": round(own_mb, 1),
        "rss_mb_server_and_workers": round(tree_mb, 1),
        "uss_mb_postgres": round(pg_mb, 1),
        "exit_code": process.returncode,
    }


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ready = [run["ready_seconds"] for run in runs]
    return {
        "ready_seconds_p50": round(statistics.median(ready), 3),
        "ready_seconds_max": max(ready),
        "migration_seconds_p50": round(statistics.median(r["migration_seconds"] for r in runs), 3),
        "first_embedding_ms_p50": statistics.median(r["first_embedding_ms"] for r in runs),
        "rss_mb_server_and_workers_p50": statistics.median(
            r["rss_mb_server_and_workers"] for r in runs
        ),
        "uss_mb_postgres_p50": statistics.median(r["uss_mb_postgres"] for r in runs),
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per scenario")
    args = parser.parse_args()
    fresh_runs, existing_runs = [], []
    with tempfile.TemporaryDirectory(prefix="engram-cold-") as tmp:
        for index in range(args.runs):
            data_dir = Path(tmp) / f"fresh-{index}"
            fresh_runs.append(one_run(data_dir))
            existing_runs.append(one_run(data_dir))
    fresh, existing = _summary(fresh_runs), _summary(existing_runs)
    print(
        json.dumps(
            {
                "benchmark": "cold_start",
                "parameters": {
                    "runs_per_scenario": args.runs,
                    "poll_interval_ms": 20,
                    "cpu_count": os.cpu_count(),
                    "python": platform.python_version(),
                    "fresh": "new data dir: initdb, migrations, model assembly, model load",
                    "existing": "same data dir again: server restart, no migrations to apply",
                },
                "targets": {"existing_ready_seconds": 5.0, "fresh_ready_seconds": 15.0},
                "fresh": fresh,
                "existing": existing,
                "met": {
                    "existing": existing["ready_seconds_max"] <= 5.0,
                    "fresh": fresh["ready_seconds_max"] <= 15.0,
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
