"""The REST API in-process: every status it answers, over a real kernel and database."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from engram import Kernel
from engram.errors import CircuitOpen, DatabaseUnavailable, NotFound
from engram.memory.types import TrustLevel
from engram.protocols.http.app import create_app
from engram.protocols.http.problems import ERROR_STATUS, PROBLEM_JSON, status_of
from tests.integration.gate_helpers import escalate
from tests.integration.odd_inputs import ODD_IDS, ODD_INPUTS, OddInput
from tests.integration.scheduler_helpers import running
from tests.readiness import when_ready

TOKEN = re.compile(r"engram_[A-Za-z0-9_-]{43}")
#: The documented bounds (docs/api.md): the body size limit and the audited excerpt.
BODY_LIMIT_BYTES = 1024 * 1024
AUDITED_EXCERPT_BYTES = 8 * 1024
BELIEF = {"type": "belief", "content": "The ledger service runs on PostgreSQL 16 in eu-west-1."}


@dataclass
class Api:
    """The app under test, its kernel, and the first (admin) agent's headers."""

    client: httpx.AsyncClient
    kernel: Kernel
    admin: dict[str, str]
    announced: list[str]
    app: FastAPI | None = None

    async def agent(self, name: str, trust: TrustLevel, **options: Any) -> dict[str, str]:
        """Headers of a newly added agent."""
        _, token = await self.kernel.agents.add(name, trust, **options)
        return bearer(token)

    async def write(self, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
        return await self.client.post("/v1/memories", json=body, headers=headers)


def bearer(token: str) -> dict[str, str]:
    """Return the authorization header carrying the given bearer token."""
    return {"Authorization": f"Bearer {token}"}


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    """The response is an RFC 9457 problem with this status; returns its body."""
    assert status == response.status_code, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON)
    body: dict[str, Any] = response.json()
    assert status == body["status"]
    assert body["type"].startswith("urn:engram:problem:")
    assert body["title"]
    assert isinstance(body["detail"], str)
    return body


@pytest.fixture
async def api(kernel: Kernel) -> AsyncIterator[Api]:
    """The app on the test's kernel, its lifespan running (which creates the first agent)."""
    announced: list[str] = []
    app = create_app(kernel=kernel, announce=announced.append)
    async with running(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://engram.test") as client:
            found = TOKEN.search(announced[0])
            assert found is not None
            yield Api(client, kernel, bearer(found.group(0)), announced, app)


async def test_first_serve_announces_the_admin_token_once_with_a_curl_example(
    api: Api, kernel: Kernel
) -> None:
    """One announcement naming the token, that it is shown once, and curl lines for this
    server; a second start on the same registry announces nothing."""
    assert 1 == len(api.announced)
    text = api.announced[0]
    assert "only this once" in text
    base = f"http://{kernel.settings.host}:{kernel.settings.port}"
    assert f"curl -s -X POST {base}/v1/memories" in text
    assert f"curl -s -X POST {base}/v1/search" in text
    agents = await kernel.agents.list_agents()
    assert [("local", True)] == [(agent.name, agent.admin) for agent in agents]

    again: list[str] = []
    app = create_app(kernel=kernel, announce=again.append)
    async with running(app):
        pass
    assert [] == again


async def test_create_answers_201_with_location_etag_decision_and_record(api: Api) -> None:
    """Creating a record answers 201 with its location, etag, approved decision and the stored
    record.
    """
    response = await api.write(BELIEF, api.admin)
    assert 201 == response.status_code, response.text
    body = response.json()
    assert ("approved", "created") == (body["decision"], body["outcome"])
    record_id = body["record_id"]
    assert f"/v1/memories/{record_id}" == response.headers["location"]
    assert '"1"' == response.headers["etag"]
    assert uuid.UUID(body["decision_id"])
    record = body["record"]
    assert (record_id, 1, "agent", "external") == (
        record["record_id"],
        record["version"],
        record["access_level"],
        record["gate_decision_type"],
    )
    assert "local" == record["source_agent"]
    assert [] == body["failed_checks"]

    fetched = await api.client.get(response.headers["location"], headers=api.admin)
    assert 200 == fetched.status_code
    assert BELIEF["content"] == fetched.json()["content"]


async def test_a_duplicate_is_200_reinforced_naming_the_existing_record(api: Api) -> None:
    """Writing a duplicate answers 200 reinforced, naming the existing record and giving no
    location.
    """
    first = (await api.write(BELIEF, api.admin)).json()
    again = await api.write(BELIEF, api.admin)
    assert 200 == again.status_code, again.text
    body = again.json()
    assert ("approved", "reinforced") == (body["decision"], body["outcome"])
    assert first["record_id"] == body["record_id"]
    assert "location" not in again.headers


async def test_a_gate_rejection_is_422_with_every_failed_check(api: Api) -> None:
    """A gate rejection answers 422 listing every failed check with its detail."""
    response = await api.write(
        {"type": "belief", "content": "Does the ledger run on PostgreSQL?"}, api.admin
    )
    body = assert_problem(response, 422)
    assert "rejected" == body["decision"]
    assert ["schema", "classification"] == [check["name"] for check in body["failed_checks"]]
    assert all(check["detail"] and not check["passed"] for check in body["failed_checks"])
    assert "question" in body["detail"]


async def test_a_read_only_agent_is_403_from_the_access_check(api: Api) -> None:
    """A read-only agent's write answers 403 from the access check."""
    reader = await api.agent("reader", TrustLevel.READ_ONLY)
    body = assert_problem(await api.write(BELIEF, reader), 403)
    assert "access" in [check["name"] for check in body["failed_checks"]]
    assert "read-only" in body["detail"]


async def test_the_rate_limit_is_429_with_retry_after(api: Api) -> None:
    """Exceeding the write rate answers 429 with a Retry-After header and the rate-limit check."""
    slow = await api.agent("slow", TrustLevel.STANDARD, writes_per_minute=1)
    assert 201 == (await api.write(BELIEF, slow)).status_code
    response = await api.write(
        {"type": "belief", "content": "The billing API is written in Go 1.22."}, slow
    )
    body = assert_problem(response, 429)
    assert int(response.headers["retry-after"]) >= 1
    assert body["retry_after_seconds"] > 0
    assert ["rate_limit"] == [check["name"] for check in body["failed_checks"]]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer engram_" + "x" * 43},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
    ],
    ids=["missing", "unknown", "malformed", "basic"],
)
async def test_without_a_valid_bearer_token_it_is_401(api: Api, headers: dict[str, str]) -> None:
    """A request without a valid bearer token answers 401 with a Bearer challenge."""
    for response in (
        await api.write(BELIEF, headers),
        await api.client.get(f"/v1/memories/{uuid.uuid4()}", headers=headers),
        await api.client.get("/v1/audit", headers=headers),
    ):
        assert_problem(response, 401)
        assert response.headers["www-authenticate"].startswith("Bearer")


async def test_a_client_sent_decision_type_is_rejected_and_audited(
    api: Api, kernel: Kernel
) -> None:
    """A client-sent decision_type is rejected by the schema check and audited as an external
    create, storing nothing.
    """
    response = await api.write({**BELIEF, "decision_type": "consolidation"}, api.admin)
    body = assert_problem(response, 422)
    assert "decision_type" in body["detail"]
    assert ["schema"] == [check["name"] for check in body["failed_checks"]]
    [entry] = await kernel.audit.search(agent_id="local", decision="rejected")
    assert body["decision_id"] == entry["decision_id"]
    assert ("external", "CREATE") == (entry["decision_type"], entry["action"])
    assert "consolidation" == entry["input_snapshot"]["raw"]["decision_type"]
    assert 0 == await kernel.db.fetchval("SELECT count(*) FROM memories")


@pytest.mark.parametrize(
    ("method", "headers"),
    [
        ("post", {"Idempotency-Key": "has space"}),
        ("post", {"Idempotency-Key": "x" * 129}),
        ("patch", {}),  # no If-Match
        ("patch", {"If-Match": "abc"}),
        ("patch", {"If-Match": '"1"', "Idempotency-Key": ""}),
    ],
    ids=["key-with-space", "key-too-long", "patch-no-if-match", "patch-bad-if-match", "empty-key"],
)
async def test_a_decision_type_claim_is_audited_whatever_the_headers(
    api: Api, kernel: Kernel, method: str, headers: dict[str, str]
) -> None:
    """A body claiming an internal origin is refused and audited before the headers are
    checked: a malformed Idempotency-Key or If-Match does not let the claim go unrecorded."""
    created = (await api.write(BELIEF, api.admin)).json()
    before = await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    if method == "post":
        response = await api.write(
            {**BELIEF, "decision_type": "consolidation"}, {**api.admin, **headers}
        )
    else:
        url = f"/v1/memories/{created['record_id']}"
        response = await api.client.patch(
            url, json={"decision_type": "self_healing"}, headers={**api.admin, **headers}
        )
    body = assert_problem(response, 422)
    assert "decision_type" in body["detail"]
    assert before + 1 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    [entry] = await kernel.audit.search(agent_id="local", decision="rejected")
    assert body["decision_id"] == entry["decision_id"]
    assert 1 == await kernel.db.fetchval("SELECT count(*) FROM memories")


async def test_reads_answer_etag_and_hide_what_the_caller_may_not_read(api: Api) -> None:
    """Reads answer with an etag, and a record the caller may not read is a 404 indistinguishable
    from an unknown one.
    """
    created = (await api.write({**BELIEF, "access_level": "user"}, api.admin)).json()
    url = f"/v1/memories/{created['record_id']}"
    read = await api.client.get(url, headers=api.admin)
    assert (200, '"1"') == (read.status_code, read.headers["etag"])
    assert "user" == read.json()["access_level"]

    restricted = await api.agent("helper", TrustLevel.RESTRICTED)
    hidden = assert_problem(await api.client.get(url, headers=restricted), 404)
    unknown = assert_problem(
        await api.client.get(f"/v1/memories/{uuid.uuid4()}", headers=restricted), 404
    )
    assert hidden["type"] == unknown["type"]  # existence does not leak
    assert_problem(await api.client.get(f"{url}/versions", headers=restricted), 404)
    assert_problem(await api.client.get("/v1/memories/not-a-uuid", headers=api.admin), 422)


async def test_update_needs_if_match_and_a_stale_one_is_409_with_the_current_version(
    api: Api,
) -> None:
    """An update needs If-Match, a stale one is 409 naming the current version, and a current one
    writes the next version.
    """
    created = (await api.write(BELIEF, api.admin)).json()
    url = f"/v1/memories/{created['record_id']}"
    change = {"content": "The ledger service runs on PostgreSQL 17 in eu-west-1."}

    assert_problem(await api.client.patch(url, json=change, headers=api.admin), 428)
    for bad in ("abc", '"0"', "*", "1, 2"):
        assert_problem(
            await api.client.patch(url, json=change, headers={**api.admin, "If-Match": bad}), 400
        )

    updated = await api.client.patch(url, json=change, headers={**api.admin, "If-Match": '"1"'})
    assert 200 == updated.status_code, updated.text
    assert ("approved", "updated", 2) == (
        updated.json()["decision"],
        updated.json()["outcome"],
        updated.json()["version"],
    )
    assert '"2"' == updated.headers["etag"]
    assert "belief" == updated.json()["record"]["type"]  # kept from the current version

    stale = await api.client.patch(
        url,
        json={"content": "The ledger service runs on MySQL."},
        headers={**api.admin, "If-Match": "1"},
    )
    body = assert_problem(stale, 409)
    assert 2 == body["current_version"]
    assert "conflict" == body["decision"]

    weak = await api.client.patch(
        url,
        json={"content": "The ledger service runs on PostgreSQL 18 in eu-west-1."},
        headers={**api.admin, "If-Match": 'W/"2"'},
    )
    assert (200, '"3"') == (weak.status_code, weak.headers["etag"])
    read = await api.client.get(url, headers=api.admin)
    assert '"3"' == read.headers["etag"]


async def test_a_malformed_update_is_422_and_audited(api: Api, kernel: Kernel) -> None:
    """A malformed update is rejected and audited, bad JSON is 400, and an unknown record is 404."""
    created = (await api.write(BELIEF, api.admin)).json()
    url = f"/v1/memories/{created['record_id']}"
    headers = {**api.admin, "If-Match": '"1"'}
    body = assert_problem(
        await api.client.patch(url, json={"decision_type": "self_healing"}, headers=headers), 422
    )
    assert "decision_type" in body["detail"]
    rejected = await kernel.audit.search(action="UPDATE", decision="rejected")
    assert [body["decision_id"]] == [entry["decision_id"] for entry in rejected]
    not_json = await api.client.patch(url, content=b"[1, 2", headers=headers)
    assert_problem(not_json, 400)
    assert_problem(await api.client.patch(url, json=[1, 2], headers=headers), 422)
    missing = f"/v1/memories/{uuid.uuid4()}"
    assert_problem(await api.client.patch(missing, json={}, headers=headers), 404)


async def test_as_of_reads_and_the_version_chain(api: Api) -> None:
    """As-of reads return the version current at that time, and the version chain lists every
    version.
    """
    created = (await api.write(BELIEF, api.admin)).json()
    url = f"/v1/memories/{created['record_id']}"
    between = datetime.now(UTC)
    changed = await api.client.patch(
        url,
        json={"content": "The ledger service moved to PostgreSQL 17 in eu-central-1."},
        headers={**api.admin, "If-Match": '"1"'},
    )
    assert 200 == changed.status_code, changed.text

    then = await api.client.get(
        url, params={"as_of_ingestion": between.isoformat()}, headers=api.admin
    )
    assert (200, '"1"') == (then.status_code, then.headers["etag"])
    assert BELIEF["content"] == then.json()["content"]
    before = await api.client.get(
        url, params={"as_of_ingestion": "2000-01-01T00:00:00Z"}, headers=api.admin
    )
    assert_problem(before, 404)
    naive = await api.client.get(
        url, params={"as_of_event": "2000-01-01T00:00:00"}, headers=api.admin
    )
    assert_problem(naive, 422)

    versions = await api.client.get(f"{url}/versions", headers=api.admin)
    assert 200 == versions.status_code
    assert [1, 2] == [v["version"] for v in versions.json()["versions"]]


async def test_forget_with_a_stale_if_match_is_409_then_forgets(api: Api) -> None:
    """Forget with a stale If-Match is 409; a current one forgets, a retry replays it, and the
    record is then gone.
    """
    created = (await api.write(BELIEF, api.admin)).json()
    url = f"/v1/memories/{created['record_id']}"
    stale = await api.client.delete(url, headers={**api.admin, "If-Match": '"7"'})
    assert 1 == assert_problem(stale, 409)["current_version"]

    key = {"Idempotency-Key": "forget-1"}
    forgotten = await api.client.delete(url, headers={**api.admin, **key, "If-Match": '"1"'})
    assert 200 == forgotten.status_code, forgotten.text
    assert "forgotten" == forgotten.json()["outcome"]
    retried = await api.client.delete(url, headers={**api.admin, **key})
    assert 200 == retried.status_code
    assert retried.json()["replayed"]
    assert forgotten.json()["decision_id"] == retried.json()["decision_id"]

    assert_problem(await api.client.get(url, headers=api.admin), 404)
    assert_problem(await api.client.delete(url, headers=api.admin), 404)
    history = await api.client.get(f"{url}/versions", headers=api.admin)
    assert "forgotten" == history.json()["versions"][-1]["status"]


async def test_an_idempotency_key_replays_the_recorded_decision_for_that_agent_only(
    api: Api,
) -> None:
    """An idempotency key replays the recorded decision for the same agent only, and a malformed key
    is 422.
    """
    key = {"Idempotency-Key": "write-42"}
    first = await api.write(BELIEF, {**api.admin, **key})
    again = await api.write(BELIEF, {**api.admin, **key})
    assert (201, 201) == (first.status_code, again.status_code)
    assert again.json()["replayed"]
    assert first.json()["decision_id"] == again.json()["decision_id"]

    other = await api.agent("other", TrustLevel.STANDARD)
    theirs = await api.write(
        {"type": "belief", "content": "The auth gateway is served by Nomad jobs."},
        {**other, **key},
    )
    assert 201 == theirs.status_code
    assert not theirs.json()["replayed"]
    assert first.json()["record_id"] != theirs.json()["record_id"]
    bad_key = await api.write(BELIEF, {**api.admin, "Idempotency-Key": "a b"})
    assert_problem(bad_key, 422)

    malformed = {**api.admin, "Idempotency-Key": "malformed-1"}
    rejected = assert_problem(await api.write({"type": "belief"}, malformed), 422)
    retried = assert_problem(await api.write({"type": "belief"}, malformed), 422)
    assert rejected["decision_id"] == retried["decision_id"]


async def test_search_and_feedback(api: Api) -> None:
    """Search finds a written record by its legs, filters by type, rejects bad input, and feedback
    is stored or refused.
    """
    created = (await api.write(BELIEF, api.admin)).json()
    await api.write(
        {"type": "belief", "content": "Kafka carries the checkout flow events to ClickHouse."},
        api.admin,
    )
    found = await api.client.post(
        "/v1/search", json={"query": "which database does the ledger use", "limit": 5},
        headers=api.admin,
    )  # fmt: skip
    assert 200 == found.status_code, found.text
    body = found.json()
    assert created["record_id"] == body["hits"][0]["record"]["record_id"]
    assert {"vector", "text"} >= set(body["hits"][0]["ranks"])
    assert body["degraded"] is False
    relevance = [hit["relevance"] for hit in body["hits"]]
    assert all(0.0 <= r <= 1.0 for r in relevance), relevance
    assert relevance == sorted(relevance, reverse=True)

    typed = await api.client.post(
        "/v1/search", json={"query": "ledger", "types": ["skill"]}, headers=api.admin
    )
    assert [] == typed.json()["hits"]
    assert_problem(
        await api.client.post("/v1/search", json={"query": "   "}, headers=api.admin), 422
    )
    assert_problem(
        await api.client.post("/v1/search", json={"query": "x", "limit": 0}, headers=api.admin),
        422,
    )
    assert_problem(
        await api.client.post(
            "/v1/search", json={"query": "x", "decision_type": "consolidation"}, headers=api.admin
        ),
        422,
    )

    rated = await api.client.post(
        "/v1/feedback", json={"record_id": created["record_id"], "useful": True}, headers=api.admin
    )
    assert 200 == rated.status_code, rated.text
    assert (created["record_id"], True, "explicit") == (
        rated.json()["record_id"],
        rated.json()["useful"],
        rated.json()["signal"],
    )
    unknown = {"record_id": str(uuid.uuid4()), "useful": False}
    assert_problem(await api.client.post("/v1/feedback", json=unknown, headers=api.admin), 404)
    bad_signal = {"record_id": created["record_id"], "useful": False, "signal": "Not Valid"}
    assert_problem(await api.client.post("/v1/feedback", json=bad_signal, headers=api.admin), 422)


async def test_admin_endpoints_are_403_for_agents_without_the_admin_flag(api: Api) -> None:
    """Admin endpoints answer 403 to agents without the admin flag."""
    trusted = await api.agent("trusted-worker", TrustLevel.TRUSTED)
    release = f"/v1/quarantine/{uuid.uuid4()}/release"
    for response in (
        await api.client.get("/v1/audit", headers=trusted),
        await api.client.get("/v1/quarantine", headers=trusted),
        await api.client.get("/v1/conflicts", headers=trusted),
        await api.client.post(release, json={"reason": "checked"}, headers=trusted),
    ):
        assert_problem(response, 403)


async def test_the_audit_log_pages_with_a_cursor_and_filters(api: Api) -> None:
    """The audit log pages in order with a cursor, filters by decision, and rejects a bad cursor."""
    for index, place in enumerate(["Lisbon", "Osaka", "Nairobi", "Quito", "Tallinn"]):
        text = f"The reporting pipeline replica number {index} is hosted in {place}."
        assert 201 == (await api.write({"type": "belief", "content": text}, api.admin)).status_code
    await api.write({"type": "belief", "content": "Is it raining?"}, api.admin)

    seqs: list[int] = []
    cursor: int | None = 0
    pages = 0
    while cursor is not None:
        page = await api.client.get(
            "/v1/audit", params={"cursor": cursor, "limit": 2}, headers=api.admin
        )
        assert 200 == page.status_code, page.text
        seqs += [entry["seq"] for entry in page.json()["entries"]]
        cursor = page.json()["next_cursor"]
        pages += 1
    assert 6 == len(seqs)
    assert sorted(set(seqs)) == seqs
    assert 3 == pages  # the last page is full: its next_cursor is null, no empty page follows

    rejected = await api.client.get(
        "/v1/audit", params={"decision": "rejected", "agent": "local"}, headers=api.admin
    )
    assert ["rejected"] == [entry["decision"] for entry in rejected.json()["entries"]]
    assert None is rejected.json()["next_cursor"]
    future = await api.client.get(
        "/v1/audit", params={"since": "2999-01-01T00:00:00+00:00"}, headers=api.admin
    )
    assert [] == future.json()["entries"]
    assert_problem(
        await api.client.get("/v1/audit", params={"decision": "maybe"}, headers=api.admin), 422
    )
    assert_problem(await api.client.get("/v1/audit", params={"cursor": -1}, headers=api.admin), 422)


async def test_a_record_with_an_email_is_quarantined_and_an_admin_releases_it(
    api: Api, kernel: Kernel
) -> None:
    """A record holding an email is quarantined out of reach until an admin releases it once, and
    the release is audited.
    """
    text = "Priya Raman handles ledger escalations; write to priya.raman@example.com first."
    written = await api.write({"type": "belief", "content": text}, api.admin)
    assert 201 == written.status_code, written.text
    record_id = written.json()["record_id"]
    assert "sensitive" == written.json()["record"]["access_level"]

    standard = await api.agent("standard-reader", TrustLevel.STANDARD)
    assert_problem(await api.client.get(f"/v1/memories/{record_id}", headers=standard), 404)

    pending = await api.client.get("/v1/quarantine", headers=api.admin)
    assert 200 == pending.status_code
    assert [record_id] == [record["record_id"] for record in pending.json()["records"]]
    assert None is pending.json()["next_cursor"]
    full = await api.client.get("/v1/quarantine", params={"limit": 1}, headers=api.admin)
    assert 1 == len(full.json()["records"])
    assert None is full.json()["next_cursor"]  # a full last page: nothing follows

    release = f"/v1/quarantine/{record_id}/release"
    assert_problem(await api.client.post(release, json={"reason": ""}, headers=api.admin), 422)
    assert_problem(
        await api.client.post(
            release, json={"reason": "ok", "level": "sensitive"}, headers=api.admin
        ),
        422,
    )
    released = await api.client.post(
        release, json={"reason": "a public work address", "level": "user"}, headers=api.admin
    )
    assert 200 == released.status_code, released.text
    assert "user" == released.json()["record"]["access_level"]
    readable = await api.client.get(f"/v1/memories/{record_id}", headers=standard)
    assert 200 == readable.status_code

    assert [] == (await api.client.get("/v1/quarantine", headers=api.admin)).json()["records"]
    assert_problem(await api.client.post(release, json={"reason": "again"}, headers=api.admin), 409)
    unknown = f"/v1/quarantine/{uuid.uuid4()}/release"
    assert_problem(await api.client.post(unknown, json={"reason": "x"}, headers=api.admin), 404)
    [entry] = await kernel.audit.search(action="RELEASE")
    assert (released.json()["decision_id"], "local") == (entry["decision_id"], entry["agent_id"])


async def test_open_escalations_are_listed_for_admins(api: Api, kernel: Kernel) -> None:
    """Admins see open conflict escalations, and none when there are none."""
    empty = await api.client.get("/v1/conflicts", headers=api.admin)
    assert {"conflicts": []} == empty.json()
    record_id = uuid.uuid4()
    await escalate(kernel, record_id)
    listed = (await api.client.get("/v1/conflicts", headers=api.admin)).json()["conflicts"]
    assert [(str(record_id), "memory.conflict_detected")] == [
        (item["record_id"], item["kind"]) for item in listed
    ]


async def test_unknown_routes_and_methods_and_bad_bodies_are_problems(api: Api) -> None:
    """Unknown routes and methods and malformed bodies answer problem documents with 404, 405, 400
    or 422.
    """
    assert_problem(await api.client.get("/v1/nothing-here", headers=api.admin), 404)
    assert_problem(await api.client.put("/v1/memories", headers=api.admin), 405)
    raw = {**api.admin, "Content-Type": "application/json"}
    assert_problem(await api.client.post("/v1/memories", content=b"{", headers=raw), 400)
    assert_problem(await api.client.post("/v1/memories", content=b"[]", headers=raw), 422)
    assert_problem(await api.client.post("/v1/search", content=b"{", headers=raw), 400)
    assert_problem(await api.client.post("/v1/memories", json={}, headers=api.admin), 422)


async def test_health_and_readiness_need_no_token_and_metrics_needs_one(api: Api) -> None:
    """Health and readiness answer without a token; metrics answer the admin's token and
    refuse a caller without one (ADR-022)."""
    assert 200 == (await api.client.get("/healthz")).status_code
    readyz = await when_ready(lambda: api.client.get("/readyz"), lambda r: r.status_code == 200)
    assert 200 == readyz.status_code, readyz.text
    assert_problem(await api.client.get("/metrics"), 401)
    assert (
        "engram_gate_decisions_total" in (await api.client.get("/metrics", headers=api.admin)).text
    )


def test_one_table_maps_kernel_errors_to_statuses() -> None:
    """One table maps kernel errors to HTTP statuses and problem types."""
    assert (404, "not-found") == status_of(NotFound("x"))
    assert 503 == status_of(CircuitOpen(dependency="postgres", retry_after_seconds=3))[0]
    assert 503 == status_of(DatabaseUnavailable())[0]
    assert all(100 <= status < 600 for status, _ in ERROR_STATUS.values())


async def test_infrastructure_failures_are_503_and_surprises_a_logged_500(
    api: Api, kernel: Kernel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Infrastructure failures answer 503 with Retry-After, and unexpected errors a 500 that leaks
    no detail.
    """

    async def breaker_open(*_: Any, **__: Any) -> Any:
        raise CircuitOpen(dependency="postgres", retry_after_seconds=12.2)

    monkeypatch.setattr(kernel.retrieval, "search", breaker_open)
    response = await api.client.post("/v1/search", json={"query": "ledger"}, headers=api.admin)
    assert_problem(response, 503)
    assert "13" == response.headers["retry-after"]

    async def surprise(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the ledger secret is hunter2")

    monkeypatch.setattr(kernel.retrieval, "search", surprise)
    response = await api.client.post("/v1/search", json={"query": "ledger"}, headers=api.admin)
    body = assert_problem(response, 500)
    assert "hunter2" not in response.text
    assert "internal error" == body["detail"]


# --- odd input (issue 11): a 4xx, audited once, nothing else changed -------------------------


async def _counts(kernel: Kernel) -> tuple[int, int]:
    """Audit rows and memory versions, in that order."""
    audit = await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    versions = await kernel.db.fetchval("SELECT count(*) FROM memories")
    return int(audit), int(versions)


def _json_headers(headers: dict[str, str]) -> dict[str, str]:
    return {**headers, "Content-Type": "application/json"}


@pytest.mark.parametrize("odd", ODD_INPUTS, ids=ODD_IDS)
@pytest.mark.parametrize("trust", [TrustLevel.STANDARD, TrustLevel.RESTRICTED])
async def test_odd_input_to_create_is_a_422_audited_once_and_changes_nothing(
    api: Api, kernel: Kernel, odd: OddInput, trust: TrustLevel
) -> None:
    """A proposal with a NUL, a lone surrogate, NaN, an instant beyond UTC or 500-deep
    metadata is a 422 Gate rejection naming the field, with exactly one audit row."""
    headers = await api.agent("odd-writer", trust)
    audit, versions = await _counts(kernel)
    response = await api.client.post(
        "/v1/memories", content=odd.wire(), headers=_json_headers(headers)
    )
    body = assert_problem(response, 422)
    assert "urn:engram:problem:gate-rejected" == body["type"]
    assert "rejected" == body["decision"]
    assert ["schema"] == [check["name"] for check in body["failed_checks"]]
    assert odd.field in body["failed_checks"][0]["detail"]
    assert (audit + 1, versions) == await _counts(kernel)
    [entry] = await kernel.audit.search(decision="rejected", action="CREATE")
    assert body["decision_id"] == entry["decision_id"]
    assert (await kernel.audit.verify()).ok


@pytest.mark.parametrize("odd", ODD_INPUTS, ids=ODD_IDS)
async def test_odd_input_to_update_is_a_422_audited_once_and_changes_nothing(
    api: Api, kernel: Kernel, odd: OddInput
) -> None:
    """The same values sent as a PATCH leave one audited rejection and the record unchanged."""
    headers = await api.agent("odd-updater", TrustLevel.STANDARD)
    created = (await api.write(BELIEF, headers)).json()
    url = f"/v1/memories/{created['record_id']}"
    audit, versions = await _counts(kernel)
    response = await api.client.patch(
        url, content=odd.wire(odd.changes), headers={**_json_headers(headers), "If-Match": '"1"'}
    )
    body = assert_problem(response, 422)
    assert ["schema"] == [check["name"] for check in body["failed_checks"]]
    assert odd.field in body["failed_checks"][0]["detail"]
    assert (audit + 1, versions) == await _counts(kernel)
    read = await api.client.get(url, headers=headers)
    assert ('"1"', BELIEF["content"]) == (read.headers["etag"], read.json()["content"])


@pytest.mark.parametrize("bad", ["\x00", chr(0xD800), chr(0xDFFF)], ids=["nul", "high", "low"])
async def test_a_search_query_with_a_nul_or_lone_surrogate_is_a_422(api: Api, bad: str) -> None:
    """Search refuses a query or namespace no index can take with a 422 naming it, not a 500."""
    for body in (
        {"query": f"ledger{bad}database"},
        {"query": "ledger", "namespace": "ops" + bad},
        {"query": "ledger", f"field{bad}": 1},  # a problem naming this key must still encode
    ):
        response = await api.client.post(
            "/v1/search", content=json.dumps(body).encode(), headers=_json_headers(api.admin)
        )
        problem = assert_problem(response, 422)
        assert any(field in problem["detail"] for field in ("query", "namespace", "body"))


@pytest.mark.parametrize(
    ("instant", "statuses"),
    [
        ("9999-12-31T23:59:59-14:00", {422}),
        ("0001-01-01T00:00:00+14:00", {422}),
        ("0001-01-01T00:00:00Z", {200, 404}),
        ("0001-01-01T13:59:59-14:00", {200, 404}),
        ("9999-12-31T23:59:59.999999Z", {200, 404}),
    ],
)
async def test_as_of_instants_at_the_edges_of_time_are_answered_never_a_500(
    api: Api, instant: str, statuses: set[int]
) -> None:
    """As-of instants UTC cannot express are a 422; the earliest and latest ones answer."""
    created = (await api.write(BELIEF, api.admin)).json()
    url = f"/v1/memories/{created['record_id']}"
    for name in ("as_of_event", "as_of_ingestion"):
        read = await api.client.get(url, params={name: instant}, headers=api.admin)
        assert read.status_code in statuses, (name, read.text)
        found = await api.client.post(
            "/v1/search", json={"query": "ledger", name: instant}, headers=api.admin
        )
        assert found.status_code in statuses - {404}, (name, found.text)
    audit = await api.client.get("/v1/audit", params={"since": instant}, headers=api.admin)
    assert audit.status_code in statuses - {404}, audit.text


async def test_an_oversized_rejected_input_is_audited_as_an_excerpt_with_its_size_and_hash(
    api: Api, kernel: Kernel
) -> None:
    """A 600 KB proposal is refused and its audit row keeps an excerpt, the byte count and the
    SHA-256 of the input, not the whole input."""
    big = {**BELIEF, "content": "The ledger " + "x" * 600_000, "color": "blue"}
    response = await api.write(big, api.admin)
    body = assert_problem(response, 422)
    assert ["schema"] == [check["name"] for check in body["failed_checks"]]
    row = await kernel.db.fetchrow(
        "SELECT input_snapshot::text AS snapshot FROM librarian_audit WHERE decision_id = $1",
        uuid.UUID(body["decision_id"]),
    )
    assert row is not None
    assert len(row["snapshot"]) < AUDITED_EXCERPT_BYTES + 1024
    raw = json.loads(row["snapshot"])["raw"]
    assert {"excerpt", "bytes", "sha256", "truncated"} <= set(raw)
    assert raw["bytes"] > 600_000
    assert len(raw["excerpt"].encode()) <= AUDITED_EXCERPT_BYTES
    assert 64 == len(raw["sha256"])
    assert (await kernel.audit.verify()).ok


async def test_a_body_nested_deeper_than_the_parser_reads_is_an_audited_422(
    api: Api, kernel: Kernel
) -> None:
    """JSON nested 5000 levels deep cannot be parsed, yet it is refused like other input: a
    422 Gate rejection with one audit row keeping an excerpt of the body."""
    created = (await api.write(BELIEF, api.admin)).json()
    url = f"/v1/memories/{created['record_id']}"
    deep = b'{"type":"belief","metadata":' + b'{"a":' * 5000 + b"1" + b"}" * 5001
    headers = _json_headers(api.admin)
    audit, versions = await _counts(kernel)
    for response in (
        await api.client.post("/v1/memories", content=deep, headers=headers),
        await api.client.patch(url, content=deep, headers={**headers, "If-Match": '"1"'}),
    ):
        body = assert_problem(response, 422)
        assert ["schema"] == [check["name"] for check in body["failed_checks"]]
        assert "nested too deeply" in body["detail"]
        row = await kernel.db.fetchrow(
            "SELECT input_snapshot::text AS snapshot FROM librarian_audit WHERE decision_id = $1",
            uuid.UUID(body["decision_id"]),
        )
        assert row is not None
        assert json.loads(row["snapshot"])["raw"]["truncated"]
    assert (audit + 2, versions) == await _counts(kernel)


async def test_a_body_over_the_size_limit_is_a_413_problem_that_stores_nothing(
    api: Api, kernel: Kernel
) -> None:
    """A 10 MB body is refused with 413 before it is read whole; nothing is written."""
    counts = await _counts(kernel)
    huge = json.dumps({**BELIEF, "content": "x" * 10_000_000}).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for at in range(0, len(huge), 65_536):
            yield huge[at : at + 65_536]

    for url in ("/v1/memories", "/v1/search", "/mcp"):
        for content in (huge, chunks()):  # a declared length, then none (chunked)
            response = await api.client.post(url, content=content, headers=_json_headers(api.admin))
            body = assert_problem(response, 413)
            assert "urn:engram:problem:payload-too-large" == body["type"]
            assert BODY_LIMIT_BYTES == body["max_bytes"]
    assert counts == await _counts(kernel)


async def test_malformed_json_and_a_malformed_if_match_are_400(api: Api, kernel: Kernel) -> None:
    """A body that is not JSON and an If-Match that names no version are 400 bad requests."""
    created = (await api.write(BELIEF, api.admin)).json()
    url = f"/v1/memories/{created['record_id']}"
    raw = _json_headers(api.admin)
    for response in (
        await api.client.post("/v1/memories", content=b'{"type": "belief",', headers=raw),
        await api.client.post("/v1/memories", content=b"\xff\xfe{}", headers=raw),
        await api.client.post("/v1/search", content=b"{", headers=raw),
        await api.client.patch(url, content=b"{", headers={**raw, "If-Match": '"1"'}),
    ):
        assert "urn:engram:problem:bad-request" == assert_problem(response, 400)["type"]
    for bad in ("9" * 65, '"' + "1" * 100 + '"', "abc"):
        response = await api.client.patch(
            url, json={"content": "x"}, headers={**api.admin, "If-Match": bad}
        )
        assert "urn:engram:problem:bad-if-match" == assert_problem(response, 400)["type"]


DEEP_JSON = b'{"a":' * 60 + b"1" + b"}" * 60


@pytest.mark.parametrize(
    ("arguments", "audited"),
    [
        (b'"content":"The ledger runs here.","source_confidence":NaN', 1),
        (b'"content":"The ledger runs \\u0000 here."', 1),
        (b'"content":"The ledger runs here.","metadata":{"deep":' + DEEP_JSON + b"}", 1),
        (b'"content":"The ledger runs \\ud800 here."', 0),
        (b'"content":"The ledger runs here.","metadata":{"\\udfff":1}', 0),
    ],
    ids=["nan", "nul", "deep", "surrogate", "surrogate-key"],
)
async def test_odd_tool_arguments_over_mcp_http_are_refused_never_a_5xx(
    api: Api, kernel: Kernel, arguments: bytes, audited: int
) -> None:
    """Over /mcp, odd remember arguments are an audited rejection, or (lone surrogates, which
    the MCP SDK's JSON parser refuses) a JSON-RPC parse error before any tool runs."""
    headers = {**_json_headers(api.admin), "Accept": "application/json, text/event-stream"}
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"remember",'
    body = call + b'"arguments":{"type":"belief",' + arguments + b"}}}"
    audit, versions = await _counts(kernel)
    response = await api.client.post("/mcp", content=body, headers=headers)
    if audited:
        assert 200 == response.status_code, response.text
        result = response.json()["result"]
        assert result["isError"]
        assert "rejected" == result["structuredContent"]["decision"]
    else:
        assert 400 == response.status_code, response.text
        assert -32700 == response.json()["error"]["code"]
    assert (audit + audited, versions) == await _counts(kernel)
