"""A caller's version numbers: the versions of a record it may read, numbered 1, 2, 3… with
no gap, with intervals running from one to the next it may read (ADR-009, amended
2026-11-27). Reads, as-of reads, If-Match, the Gate's answers and audit replay all use that
numbering; a caller cleared for every level sees the stored numbers. Real embedded PostgreSQL
and the real embedding model, no mocks."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any
from uuid import UUID

from engram.memory.types import TrustLevel
from engram.protocols.inprocess import AgentSession
from tests.integration.twin_helpers import Store, twin_a

__all__ = ["twin_a"]

FAST = 100_000.0
C1 = "The incident bridge for the payments outage is room Orion on floor nine."
C2 = "The incident bridge for the payments outage is room Orion on floor nine. Bring a badge."
C3 = "The incident bridge for the payments outage is room Vega on floor two."
C4 = "The incident bridge for the payments outage is room Lyra on floor four."


def _belief(content: str, level: str = "agent") -> dict[str, Any]:
    return {"type": "belief", "content": content, "access_level": level}


async def _gapped(store: Store) -> tuple[UUID, datetime]:
    """The writer's record (v1), raised to sensitive by the trusted agent (v2, hidden from the
    writer) and lowered again with new content (v3). Returns the record and an instant inside
    the hidden version's ingestion interval."""
    await store.agent("boss", TrustLevel.TRUSTED, writes_per_minute=FAST)
    await store.agent("writer", TrustLevel.STANDARD, writes_per_minute=FAST)
    written = await AgentSession(store.kernel, store.principals["writer"].caller).remember(
        _belief(C1)
    )
    assert written.record_id is not None, written.reason
    boss = AgentSession(store.kernel, store.principals["boss"].caller)
    raised = await boss.update(written.record_id, _belief(C1, "sensitive"), expected_version=1)
    assert 2 == raised.version, raised.reason
    await asyncio.sleep(0.01)
    assert raised.modified_record is not None
    inside = raised.modified_record.ingestion_time
    await asyncio.sleep(0.01)
    lowered = await boss.update(written.record_id, _belief(C2), expected_version=2)
    assert 3 == lowered.version, lowered.reason
    return written.record_id, inside


def _writer(store: Store) -> AgentSession:
    return AgentSession(store.kernel, store.principals["writer"].caller)


async def test_the_chain_numbers_readable_versions_without_a_gap(twin_a: Store) -> None:
    """The writer's chain is versions 1 and 2; version 1 is known until version 2 (the one it
    may read next) was written and is superseded by it; the trusted agent sees 1, 2, 3."""
    record_id, _ = await _gapped(twin_a)
    writer = twin_a.principals["writer"].caller
    chain = await twin_a.kernel.temporal.get_version_chain(record_id, caller=writer)
    assert [1, 2] == [v.version for v in chain]
    assert chain[1].ingestion_time == chain[0].ingestion_time_end
    assert chain[1].id == chain[0].superseded_by
    boss = twin_a.principals["boss"].caller
    full = await twin_a.kernel.temporal.get_version_chain(record_id, caller=boss)
    assert [1, 2, 3] == [v.version for v in full]
    assert full[1].ingestion_time == full[0].ingestion_time_end
    headers = twin_a.headers["writer"]
    response = await twin_a.client.get(f"/v1/memories/{record_id}/versions", headers=headers)
    assert [1, 2] == [v["version"] for v in response.json()["versions"]]
    response = await twin_a.client.get(f"/v1/memories/{record_id}", headers=headers)
    assert ('"2"', 2) == (response.headers["etag"], response.json()["version"])
    tool = await twin_a.tools.call(
        "get", {"record_id": str(record_id)}, twin_a.principals["writer"]
    )
    assert not tool.is_error
    assert 2 == tool.structured_content["record"]["version"]


async def test_searches_show_the_readers_numbers(twin_a: Store) -> None:
    """A search hit and a history search carry the writer's numbers; the trusted agent's the
    stored ones."""
    record_id, inside = await _gapped(twin_a)
    await twin_a.kernel.events.settled()
    retrieval = twin_a.kernel.retrieval
    writer = twin_a.principals["writer"].caller
    found = await retrieval.search(writer, "incident bridge payments outage room", limit=3)
    assert [2] == [h.record.version for h in found.hits if h.record.record_id == record_id]
    history = await retrieval.search(
        writer, "incident bridge payments outage room", include_superseded=True, limit=10
    )
    assert [1, 2] == sorted(
        h.record.version for h in history.hits if h.record.record_id == record_id
    )
    as_of = await retrieval.search(
        writer, "incident bridge payments outage room", as_of_ingestion=inside, limit=3
    )
    assert [(1, C1)] == [
        (h.record.version, h.record.content) for h in as_of.hits if h.record.record_id == record_id
    ]
    boss = twin_a.principals["boss"].caller
    found = await retrieval.search(boss, "incident bridge payments outage room", limit=3)
    assert [3] == [h.record.version for h in found.hits if h.record.record_id == record_id]


async def test_an_as_of_read_inside_a_hidden_interval_answers_the_readers_version(
    twin_a: Store,
) -> None:
    """At an instant the hidden version was the kernel's belief, the writer gets its version 1
    (whose shown interval covers that instant); the trusted agent gets the hidden version."""
    record_id, inside = await _gapped(twin_a)
    temporal = twin_a.kernel.temporal
    writer = twin_a.principals["writer"].caller
    [read] = await temporal.query(record_id=record_id, as_of_ingestion=inside, caller=writer)
    assert (1, C1, "agent") == (read.version, read.content, read.access_level.value)
    chain = await temporal.get_version_chain(record_id, caller=writer)
    assert read.ingestion_time_end == chain[0].ingestion_time_end
    assert read.ingestion_time_end is not None
    assert inside < read.ingestion_time_end
    history = await temporal.query(
        record_id=record_id, as_of_ingestion=inside, include_superseded=True, caller=writer
    )
    assert [1] == [v.version for v in history]
    listing = await temporal.query(as_of_ingestion=inside, caller=writer)
    assert [(1, C1)] == [(r.version, r.content) for r in listing if r.record_id == record_id]
    boss = twin_a.principals["boss"].caller
    [full] = await temporal.query(record_id=record_id, as_of_ingestion=inside, caller=boss)
    assert (2, "sensitive") == (full.version, full.access_level.value)


async def test_if_match_is_read_in_the_readers_numbering(twin_a: Store) -> None:
    """The writer's If-Match "2" names the head (stored 3): the PATCH succeeds and answers its
    version 3 (stored 4) with that ETag; the in-process UPDATE with its 3 answers 4; a stale
    number gets 409 with the writer's current number, over REST and MCP."""
    record_id, _ = await _gapped(twin_a)
    headers = twin_a.headers["writer"]
    patched = await twin_a.client.patch(
        f"/v1/memories/{record_id}",
        json={"content": C3},
        headers={**headers, "If-Match": '"2"'},
    )
    assert 200 == patched.status_code, patched.json()
    body = patched.json()
    assert (3, '"3"', 3) == (body["version"], patched.headers["etag"], body["record"]["version"])
    assert "stored as version 3" in body["reason"]
    result = await _writer(twin_a).update(record_id, _belief(C4), expected_version=3)
    assert (4, 4) == (result.version, result.modified_record and result.modified_record.version)
    stale = await twin_a.client.patch(
        f"/v1/memories/{record_id}",
        json={"content": C1},
        headers={**headers, "If-Match": '"2"'},
    )
    assert 409 == stale.status_code
    assert 4 == stale.json()["current_version"]
    assert "current version is 4" in stale.json()["detail"]
    tool = await twin_a.tools.call(
        "update",
        {"record_id": str(record_id), "expected_version": 3, "content": C1},
        twin_a.principals["writer"],
    )
    assert tool.is_error
    assert 4 == tool.structured_content["current_version"]
    boss = twin_a.principals["boss"].caller
    stored = await twin_a.kernel.temporal.get_version_chain(record_id, caller=boss)
    assert [1, 2, 3, 4, 5] == [v.version for v in stored]
    assert [C1, C1, C2, C3, C4] == [v.content for v in stored]


async def test_a_caller_cleared_for_every_level_sees_the_stored_numbers(twin_a: Store) -> None:
    """The trusted agent's If-Match and answers are the stored numbers."""
    record_id, _ = await _gapped(twin_a)
    headers = twin_a.headers["boss"]
    response = await twin_a.client.get(f"/v1/memories/{record_id}", headers=headers)
    assert '"3"' == response.headers["etag"]
    patched = await twin_a.client.patch(
        f"/v1/memories/{record_id}",
        json={"content": C3},
        headers={**headers, "If-Match": '"3"'},
    )
    assert (200, 4) == (patched.status_code, patched.json()["version"])
    stale = await twin_a.client.patch(
        f"/v1/memories/{record_id}",
        json={"content": C4},
        headers={**headers, "If-Match": '"3"'},
    )
    assert (409, 4) == (stale.status_code, stale.json()["current_version"])


async def test_replay_decides_the_readers_writes_as_the_gate_did(twin_a: Store) -> None:
    """The writer's writes through a gap (an If-Match in its numbering, approved; a stale one,
    a conflict; a FORGET naming its number) replay to the same verdicts."""
    record_id, _ = await _gapped(twin_a)
    writer = _writer(twin_a)
    assert (await writer.update(record_id, _belief(C3), expected_version=2)).approved
    stale = await writer.update(record_id, _belief(C4), expected_version=2)
    assert ("conflict", 3) == (stale.decision.value, stale.current_version)
    forgot = await writer.forget(record_id, expected_version=3)
    assert forgot.approved, forgot.reason
    report = await twin_a.kernel.replay.replay()
    assert [] == [d.to_json() for d in report.changed]
    mine = [d for d in report.decisions if d.agent_id == "writer" and d.action != "CREATE"]
    assert ["approved", "conflict", "approved"] == [d.recorded.decision for d in mine]
    assert [d.recorded.decision for d in mine] == [
        d.replayed.decision for d in mine if d.replayed is not None
    ]


async def test_concurrent_updates_through_a_gap_store_one_and_tell_the_other_its_number(
    twin_a: Store,
) -> None:
    """Eight updates by the writer race on its number 2 (stored v3, behind a hidden v2): one
    is stored, as the writer's 3 (stored v4); each other one is a conflict that names the
    current version in the writer's numbering, never a stored number, and nothing is lost."""
    record_id, _ = await _gapped(twin_a)
    writer = _writer(twin_a)
    contents = [f"{C3} Racer {i}." for i in range(8)]
    results = await asyncio.gather(
        *(writer.update(record_id, _belief(c), expected_version=2) for c in contents)
    )
    approved = [r for r in results if r.decision.value == "approved"]
    assert 1 == len(approved), [r.reason for r in results]
    assert 3 == approved[0].version
    for result in results:
        if result is not approved[0]:
            assert "conflict" == result.decision.value, result.reason
            assert result.current_version in (None, 3), result.reason
            assert "current version is 4" not in result.reason
    chain = await twin_a.kernel.temporal.get_version_chain(
        record_id, caller=twin_a.principals["writer"].caller
    )
    assert [1, 2, 3] == [v.version for v in chain]
    boss = twin_a.principals["boss"].caller
    full = await twin_a.kernel.temporal.get_version_chain(record_id, caller=boss)
    assert [1, 2, 3, 4] == [v.version for v in full]
