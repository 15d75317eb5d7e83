"""Hostile pass AK, what held: attacks that found nothing, pinned. Real embedded PostgreSQL
and the real embedding model, no mocks.

The differential tests of earlier passes compare two stores up to fresh ids *and instants*,
so an instant that moves because of a hidden write (an ``updated_at`` touched, a validity or
ingestion interval closed, a decay refreshed) passes them. These compare one store with
itself, before and after hidden writes, with every instant kept.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from engram.memory.types import TrustLevel
from tests.integration.twin_helpers import Store, twin_a

__all__ = ["twin_a"]

FAST = 100_000.0
LEDGER = "The ledger service runs on PostgreSQL 16 in the Frankfurt region."
VISIBLE = [
    LEDGER,
    "The staging cluster runs Kubernetes 1.29 on three nodes.",
    "The ledger team answers questions in the ops channel.",
]
#: A duplicate, a paraphrase, a contradiction and a stated change of LEDGER.
HIDDEN = [
    LEDGER,
    "Ledger is hosted on PostgreSQL 16 in Frankfurt.",
    "The ledger service runs on PostgreSQL 17 in the Frankfurt region.",
    "The ledger service moved to PostgreSQL 17 in the Frankfurt region last week.",
]
PII = "The ledger PostgreSQL upgrade contact is Dana Whitfield, dana.whitfield@example.com."
QUERIES = ["which database does the ledger use", "ledger PostgreSQL Frankfurt"]
SEARCHES: list[dict[str, Any]] = [
    {},
    {"min_score": 0.0, "limit": 2},
    {"min_score": 0.0, "include_superseded": True},
    {"min_score": 0.0, "include_consolidated": True, "types": ["belief"]},
]


def _kept(value: Any) -> Any:
    """``value`` without the timings of the request itself."""
    if isinstance(value, dict):
        return {k: _kept(v) for k, v in value.items() if k not in {"embed_ms", "query_ms"}}
    if isinstance(value, list):
        return [_kept(v) for v in value]
    return value


async def _everything(store: Store, name: str, ids: list[str], at: str) -> list[Any]:
    """All ``name`` reads of the visible records now and as of ``at``, on REST and MCP."""
    principal, headers = store.principals[name], store.headers[name]
    out: list[Any] = []
    for record_id in ids:
        for path in (
            f"/v1/memories/{record_id}",
            f"/v1/memories/{record_id}/versions",
            f"/v1/memories/{record_id}?as_of_ingestion={quote(at)}",
            f"/v1/memories/{record_id}?as_of_event={quote(at)}",
        ):
            response = await store.client.get(path, headers=headers)
            out.append([path, response.status_code, response.json()])
        for tool in ("get", "history"):
            result = await store.tools.call(tool, {"record_id": record_id}, principal)
            out.append([tool, result.structured_content])
    for query in QUERIES:
        for options in [*SEARCHES, {"min_score": 0.0, "as_of_ingestion": at}]:
            body = {"query": query, **options}
            response = await store.client.post("/v1/search", json=body, headers=headers)
            out.append([body, response.status_code, response.json()])
            result = await store.tools.call("recall", body, principal)
            out.append([body, result.structured_content])
    for arguments in ({}, {"limit": 2}, {"limit": 1, "types": ["belief"]}):
        result = await store.tools.call("list", arguments, principal)
        out.append(["list", arguments, result.structured_content])
    return _kept(json.loads(json.dumps(out, default=str)))


async def test_hidden_writes_touch_no_instant_or_field_of_what_a_reader_gets(
    twin_a: Store,
) -> None:
    """A standard writer's three records are read by it and by a restricted agent on every
    read path. Then records they may not read arrive: the trusted agent's sensitive
    duplicate, paraphrase, contradiction and stated change of one of them, each citing it as
    evidence, and a quarantined write naming the same service; then another standard
    agent's user-level copies (hidden from the restricted agent only). Every answer, read
    again, is the same to the byte: ids, versions, scores, ranks, statuses, repetitions,
    decay scores, validity and ingestion intervals and ``updated_at`` alike."""
    store = twin_a
    await store.agent("boss", TrustLevel.TRUSTED, writes_per_minute=FAST)
    await store.agent("writer", TrustLevel.STANDARD, writes_per_minute=FAST)
    await store.agent("other", TrustLevel.STANDARD, writes_per_minute=FAST)
    await store.agent("intern", TrustLevel.RESTRICTED, writes_per_minute=FAST)
    ids = []
    for content in VISIBLE:
        body = {"type": "belief", "content": content, "access_level": "agent"}
        response = await store.client.post(
            "/v1/memories", json=body, headers=store.headers["writer"]
        )
        assert response.status_code == 201, response.text
        ids.append(response.json()["record_id"])
    await store.kernel.events.settled()
    at = datetime.now(UTC).isoformat()
    readers = ("writer", "intern")
    before = {name: await _everything(store, name, ids, at) for name in readers}

    await _hidden(store, "boss", "sensitive", ids[0])
    body = {"type": "belief", "content": PII, "access_level": "agent"}
    response = await store.client.post("/v1/memories", json=body, headers=store.headers["other"])
    assert response.json()["record"]["access_level"] == "sensitive", response.text
    await store.kernel.events.settled()
    assert before == {name: await _everything(store, name, ids, at) for name in readers}

    # user-level records: hidden from the restricted agent only
    await _hidden(store, "other", "user", ids[0])
    await store.kernel.events.settled()
    assert before["intern"] == await _everything(store, "intern", ids, at)


async def _hidden(store: Store, writer: str, level: str, cited: str) -> None:
    for content in HIDDEN:
        body = {
            "type": "belief",
            "content": content,
            "access_level": level,
            "evidence_links": [cited],
        }
        response = await store.client.post("/v1/memories", json=body, headers=store.headers[writer])
        assert response.status_code in (200, 201), response.text


async def test_a_sensitive_interlude_reads_as_the_version_before_it_at_every_instant(
    twin_a: Store,
) -> None:
    """The writer's record, then a trusted agent's version at ``sensitive`` (another content),
    then its version back at agent level. At an instant inside the sensitive interlude the
    writer reads, on REST and MCP, exactly what it read just before it (the same version,
    known until the next version it may read), by ingestion and by event time; its chain has
    two versions numbered 1 and 2, and a stale ``If-Match`` is answered with its own number."""
    store = twin_a
    await store.agent("boss", TrustLevel.TRUSTED, writes_per_minute=FAST)
    await store.agent("writer", TrustLevel.STANDARD, writes_per_minute=FAST)
    writer, boss = store.headers["writer"], store.headers["boss"]
    body = {"type": "belief", "content": LEDGER, "event_time": "2026-03-01T00:00:00+00:00"}
    response = await store.client.post("/v1/memories", json=body, headers=writer)
    record_id = response.json()["record_id"]
    before = datetime.now(UTC).isoformat()
    changes = [
        ("sensitive", HIDDEN[2], "2026-04-01T00:00:00+00:00"),
        ("agent", HIDDEN[3], "2026-05-01T00:00:00+00:00"),
    ]
    marks = []
    for number, (level, content, event) in enumerate(changes, start=1):
        patch = {"content": content, "access_level": level, "event_time": event}
        headers = {**boss, "If-Match": f'"{number}"'}
        response = await store.client.patch(
            f"/v1/memories/{record_id}", json=patch, headers=headers
        )
        assert response.status_code == 200, response.text
        marks.append(datetime.now(UTC).isoformat())

    async def read(ingestion: str, event: str | None = None) -> list[Any]:
        query = f"as_of_ingestion={quote(ingestion)}"
        query += f"&as_of_event={quote(event)}" if event else ""
        rest = await store.client.get(f"/v1/memories/{record_id}?{query}", headers=writer)
        arguments = {"record_id": record_id, "as_of_ingestion": ingestion}
        arguments |= {"as_of_event": event} if event else {}
        tool = await store.tools.call("get", arguments, store.principals["writer"])
        assert rest.status_code == 200, rest.text
        assert not tool.is_error, tool.content
        assert rest.json()["content"] == LEDGER
        return [rest.json(), tool.structured_content]

    for event in (None, "2026-04-15T00:00:00+00:00"):
        assert await read(before, event) == await read(marks[0], event)
    chain = (await store.client.get(f"/v1/memories/{record_id}/versions", headers=writer)).json()
    assert [1, 2] == [v["version"] for v in chain["versions"]]
    assert [LEDGER, HIDDEN[3]] == [v["content"] for v in chain["versions"]]
    stale = await store.client.patch(
        f"/v1/memories/{record_id}",
        json={"content": HIDDEN[1]},
        headers={**writer, "If-Match": '"1"'},
    )
    assert (409, 2) == (stale.status_code, stale.json()["current_version"])
