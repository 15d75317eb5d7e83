"""Run each benchmark once at a tiny size and check that it printed one JSON object.

The figures mean nothing at these sizes; the run only proves that every script still works
(CI runs it through ``make bench-smoke``). Prints one line per benchmark with its wall time and
exits non-zero if any failed. ``--jobs`` benchmarks run at once (default 2: each is mostly
start-up, and CI's time is bounded).

    python -m benchmarks.smoke [--jobs N] [NAME ...]   # default: every benchmark
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

TINY: dict[str, list[str]] = {
    "cold_start": ["--runs", "1"],
    "cli_startup": ["--runs", "1"],
    "recall_floor_eval": ["--half", "dev"],
    "retrieval_eval": ["--half", "dev", "--limit-queries", "5", "--limit-memories", "60"],
    "relevance_calibration": ["--half", "dev", "--limit-queries", "5", "--limit-memories", "60"],
    "pii_eval": ["--repeat", "1"],
    "conflict_eval": [],
    "conflict_stream": ["--file", "tests/data/consolidation/dev_c2.jsonl"],
    "advisor_eval": ["--half", "dev"],
    "advisor_rl": [
        *("--decisions", "500", "--proposals", "20", "--train-lives", "1"),
        *("--eval-lives", "1", "--writes", "40", "--questions", "10"),
    ],
    "gate_bench": [
        *("--records", "200", "--pool", "32", "--single", "5"),
        *("--sustained", "5", "--writers", "2"),
    ],
    "write_cpu_budget": ["--records", "200", "--texts", "8"],
    "temporal_bench": ["--records", "200", "--versions", "2", "--chains", "2", "--queries", "5"],
    "search_bench": ["--records", "200", "--pool", "32", "--queries", "4"],
    "http_write_bench": ["--writes", "3", "--warmup", "1"],
    "consolidation_eval": ["--file", "tests/data/consolidation/dev_c2.jsonl"],
    "consolidation_bench": ["--records", "300", "--second", "60", "--probe", "10"],
    "scheduler_bench": [
        *("--workers", "2", "--records", "40", "--idle-seconds", "2", "--triggers", "1"),
        *("--probe", "5", "--busy-warmup", "1", "--poll-seconds", "0.5", "--watch-seconds", "1"),
        *("--start-seconds", "2"),
    ],
    "audit_append_bench": [
        *("--appends", "20", "--writers", "2", "--every", "10"),
        *("--rounds", "1", "--seal-every", "5"),
    ],
}


def run(name: str) -> str | None:
    """Run one benchmark at its tiny size; the problem, or None when it printed one object."""
    command = [sys.executable, "-m", f"benchmarks.{name}", *TINY[name]]
    done = subprocess.run(  # noqa: S603 - our own scripts
        command, capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0:
        return f"exit code {done.returncode}:\n{done.stderr[-4000:]}"
    try:
        printed = json.loads(done.stdout)
    except json.JSONDecodeError as error:
        return f"stdout is not one JSON object ({error}):\n{done.stdout[-2000:]}"
    if not isinstance(printed, dict) or not printed:
        return f"printed {type(printed).__name__}, not a non-empty JSON object"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME")
    parser.add_argument("--jobs", type=int, default=2, help="benchmarks run at once")
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(TINY))
    if unknown:
        parser.error(f"unknown benchmarks: {', '.join(unknown)}")
    failed: list[str] = []
    started = time.perf_counter()

    def timed(name: str) -> tuple[str, str | None, float]:
        step = time.perf_counter()
        problem = run(name)
        return name, problem, time.perf_counter() - step

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for name, problem, seconds in pool.map(timed, args.names or list(TINY)):
            status = "ok" if problem is None else "FAILED"
            print(f"{name:20} {status:6} {seconds:6.1f} s", flush=True)
            if problem is not None:
                print(problem, flush=True)
                failed.append(name)
    print(f"{'total':20} {'':6} {time.perf_counter() - started:6.1f} s")
    if failed:
        raise SystemExit(f"benchmarks failed at a tiny size: {', '.join(failed)}")


if __name__ == "__main__":
    main()
