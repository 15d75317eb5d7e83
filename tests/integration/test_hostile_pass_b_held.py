"""Hostile review, pass B: checks that HELD on the code they were written against (kept as
regression tests; the failing findings are in ``test_hostile_pass_b``)."""

from __future__ import annotations

import asyncio
import os

# --- SIGKILL of `engram serve` in a burst of creates, updates and forgets ------------------
import random
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from engram.infra.embedded_server import EmbeddedPostgres
from tests.e2e.conftest import TOKEN, close, start_serve
from tests.e2e.test_serve import ENGRAM, _env, _free_port


class MixedLoad:
    """Clients that create (with an Idempotency-Key), update and forget their own records,
    keeping every acknowledged answer."""

    def __init__(self, base: str, token: str, clients: int = 4) -> None:
        self.base, self.token = base, token
        self.created: dict[str, tuple[str, dict[str, Any]]] = {}  # key -> (record_id, body)
        self.versions: set[tuple[str, int]] = set()
        self.forgotten: set[str] = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [
            threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(clients)
        ]

    def __enter__(self) -> MixedLoad:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(15)

    def acked(self) -> int:
        with self.lock:
            return len(self.created) + len(self.versions) + len(self.forgotten)

    def _run(self, n: int) -> None:
        rng = random.Random(n)  # noqa: S311 - a workload, not a secret
        auth = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.base, headers=auth, timeout=10) as client:
            i = 0
            while not self.stopping.is_set():
                i += 1
                try:
                    self._step(client, rng, n, i)
                except httpx.TransportError:
                    time.sleep(0.05)

    def _step(self, client: httpx.Client, rng: random.Random, n: int, i: int) -> None:
        key = f"burst-{n}-{i}"
        body = {
            "type": "belief",
            "content": f"Crash drill {n}.{i}: host h{n}x{i} runs kernel {i}.{n}.",
        }
        made = client.post("/v1/memories", json=body, headers={"Idempotency-Key": key})
        if made.status_code == 429:
            time.sleep(float(made.headers.get("retry-after", "0.2")))
            return
        if made.status_code not in (200, 201):
            return
        record_id = made.json()["record_id"]
        with self.lock:
            self.created[key] = (record_id, body)
        changed = client.patch(
            f"/v1/memories/{record_id}",
            json={"content": f"Crash drill {n}.{i}: host h{n}x{i} now runs kernel {i + 1}.{n}."},
            headers={"If-Match": made.headers.get("etag", '"1"')},
        )
        if changed.status_code == 200:
            with self.lock:
                self.versions.add((record_id, int(changed.json()["version"])))
        if rng.random() < 0.3:
            gone = client.delete(f"/v1/memories/{record_id}")
            if gone.status_code == 200:
                with self.lock:
                    self.forgotten.add(record_id)


def killed_mid_burst(env: dict[str, str], writes: int) -> tuple[MixedLoad, str]:
    """Start `engram serve` with ``env``, run a :class:`MixedLoad` against it until ``writes``
    answers were acknowledged (at most a minute) and SIGKILL the server; the load and the
    token the server printed."""
    first = start_serve(env)
    try:
        found = TOKEN.search(first.output())
        assert found is not None, first.output()
        token = found.group(0)
        with MixedLoad(first.base, token) as load:
            deadline = time.monotonic() + 60
            while load.acked() < writes and time.monotonic() < deadline:
                time.sleep(0.02)
            os.kill(first.process.pid, signal.SIGKILL)
            first.process.wait(10)
        assert load.acked() >= writes, "too few writes were acknowledged before the kill"
    finally:
        close(first)
    return load, token


def _cli_on(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own CLI
        [*ENGRAM, *args], env=env, capture_output=True, text=True, timeout=180, check=False
    )


@pytest.mark.slow
def test_sigkill_mid_burst_keeps_every_acknowledged_write_and_a_verifiable_log(
    tmp_path: Path, model_dir: Path
) -> None:
    """`engram serve` on the embedded database, SIGKILLed in a burst of creates, updates and
    forgets; after a restart every acknowledged create, version and forget is there, each
    acknowledged Idempotency-Key replays its record, `audit verify` and `audit state` pass, and
    the outbox drains without new writes."""
    env = _env(tmp_path / "data", model_dir, ENGRAM_PORT=str(_free_port()))
    load, token = killed_mid_burst(env, 150)

    again = start_serve(env)
    try:
        assert again.process.poll() is None, again.output()
        auth = {"Authorization": f"Bearer {token}"}
        problems: list[str] = []
        with httpx.Client(base_url=again.base, headers=auth, timeout=10) as client:
            for key, (record_id, _) in load.created.items():
                chain = client.get(f"/v1/memories/{record_id}/versions")
                if chain.status_code != 200:
                    problems.append(f"create {key} -> {record_id} lost ({chain.status_code})")
                    continue
                versions = {v["version"]: v["status"] for v in chain.json()["versions"]}
                if any(v not in versions for (r, v) in load.versions if r == record_id):
                    problems.append(f"acknowledged version of {record_id} lost: {versions}")
                if (
                    record_id in load.forgotten
                    and client.get(f"/v1/memories/{record_id}").status_code != 404
                ):
                    problems.append(f"acknowledged forget of {record_id} undone")
            for key, (record_id, body) in list(load.created.items())[:25]:
                replay = client.post("/v1/memories", json=body, headers={"Idempotency-Key": key})
                if replay.status_code >= 300 or replay.json().get("record_id") != record_id:
                    problems.append(
                        f"key {key} replayed as {replay.status_code} {replay.text[:120]}"
                    )
        assert [] == problems, problems[:10]

        pg = EmbeddedPostgres(Path(env["ENGRAM_DATA_DIR"]) / "pg")
        pg.start()  # attaches to the running server
        try:

            async def pending() -> int:
                conn = await asyncpg.connect(pg.admin_url("engram"))
                try:
                    return int(
                        await conn.fetchval(
                            "SELECT count(*) FROM engram.outbox WHERE dispatched_at IS NULL"
                        )
                    )
                finally:
                    await conn.close()

            deadline = time.monotonic() + 20
            while asyncio.run(pending()) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert 0 == asyncio.run(pending()), "the outbox did not drain after the restart"
        finally:
            pg.stop()

        verify = _cli_on(env, "audit", "verify", "--json")
        assert 0 == verify.returncode, verify.stdout + verify.stderr[-800:]
        state = _cli_on(env, "audit", "state")
        assert 0 == state.returncode, state.stdout[-1500:] + state.stderr[-800:]
        assert "Traceback" not in again.output()
    finally:
        close(again)
