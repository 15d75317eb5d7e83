"""The processes of the operations tests: `engram serve` on a fresh embedded data dir (with
a metrics token), and a Prometheus scraping it every second with the shipped alert rules and
the shipped scrape job, which presents that token from a file.

engram is started twice on the same data dir. The first run records every job as seen with
the nightly deep consolidation due about twelve hours ago; the second puts that hour this
hour, so its scheduler finds a nightly run missed and catches it up at once (as after an
outage), and the deep consolidation's series exist within the test's minute.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.conftest import METRICS_TOKEN
from tests.e2e.conftest import TOKEN, Served, close, start_serve
from tests.e2e.test_serve import ENGRAM, _env, _free_port
from tests.ops.queries import ALERTS, DEPLOY

#: The shipped Prometheus configuration, whose engram scrape job the tests' Prometheus runs.
PROMETHEUS_CONFIG = DEPLOY / "prometheus.yml"

#: The limited agent's write rate: one a minute, a burst of one, so its second write is refused.
LIMITED = ("--writes-per-minute", "1")


@dataclass
class Stack:
    """The running processes and what the workload needs to talk to them."""

    engram: Served
    prometheus: Prometheus
    token: str
    limited_token: str
    started: float  # time.monotonic() when the stack began starting


class Prometheus:
    """A Prometheus server process and its HTTP API."""

    def __init__(self, process: subprocess.Popen[bytes], base: str, log: Path) -> None:
        self.process = process
        self.base = base
        self.log = log
        self._client = httpx.Client(base_url=base, timeout=10)

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The result of an instant query now (a vector's elements, or one scalar)."""
        answer = self._client.get("/api/v1/query", params={"query": expr}).json()
        if answer.get("status") != "success":
            raise AssertionError(f"{expr!r}: {answer.get('errorType')}: {answer.get('error')}")
        data = answer["data"]
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def rules(self) -> list[dict[str, Any]]:
        """Every rule Prometheus loaded, with its health and last evaluation."""
        groups = self._client.get("/api/v1/rules").json()["data"]["groups"]
        return [rule for group in groups for rule in group["rules"]]

    def version(self) -> str:
        """The server's version."""
        build = self._client.get("/api/v1/status/buildinfo").json()
        return str(build["data"]["version"])

    def close(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL if it lingers)."""
        self._client.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def _serve_env(data_dir: Path, model_dir: Path, deep_hour: int) -> dict[str, str]:
    """engram's environment: jobs due every few seconds, the nightly pass at ``deep_hour``."""
    return _env(
        data_dir,
        model_dir,
        ENGRAM_PORT=str(_free_port()),
        ENGRAM_CONSOLIDATION_HOUR=str(deep_hour),
        ENGRAM_SCHEDULER_POLL_SECONDS="0.5",
        ENGRAM_DECAY_REFRESH_MINUTES="0.05",
        ENGRAM_REEMBED_MINUTES="0.05",
        ENGRAM_CONSOLIDATION_WATCH_SECONDS="2",
    )


def _ready(server: Served) -> Served:
    """``server``, once it answers /readyz with 200; otherwise an error with its output."""
    alive = server.process.poll() is None
    if not alive or httpx.get(f"{server.base}/readyz", timeout=5).status_code != 200:
        output = server.output()
        close(server)
        raise RuntimeError(f"engram serve did not become ready:\n{output[-4000:]}")
    return server


def _add_limited_agent(env: dict[str, str]) -> str:
    """The token of a new agent allowed one write a minute (`engram agents add`)."""
    added = subprocess.run(  # noqa: S603 - our own CLI
        [*ENGRAM, "agents", "add", "ops-limited", *("--trust", "standard"), *LIMITED, "--json"],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    if added.returncode != 0:
        raise RuntimeError(f"engram agents add failed: {added.stderr.decode()}")
    token: str = json.loads(added.stdout)["token"]
    return token


def _scrape_job(engram_base: str, tmp: Path) -> dict[str, Any]:
    """The shipped scrape job (deploy/prometheus.yml), its token file and its target moved
    here: Prometheus presents the metrics token as the shipped configuration makes it."""
    shipped = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    job: dict[str, Any] = next(
        config for config in shipped["scrape_configs"] if config["job_name"] == "engram"
    )
    authorization = job["authorization"]
    (tmp / authorization["credentials_file"]).write_text(METRICS_TOKEN + "\n")
    return {**job, "static_configs": [{"targets": [engram_base.removeprefix("http://")]}]}


def _start_prometheus(tmp: Path, engram_base: str) -> Prometheus:
    """Prometheus on a free loopback port, scraping ``engram_base`` every second."""
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [_scrape_job(engram_base, tmp)],
    }
    path = tmp / "prometheus.yml"
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    base = f"http://127.0.0.1:{_free_port()}"
    log = tmp / "prometheus.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(  # noqa: S603 - the installed prometheus binary
            [
                shutil.which("prometheus") or "prometheus",
                f"--config.file={path}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address={base.removeprefix('http://')}",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    prometheus = Prometheus(process, base, log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        with suppress(httpx.TransportError):
            if httpx.get(f"{base}/-/ready", timeout=2).status_code == 200:
                return prometheus
        time.sleep(0.1)
    prometheus.close()
    raise RuntimeError(f"prometheus did not become ready:\n{log.read_text()[-4000:]}")


@contextmanager
def open_stack(tmp: Path, model_dir: Path) -> Iterator[Stack]:
    """Start engram (twice, see the module docstring) and Prometheus; stop both on exit."""
    started = time.monotonic()
    data_dir = tmp / "engram-data"
    first_env = _serve_env(data_dir, model_dir, (datetime.now(UTC).hour + 12) % 24)
    first = _ready(start_serve(first_env))
    try:
        found = TOKEN.search(first.output())
        if found is None:
            raise RuntimeError(f"no first-agent token in:\n{first.output()[-4000:]}")
        limited = _add_limited_agent(first_env)
    finally:
        close(first)
    engram = _ready(start_serve(_serve_env(data_dir, model_dir, datetime.now(UTC).hour)))
    try:
        prometheus = _start_prometheus(tmp, engram.base)
        try:
            yield Stack(engram, prometheus, found.group(0), limited, started)
        finally:
            prometheus.close()
    finally:
        close(engram)
