"""HTTP write benchmark: latency and throughput of ``POST /v1/memories`` against `engram serve`.

Prints one JSON object. Steps:

1. Start ``engram serve`` on a free loopback port with a fresh temporary data dir (embedded
   PostgreSQL, the offline model), wait for ``/readyz``, check that the first-serve bootstrap
   printed a token, and add a trusted agent for the benchmark with ``engram agents add`` (its
   write rate raised, so the Gate's rate limit does not pace the client).
2. Warm up with ``--warmup`` writes, then send ``--writes`` sequential CREATEs of generated
   agent-memory text (20-60 words, benchmarks/agent_text.py) over one keep-alive connection,
   timing each request from send to the parsed response.
3. Report p50/p95/p99 of the HTTP write, sequential throughput, the statuses seen, and the
   server's RSS (the server process and its children: the embedding workers and PostgreSQL).

Should a 429 still come, it is waited out (its Retry-After) and the wait is left out of the
latencies and of the throughput, which both describe answered writes.

    python -m benchmarks.http_write_bench [--writes 500]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil

from benchmarks.agent_text import texts
from benchmarks.stats import percentiles

TOKEN = re.compile(r"engram_[A-Za-z0-9_-]{43}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def server_rss_mb(pid: int) -> float:
    """RSS of the server and all its descendants, in MiB."""
    root = psutil.Process(pid)
    total = 0
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return round(total / 2**20, 1)


class Server:
    """`engram serve` in its own process group, its output collected by a thread."""

    def __init__(self, data_dir: Path, port: int) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
        env.update(
            ENGRAM_DATA_DIR=str(data_dir),
            ENGRAM_PORT=str(port),
            ENGRAM_LOG_FORMAT="json",
            ENGRAM_LOG_LEVEL="warning",
        )
        model = os.environ.get("ENGRAM_EMBEDDING_MODEL_PATH")
        if model:
            env["ENGRAM_EMBEDDING_MODEL_PATH"] = model
        self.env = env
        self.base = f"http://127.0.0.1:{port}"
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engram.protocols.cli", "serve"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.lines.append(raw.decode(errors="replace"))

    def wait_ready(self, timeout: float = 120.0) -> float:
        started = time.perf_counter()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("engram serve exited:\n" + "".join(self.lines))
            try:
                if httpx.get(f"{self.base}/readyz", timeout=2).status_code == 200:
                    return time.perf_counter() - started
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError("engram serve did not become ready:\n" + "".join(self.lines))

    def token(self) -> str:
        found = TOKEN.search("".join(self.lines))
        if found is None:
            raise RuntimeError("no first-agent token in the output:\n" + "".join(self.lines))
        return found.group(0)

    def add_agent(self, name: str) -> str:
        """Add a trusted agent with a high write rate through the CLI; return its token."""
        added = subprocess.run(  # noqa: S603 - our own CLI, beside the running server
            [
                *(sys.executable, "-m", "engram.protocols.cli", "agents", "add", name),
                *("--trust", "trusted", "--writes-per-minute", "100000", "--json"),
            ],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        token: str = json.loads(added.stdout)["token"]
        return token

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        self._reader.join(5)


def write(client: httpx.Client, text: str, waits: list[float]) -> tuple[httpx.Response, float]:
    """One CREATE; the response and its latency in ms. A 429 is waited out (the wait noted in
    ``waits``) and the write sent again; only the answered attempt is timed."""
    body = {"type": "belief", "content": text}
    while True:
        started = time.perf_counter()
        response = client.post("/v1/memories", json=body)
        response.json()
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 429:
            return response, elapsed
        wait = float(response.headers.get("retry-after", "1"))
        waits.append(wait)
        time.sleep(wait)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    corpus = texts(args.writes + args.warmup, seed=args.seed)
    warmup, measured = corpus[: args.warmup], corpus[args.warmup :]
    words = [len(text.split()) for text in measured]
    with tempfile.TemporaryDirectory(prefix="engram-http-bench-") as tmp:
        server = Server(Path(tmp) / "data", free_port())
        try:
            ready_seconds = server.wait_ready()
            server.token()  # the first-serve bootstrap printed one
            headers = {"Authorization": f"Bearer {server.add_agent('http-bench')}"}
            limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
            with httpx.Client(
                base_url=server.base, headers=headers, limits=limits, timeout=30
            ) as client:
                for text in warmup:
                    write(client, text, [])
                rss_before = server_rss_mb(server.process.pid)
                latencies: list[float] = []
                waits: list[float] = []
                statuses: Counter[int] = Counter()
                outcomes: Counter[str] = Counter()
                started = time.perf_counter()
                for text in measured:
                    response, elapsed = write(client, text, waits)
                    latencies.append(elapsed)
                    statuses[response.status_code] += 1
                    body = response.json()
                    outcomes[str(body.get("outcome") or body.get("type"))] += 1
                wall = time.perf_counter() - started
                rss_after = server_rss_mb(server.process.pid)
        finally:
            server.stop()
    return {
        "benchmark": "http_write",
        "parameters": {
            "writes": args.writes,
            "warmup_writes": args.warmup,
            "seed": args.seed,
            "text_words": {
                "min": min(words),
                "max": max(words),
                "mean": round(sum(words) / len(words), 1),
            },
            "text": "generated agent-memory text, 20-60 words (benchmarks/agent_text.py)",
            "client": "one keep-alive httpx connection, sequential requests",
            "memory_type": "belief",
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        },
        "server_ready_seconds": round(ready_seconds, 2),
        "http_write_ms": percentiles(latencies),
        "writes_per_second": round(len(latencies) / (wall - sum(waits)), 1),
        "wall_clock_writes_per_second": round(len(latencies) / wall, 1),
        "statuses": {str(code): n for code, n in sorted(statuses.items())},
        "outcomes": dict(sorted(outcomes.items())),
        "rate_limited": {"responses_429": len(waits), "seconds_waited": round(sum(waits), 1)},
        "server_rss_mb": {"after_warmup": rss_before, "after_writes": rss_after},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=500, help="measured sequential writes")
    parser.add_argument("--warmup", type=int, default=30, help="writes before measuring")
    parser.add_argument("--seed", type=int, default=23)
    args = parser.parse_args()
    if args.writes < 1:
        parser.error("--writes must be at least 1")
    print(json.dumps(measure(args), indent=2))


if __name__ == "__main__":
    main()
