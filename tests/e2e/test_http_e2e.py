"""The REST API as a user meets it: `engram serve` as a process, the first-agent token from its
output, then writes, reads, updates, forgets, searches and the audit log over real HTTP."""

from __future__ import annotations

import shutil
import subprocess

import httpx
import pytest

from tests.e2e.conftest import TOKEN, Served
from tests.e2e.test_serve import SCRAPER


@pytest.mark.slow
def test_first_agent_token_then_a_whole_record_lifecycle_over_http(
    first_serve: Served,
) -> None:
    """The first serve prints the first agent's token once and a curl example that stores and then
    finds a record.
    """
    served = first_serve
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
        # what the agent wrote is external; the server's own jobs (consolidation, self-healing)
        # may also have written by now, as themselves
        mine = [e for e in audit.json()["entries"] if not e["agent_id"].startswith("system:")]
        assert mine
        assert all(e["decision_type"] == "external" for e in mine)

        assert 200 == httpx.get(f"{served.base}/metrics", headers=SCRAPER, timeout=5).status_code
    assert "Traceback" not in served.output()
