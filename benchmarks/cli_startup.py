"""CLI start-up: seconds each admin command takes end to end, as an operator runs it.

Prints one JSON object. Each command runs as a real subprocess (`python -m
engram.protocols.cli …`) against a data dir holding one agent; ``--runs`` rounds, commands in
turn within a round, median per command. ``third_party_import_floor_s`` is a process that
only imports the libraries every command needs (typer, rich, structlog, pydantic, asyncpg,
psutil): no command can be faster. Two situations: the embedded PostgreSQL stopped
(each command starts and stops it) and already running beside the command (as next to
`engram serve`; here held by a long-lived kernel).

``--src DIR`` runs the commands from another checkout's ``src`` (e.g. a worktree of an older
commit), so before/after figures come from one run on one machine:

    python -m benchmarks.cli_startup [--runs 3] [--src /tmp/old/src]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

COMMANDS: dict[str, list[str]] = {
    "agents list": ["agents", "list", "--json"],
    "conflicts list": ["conflicts", "list", "--json"],
    "quarantine list": ["quarantine", "list", "--json"],
    "audit verify": ["audit", "verify", "--json"],
    "jobs list": ["jobs", "list", "--json"],
    "advisor status": ["advisor", "status", "--json"],
    "--version": ["--version"],
}
#: What any command imports before engram's own code runs: the floor a command cannot beat.
THIRD_PARTY = (
    "import asyncio, typer, rich.console, rich.table, structlog, pydantic, "
    "pydantic_settings, asyncpg, psutil"
)
HOLD = """
import asyncio, sys
from engram import open_kernel

async def main() -> None:
    async with open_kernel():
        print("held", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

if __name__ == "__main__":
    asyncio.run(main())
"""


def _env(data_dir: Path, src: Path | None, *, bytecode: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    if bytecode:  # as on a usual machine: imports read cached bytecode after the first run
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["ENGRAM_DATA_DIR"] = str(data_dir)
    env["ENGRAM_LOG_LEVEL"] = "warning"
    if src is not None:
        env["PYTHONPATH"] = str(src)
    return env


def _cli(args: list[str], env: dict[str, str]) -> tuple[float, int]:
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "engram.protocols.cli", *args],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    return time.perf_counter() - started, done.returncode


def _prepare(data_dir: Path, env: dict[str, str]) -> None:
    """A database with one agent; ``--init`` where the CLI knows it (older ones create the
    database on any command)."""
    add = ["agents", "add", "bench", "--trust", "standard", "--json"]
    _, code = _cli(["--init", *add], env)
    if code == 2:  # an older CLI without --init
        _, code = _cli(add, env)
    if code != 0:
        raise SystemExit(f"could not prepare {data_dir} (exit {code})")


def _round(env: dict[str, str], runs: int) -> dict[str, Any]:
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    failed: dict[str, int] = {}
    for _ in range(runs):
        for name, args in COMMANDS.items():
            seconds, code = _cli(args, env)
            times[name].append(seconds)
            if code != 0:
                failed[name] = code
    return {
        "median_s": {name: round(statistics.median(v), 3) for name, v in times.items()},
        "max_s": {name: round(max(v), 3) for name, v in times.items()},
        "failed": failed,
    }


def floor(runs: int, *, bytecode: bool) -> float:
    """Median seconds of a process that imports only :data:`THIRD_PARTY` and exits."""
    env = _env(Path(tempfile.gettempdir()), None, bytecode=bytecode)
    times = []
    for _ in range(runs + 1):  # the first may write bytecode
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", THIRD_PARTY], env=env, check=True)  # noqa: S603
        times.append(time.perf_counter() - started)
    return round(statistics.median(times[1:]), 3)


def measure(runs: int, src: Path | None, *, bytecode: bool) -> dict[str, Any]:
    """The figures of one code version: server stopped, then server running."""
    with tempfile.TemporaryDirectory(prefix="engram-cli-") as tmp:
        data_dir = Path(tmp) / "data"
        env = _env(data_dir, src, bytecode=bytecode)
        _prepare(data_dir, env)  # also the run that writes the bytecode, when it is written
        stopped = _round(env, runs)
        holder = subprocess.Popen(  # noqa: S603 - a kernel holding the embedded server
            [sys.executable, "-c", HOLD],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert holder.stdout is not None
            # the library logs to stdout until told otherwise: wait for the marker line
            if not any(line.strip() == "held" for line in holder.stdout):
                raise SystemExit("the holding kernel did not start")
            running = _round(env, runs)
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(timeout=60)
    return {"server_stopped": stopped, "server_running": running}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--src", type=Path, default=None, help="another checkout's src/")
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="never cache bytecode (PYTHONDONTWRITEBYTECODE=1): every run compiles the sources",
    )
    args = parser.parse_args()
    bytecode = not args.no_bytecode
    result: dict[str, Any] = {
        "benchmark": "cli_startup",
        "parameters": {"runs": args.runs, "commands": list(COMMANDS), "bytecode": bytecode},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "third_party_import_floor_s": floor(args.runs, bytecode=bytecode),
        "this": measure(args.runs, None, bytecode=bytecode),
    }
    if args.src is not None:
        result["other"] = {"src": str(args.src), **measure(args.runs, args.src, bytecode=bytecode)}
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
