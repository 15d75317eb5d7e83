"""`engram serve` and the CLI as a user runs them: a real process, real HTTP, Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from engram.infra import migrate
from tests.conftest import METRICS_TOKEN

ENGRAM = [sys.executable, "-m", "engram.protocols.cli"]
#: The headers of a scrape with the metrics token every server started here has.
SCRAPER = {"Authorization": f"Bearer {METRICS_TOKEN}"}
TEN_METRICS = [
    "engram_gate_decisions_total",
    "engram_gate_evaluation_seconds",
    "engram_write_seconds",
    "engram_memory_records",
    "engram_version_chain_depth",
    "engram_pii_flags_total",
    "engram_consolidation_duration_seconds",
    "engram_conflicts_detected_total",
    "engram_decay_score",
    "engram_gate_layer1_failures_total",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _env(data_dir: Path, model_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(
        ENGRAM_DATA_DIR=str(data_dir),
        ENGRAM_EMBEDDING_MODEL_PATH=str(model_dir),
        ENGRAM_LOG_FORMAT="json",
        ENGRAM_METRICS_TOKEN=METRICS_TOKEN,
        **extra,
    )
    return env


def _postgres_for(pgdata: Path) -> list[psutil.Process]:
    return [
        p
        for p in psutil.process_iter(["name", "cmdline"])
        if p.info["name"] == "postgres"
        and str(pgdata.resolve()) in " ".join(p.info["cmdline"] or [])
    ]


@pytest.fixture
def served(tmp_path: Path, model_dir: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """`engram serve` on a free loopback port with a fresh data dir, until ready."""
    port = _free_port()
    data_dir = tmp_path / "engram-data"
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        [*ENGRAM, "serve"],
        env=_env(data_dir, model_dir, ENGRAM_PORT=str(port)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as a shell gives a foreground job
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.1)
    try:
        yield process, base, data_dir
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


@pytest.mark.slow
def test_serve_is_ready_exports_metrics_and_stops_cleanly_on_ctrl_c(
    served: tuple[subprocess.Popen[bytes], str, Path],
) -> None:
    """readyz=200 with its checks, the ten metrics for the metrics token (401 without it), then
    Ctrl-C ends everything in 5 s."""
    process, base, data_dir = served
    ready = httpx.get(f"{base}/readyz", timeout=5)
    assert 200 == ready.status_code, ready.text
    assert {
        "database",
        "migrations",
        "embedding_model",
        "gate",
        "audit_log",
        "consolidation_backlog",
    } == set(ready.json()["checks"])
    assert {"status": "ok"} == httpx.get(f"{base}/healthz", timeout=5).json()
    assert 401 == httpx.get(f"{base}/metrics", timeout=5).status_code
    metrics = httpx.get(f"{base}/metrics", headers=SCRAPER, timeout=5)
    assert metrics.headers["content-type"].startswith("text/plain")
    for name in TEN_METRICS:
        assert f"# TYPE {name.removesuffix('_total')}" in metrics.text, name

    children = psutil.Process(process.pid).children(recursive=True)
    assert _postgres_for(data_dir / "pg")
    started = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    output, _ = process.communicate(timeout=10)
    elapsed = time.monotonic() - started
    assert 0 == process.returncode, output.decode()
    assert elapsed < 5, f"shutdown took {elapsed:.1f} s"
    assert [] == _postgres_for(data_dir / "pg")
    assert [] == [child for child in children if child.is_running() and child.status() != "zombie"]
    assert b"Traceback" not in output


def test_migrate_command_brings_the_embedded_database_to_head(
    tmp_path: Path, model_dir: Path
) -> None:
    """`engram migrate` refuses a data dir that holds no database (a typo must not make a
    new one); with --init it creates it, prints the head revision and leaves no server."""
    data_dir = tmp_path / "fresh"
    refused = subprocess.run(  # noqa: S603
        [*ENGRAM, "migrate"],
        env=_env(data_dir, model_dir),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert 2 == refused.returncode
    assert f"{data_dir} does not exist" in refused.stderr.decode()
    assert not data_dir.exists()
    done = subprocess.run(  # noqa: S603
        [*ENGRAM, "--init", "migrate"],
        env=_env(data_dir, model_dir),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert 0 == done.returncode, done.stderr.decode()
    assert 0o700 == data_dir.stat().st_mode & 0o777
    assert f"schema at revision {migrate.head_revision()}" in done.stdout.decode()
    assert [] == _postgres_for(data_dir / "pg")


def test_invalid_configuration_is_a_clear_usage_error(tmp_path: Path, model_dir: Path) -> None:
    """A bad ENGRAM_PORT exits with status 2 and names the problem, without a traceback."""
    done = subprocess.run(  # noqa: S603
        [*ENGRAM, "serve"],
        env=_env(tmp_path, model_dir, ENGRAM_PORT="not-a-port"),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert 2 == done.returncode
    assert "invalid configuration" in done.stderr.decode()
    assert "port" in done.stderr.decode()
    assert "Traceback" not in done.stderr.decode()
