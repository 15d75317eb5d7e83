"""Hostile pass P: probes of the newest code that held (the attack and what was checked).

Real embedded PostgreSQL, the real embedding model, no mocks."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any
from uuid import UUID

from engram.memory.types import TrustLevel
from engram.protocols.inprocess import AgentSession
from engram.protocols.views import result_view, search_view
from tests.conftest import ScratchDatabase
from tests.integration.lost_ack import UPDATE_AT_ONCE, with_lost_ack
from tests.integration.test_hostile_pass_p import slow_crafted
from tests.integration.test_reader_versions import C1, C2, C3, C4, FAST, _belief, _gapped
from tests.integration.twin_helpers import Store, differences, normalised, twin_a, twin_b

__all__ = ["twin_a", "twin_b"]

LEAKY = f"{C4} Page the on-call at dana.whitfield@northwind-logistics.com first."
QUERY = "incident bridge payments outage room"


async def _setup(store: Store, *, gap: bool) -> tuple[UUID, datetime]:
    """The writer's record; the trusted agent's update to C2 (at agent level). With ``gap``,
    the trusted agent first raises it to sensitive with other content (a version hidden from
    the writer). Returns the record and an instant inside the hidden version's interval (in
    the store without it: the same place in the steps, before the update)."""
    await store.agent("boss", TrustLevel.TRUSTED, writes_per_minute=FAST)
    await store.agent("writer", TrustLevel.STANDARD, writes_per_minute=FAST)
    writer = AgentSession(store.kernel, store.principals["writer"].caller)
    written = await writer.remember(_belief(C1))
    assert written.record_id is not None, written.reason
    boss = AgentSession(store.kernel, store.principals["boss"].caller)
    expected = 1
    if gap:
        raised = await boss.update(
            written.record_id, _belief(f"{C3} Only for the board.", "sensitive"), expected_version=1
        )
        assert raised.approved, raised.reason
        expected = 2
    await asyncio.sleep(0.01)
    inside = datetime.now().astimezone()
    await asyncio.sleep(0.01)
    lowered = await boss.update(written.record_id, _belief(C2), expected_version=expected)
    assert lowered.approved, lowered.reason
    await store.kernel.events.settled()
    return written.record_id, inside


async def _http(store: Store, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
    headers = {**store.headers["writer"], **kwargs.pop("headers", {})}
    response = await store.client.request(method, url, headers=headers, **kwargs)
    return {"status": response.status_code, "etag": response.headers.get("etag"), **response.json()}


async def _tool(store: Store, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await store.tools.call(name, arguments, store.principals["writer"])
    return {"error": result.is_error, **(result.structured_content or {})}


async def _writers_transcript(store: Store, record_id: UUID, inside: datetime) -> list[Any]:
    """Everything the writer gets from reads and writes of its record, through each adapter."""
    url = f"/v1/memories/{record_id}"
    rid = str(record_id)
    writer = AgentSession(store.kernel, store.principals["writer"].caller)
    caller = store.principals["writer"].caller
    out: list[Any] = [
        await _http(store, "GET", url),
        await _http(store, "GET", f"{url}/versions"),
        await _http(store, "GET", url, params={"as_of_ingestion": inside.isoformat()}),
        await _tool(store, "history", {"record_id": rid}),
        await _tool(store, "get", {"record_id": rid, "as_of_ingestion": inside.isoformat()}),
        await _tool(store, "list", {"limit": 5}),
        search_view(
            await store.kernel.retrieval.search(caller, QUERY, include_superseded=True, limit=5)
        ),
        search_view(
            await store.kernel.retrieval.search(caller, QUERY, as_of_ingestion=inside, limit=5)
        ),
        # stale numbers: the writer's 1, and 3 (the stored number of the head behind the gap)
        await _http(store, "PATCH", url, json={"content": C3}, headers={"If-Match": '"1"'}),
        await _http(store, "PATCH", url, json={"content": C3}, headers={"If-Match": '"3"'}),
        await _tool(store, "update", {"record_id": rid, "expected_version": 3, "content": C3}),
        result_view(await writer.update(record_id, _belief(C3), expected_version=1)),
        await _http(store, "DELETE", url, headers={"If-Match": '"3"'}),
    ]
    patch = {"If-Match": '"2"', "Idempotency-Key": "held-1"}
    # an update in the writer's numbering, and its replay
    out.append(await _http(store, "PATCH", url, json={"content": C3}, headers=patch))
    out.append(await _http(store, "PATCH", url, json={"content": C3}, headers=patch))
    for _ in range(2):  # quarantined above the writer, and its replay
        update = await writer.update(record_id, _belief(LEAKY), expected_version=3, request_id="q")
        out.append(result_view(update))
    out += [
        await _http(store, "GET", url),
        await _http(store, "PATCH", url, json={"content": C1}, headers={"If-Match": '"4"'}),
        await _tool(store, "update", {"record_id": rid, "expected_version": 4, "content": C1}),
        await _tool(store, "forget", {"record_id": rid, "expected_version": 4}),
        await _tool(store, "history", {"record_id": rid}),
    ]
    return out


async def test_a_hidden_version_changes_nothing_the_writer_gets(
    twin_a: Store, twin_b: Store
) -> None:
    """Store B holds a version of the writer's record hidden from it (raised to sensitive,
    then lowered by the trusted agent with the content store A's single update gives).
    Reads (now, as of an instant inside the hidden interval, history, listing, history and
    as-of searches), stale If-Match and expected versions (including the head's stored
    number), an update in the writer's numbering and its replay, a quarantined update and
    its replay, and the writes after it vanished from the writer's view all answer alike,
    through REST, MCP and in process."""
    a_id, a_inside = await _setup(twin_a, gap=False)
    b_id, b_inside = await _setup(twin_b, gap=True)
    a = normalised(await _writers_transcript(twin_a, a_id, a_inside))
    b = normalised(await _writers_transcript(twin_b, b_id, b_inside))
    assert [] == differences(a, b)


#: Pieces a crafted record is made of, filling the content and the metadata to their limits:
#: number words of several languages, emoji, keycap and look-alike digits, BIP-39 words,
#: base58, nested quotes, odd characters (NUL, lone surrogates, combining marks, RTL
#: overrides, zero-width joiners between digits), secret names without values.
CRAFTED = (
    "one two three four five six seven eight nine zero ",
    "uno dos tres cuatro cinco seis siete ocho nueve cero ",
    "null eins zwei drei vier fünf sechs sieben acht neun ",
    "un un un un un x ",
    "s\u0131f\u0131r bir iki üç dört beş alt\u0131 yedi sekiz dokuz ",
    "1\ufe0f\u20e32\ufe0f\u20e33\ufe0f\u20e3 ",
    "1😀2😀3😀4😀5😀6😀7😀8😀9😀0😀",
    "lOIOl0SBlOIZ ",
    "abandon ability able about above absent absorb abstract absurd abuse access accident ",
    "5HueCGU8rMjxEXxiPuD5BDku4MkFqeZyd4dZ1jvhTVqvbTLvyTJ ",
    '"\'"\'`"password = "\'',
    "1 2 3 4 5 6 7 8 9 0 ",
    "a\x00b1\x002\x00",
    "1\ud8002\udc00 ",
    "1\u03012\u03013\u0301 ",
    "\u202e1234\u202c ",
    "1\u200d2\u200d3\u200d4\u200d",
    "john dot smith at gmail dot com ",
    "k a y l a h . m o s s @ ",
    "private key secret key pk: ",
    "1:2:3:4.5.6.",
)


def test_the_screen_of_crafted_records_of_the_largest_size_costs_about_prose() -> None:
    """Each crafted record of the largest size an adapter accepts (content 16,000
    characters, metadata 16 KiB) is screened in under half a second and under ten times the
    time of prose of that size (after this pass's two fixes; measured here at 0.03 to 0.15 s
    against 0.05 s for prose)."""
    prose, slow = slow_crafted(CRAFTED)
    assert [] == slow, prose


async def test_an_update_through_a_gap_whose_commit_acknowledgement_is_lost_is_told_alike(
    twin_a: Store, database: ScratchDatabase
) -> None:
    """The writer's update through a gap (its number 2 behind a hidden version), quarantined
    above it for an address, has its commit's acknowledgement cut (the backend terminated
    while the one-statement update's commit waits for a standby). The answer rebuilt from
    the audit row, and the retry under the same request id, both say "stored as version 3"
    (the writer's number), leave out the record it may no longer read, and the version is
    stored once."""
    record_id, _ = await _gapped(twin_a)
    writer = AgentSession(twin_a.kernel, twin_a.principals["writer"].caller)
    first = await with_lost_ack(
        database.admin_url,
        writer.update(record_id, _belief(LEAKY), expected_version=2, request_id="lost-1"),
        UPDATE_AT_ONCE,
    )
    assert first.approved, first.reason
    assert first.reason.startswith("stored as version 3"), first.reason
    assert first.version in (3, None)
    again = await writer.update(record_id, _belief(LEAKY), expected_version=2, request_id="lost-1")
    assert (again.replayed, again.reason, again.version) == (True, first.reason, None)
    boss = twin_a.principals["boss"].caller
    chain = await twin_a.kernel.temporal.get_version_chain(record_id, caller=boss)
    assert [1, 2, 3, 4] == [v.version for v in chain]
    assert (LEAKY, "sensitive") == (chain[-1].content, chain[-1].access_level.value)
