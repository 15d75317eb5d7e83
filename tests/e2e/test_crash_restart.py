"""A crash under write load, then a restart on the same data dir: every acknowledged write is
still there, and the next Ctrl-C stops the embedded PostgreSQL (issue 11).

The faults are real SIGKILLs: of `engram serve` alone (its model workers must exit by
themselves; its PostgreSQL survives it), and of the postmaster together with `engram serve` (a
stale ``postmaster.pid`` and backends left without their postmaster)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.e2e.conftest import TOKEN, Served, close, start_serve, stop
from tests.e2e.test_serve import _env, _free_port, _postgres_for

CLIENTS = 4
ACKED_BEFORE_CRASH = 30


class WriteLoad:
    """Clients POSTing memories until stopped, each new one then PATCHed once (the update
    written in one statement); keeps the record_id of every 201 and the content of every
    200 to a PATCH."""

    def __init__(self, base: str, token: str) -> None:
        self.base = base
        self.token = token
        self.acked: list[str] = []
        self.updated: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads = [
            threading.Thread(target=self._client, args=(n,), daemon=True) for n in range(CLIENTS)
        ]

    def __enter__(self) -> WriteLoad:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(15)

    def wait_for(self, count: int, timeout: float = 30) -> None:
        """Block until ``count`` writes were acknowledged."""
        deadline = time.monotonic() + timeout
        while len(self.acked) < count:
            assert time.monotonic() < deadline, f"only {len(self.acked)} writes acknowledged"
            time.sleep(0.02)

    def _client(self, n: int) -> None:
        auth = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.base, headers=auth, timeout=10) as client:
            i = 0
            while not self._stopping.is_set():
                i += 1
                body = {"type": "belief", "content": f"Client {n} logged crash drill step {i}."}
                try:
                    response = client.post("/v1/memories", json=body)
                except httpx.TransportError:
                    time.sleep(0.05)  # the server is gone (the fault); keep trying until stopped
                    continue
                if response.status_code == 201:
                    record_id = response.json()["record_id"]
                    with self._lock:
                        self.acked.append(record_id)
                    self._update(client, record_id, f"Client {n} revised crash drill step {i}.")
                elif response.status_code == 429:
                    time.sleep(float(response.headers.get("retry-after", "0.2")))

    def _update(self, client: httpx.Client, record_id: str, content: str) -> None:
        try:
            response = client.patch(
                f"/v1/memories/{record_id}", json={"content": content}, headers={"If-Match": '"1"'}
            )
        except httpx.TransportError:
            return
        if response.status_code == 200:
            with self._lock:
                self.updated[record_id] = content


def _cluster_processes(pgdata: Path) -> list[psutil.Process]:
    """Every PostgreSQL process of the cluster in ``pgdata`` (they all run with it as cwd)."""
    found = []
    for process in psutil.process_iter(["name"]):
        try:
            if process.info["name"] == "postgres" and Path(process.cwd()) == pgdata.resolve():
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def pgdata(first_serve: Served) -> Iterator[Path]:
    """The embedded cluster of ``first_serve``; whatever a failed test left running is killed."""
    path = Path(first_serve.env["ENGRAM_DATA_DIR"]) / "pg"
    yield path
    for process in _cluster_processes(path):
        process.kill()


@pytest.fixture
def serve_with_workers(tmp_path: Path, model_dir: Path) -> Iterator[Served]:
    """`engram serve` with its model in a worker process (``ENGRAM_EMBEDDING_WORKERS=1``);
    its cluster is killed afterwards if a failed test left it running."""
    env = _env(
        tmp_path / "engram-data",
        model_dir,
        ENGRAM_PORT=str(_free_port()),
        ENGRAM_EMBEDDING_WORKERS="1",
    )
    server = start_serve(env)
    try:
        yield server
    finally:
        close(server)
        for process in _cluster_processes(tmp_path / "engram-data" / "pg"):
            process.kill()


def _crash_restart_and_check(first_serve: Served, pgdata: Path, *, kill_postgres: bool) -> None:
    found = TOKEN.search(first_serve.output())
    assert found is not None, first_serve.output()
    with WriteLoad(first_serve.base, found.group(0)) as load:
        load.wait_for(ACKED_BEFORE_CRASH)
        if kill_postgres:
            postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
            os.kill(postmaster, signal.SIGKILL)
        # SIGKILL of serve alone, mid-load: no shutdown code runs. PostgreSQL runs in a
        # session of its own and survives unless killed above; the model workers must notice
        # that their parent is gone and exit by themselves.
        workers = [p.pid for p in psutil.Process(first_serve.process.pid).children(recursive=True)]
        if first_serve.env.get("ENGRAM_EMBEDDING_WORKERS", "0") != "0":
            assert workers, "serve started no model worker"
        os.kill(first_serve.process.pid, signal.SIGKILL)
        first_serve.process.wait(10)
    acked, updated = list(load.acked), dict(load.updated)
    assert updated, "no update was acknowledged before the crash"
    deadline = time.monotonic() + 10
    while [pid for pid in workers if _alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [] == [pid for pid in workers if _alive(pid)], "model workers outlived serve"

    again = start_serve(first_serve.env)
    try:
        assert again.process.poll() is None, again.output()
        auth = {"Authorization": f"Bearer {found.group(0)}"}
        with httpx.Client(base_url=again.base, headers=auth, timeout=10) as client:
            lost = [rid for rid in acked if client.get(f"/v1/memories/{rid}").status_code != 200]
            assert [] == lost, f"{len(lost)} of {len(acked)} acknowledged writes lost"
            chains = {
                rid: [
                    v["content"]
                    for v in client.get(f"/v1/memories/{rid}/versions").json()["versions"]
                ]
                for rid in updated
            }
        wrong = {rid: chain for rid, chain in chains.items() if chain[1:2] != [updated[rid]]}
        assert {} == wrong, f"{len(wrong)} of {len(updated)} acknowledged updates not kept"

        stop(again.process)  # Ctrl-C
        assert 0 == again.process.returncode, again.output()
    finally:
        close(again)
    assert [] == _postgres_for(pgdata), again.output()
    assert [] == _cluster_processes(pgdata)
    postmaster_pid = pgdata / "postmaster.pid"
    assert not postmaster_pid.exists() or not _alive(int(postmaster_pid.read_text().split()[0]))
    handles = json.loads((pgdata / ".handle_pids.json").read_text() or "[]")
    assert [] == [pid for pid in handles if not _alive(pid)]
    assert "Traceback" not in again.output()


@pytest.mark.slow
def test_after_serve_is_killed_under_load_a_restart_keeps_acked_writes_and_ctrl_c_stops_postgres(
    serve_with_workers: Served,
) -> None:
    """SIGKILL of serve mid-load, restart: every 201 is readable, the model worker exits by
    itself, and Ctrl-C leaves no PostgreSQL."""
    pgdata = Path(serve_with_workers.env["ENGRAM_DATA_DIR"]) / "pg"
    _crash_restart_and_check(serve_with_workers, pgdata, kill_postgres=False)


@pytest.mark.slow
def test_after_postgres_and_serve_are_killed_a_restart_recovers_and_ctrl_c_stops_postgres(
    first_serve: Served, pgdata: Path
) -> None:
    """SIGKILL of the postmaster and serve mid-load, restart: crash recovery keeps every 201."""
    _crash_restart_and_check(first_serve, pgdata, kill_postgres=True)
