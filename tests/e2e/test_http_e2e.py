"""The REST API as a user meets it: `engram serve` as a process, the first-agent token from its
output, then writes, reads, updates, forgets, searches and the audit log over real HTTP."""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.e2e.test_serve import ENGRAM, _env, _free_port

TOKEN = re.compile(r"engram_[A-Za-z0-9_-]{43}")


@dataclass
class Served:
    """A running server, its address, and what it printed so far."""

    process: subprocess.Popen[bytes]
    base: str
    lines: list[str] = field(default_factory=list)

    def output(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def served(tmp_path: Path, model_dir: Path) -> Iterator[Served]:
    """`engram serve` on a free loopback port with a fresh data dir, ready, its output read."""
    port = _free_port()
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        [*ENGRAM, "serve"],
        env=_env(tmp_path / "engram-data", model_dir, ENGRAM_PORT=str(port)),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = Served(process, f"http://127.0.0.1:{port}")

    def read() -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            server.lines.append(raw.decode(errors="replace").rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{server.base}/readyz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    try:
        yield server
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
        reader.join(5)


@pytest.mark.slow
def test_first_agent_token_then_a_whole_record_lifecycle_over_http(served: Served) -> None:
    text = served.output()
    found = TOKEN.search(text)
    assert found is not None, text
    token = found.group(0)
    assert 1 == text.count(token) - text.count(f"ENGRAM_TOKEN={token}")  # shown once, plus export
    assert f"curl -s -X POST {served.base}/v1/memories" in text
    assert f"curl -s -X POST {served.base}/v1/search" in text

    if shutil.which("curl") and shutil.which("bash"):
        start = text.index(f"export ENGRAM_TOKEN={token}")
        example = text[start : text.index("\n\n", start) if "\n\n" in text[start:] else None]
        ran = subprocess.run(  # noqa: S603 - the example the server printed, against itself
            ["bash", "-c", example],  # noqa: S607
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert 0 == ran.returncode, ran.stderr.decode()
        assert b'"decision":"approved"' in ran.stdout
        assert b'"hits":[{' in ran.stdout

    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=served.base, headers=auth, timeout=10) as client:
        assert 401 == httpx.get(f"{served.base}/v1/audit", timeout=5).status_code

        created = client.post(
            "/v1/memories",
            json={"type": "belief", "content": "The fraud scorer is deployed on Kubernetes."},
        )
        assert 201 == created.status_code, created.text
        location = created.headers["location"]

        read = client.get(location)
        assert (200, '"1"') == (read.status_code, read.headers["etag"])

        change = {"content": "The fraud scorer moved from Kubernetes to Nomad last week."}
        stale = client.patch(location, json=change, headers={"If-Match": '"7"'})
        assert 409 == stale.status_code
        assert stale.headers["content-type"].startswith("application/problem+json")
        assert 1 == stale.json()["current_version"]

        updated = client.patch(location, json=change, headers={"If-Match": read.headers["etag"]})
        assert (200, '"2"') == (updated.status_code, updated.headers["etag"])

        found_hits = client.post("/v1/search", json={"query": "where does the fraud scorer run"})
        assert 200 == found_hits.status_code
        assert created.json()["record_id"] in [
            hit["record"]["record_id"] for hit in found_hits.json()["hits"]
        ]

        forgotten = client.delete(location, headers={"If-Match": '"2"'})
        assert (200, "forgotten") == (forgotten.status_code, forgotten.json()["outcome"])
        assert 404 == client.get(location).status_code

        audit = client.get("/v1/audit", params={"limit": 100})
        assert 200 == audit.status_code
        actions = [(e["action"], e["decision"]) for e in audit.json()["entries"]]
        assert ("UPDATE", "conflict") in actions
        assert ("UPDATE", "approved") in actions
        assert ("FORGET", "approved") in actions
        assert all(e["decision_type"] == "external" for e in audit.json()["entries"])

        assert 200 == httpx.get(f"{served.base}/metrics", timeout=5).status_code
    assert "Traceback" not in served.output()
