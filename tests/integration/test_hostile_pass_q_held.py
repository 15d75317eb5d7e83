"""Hostile pass Q: probes of the newest code that held (the attack and what was checked).

Real embedded PostgreSQL, the real embedding model, no mocks."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID, uuid4

from engram import Kernel
from engram.errors import EngramError
from engram.memory.gate.access import caller_for_tier
from engram.memory.types import CallerIdentity, GateDecision, MemoryStatus, TrustLevel
from engram.protocols.inprocess import AgentSession
from engram.protocols.views import search_view
from tests.integration.consolidation_helpers import head_of
from tests.integration.gate_helpers import BOSS, INTERN, OTHER, WRITER
from tests.integration.race_helpers import broken_invariants
from tests.integration.test_layer2_hostile import V20, V21
from tests.integration.test_raised_claims import _escalated, _no_replay_changes, _superseded
from tests.integration.twin_helpers import (
    Store,
    differences,
    normalised,
    searched_through_rest_and_mcp,
    twin_a,
    twin_b,
)

__all__ = ["twin_a", "twin_b"]

FAST = 100_000.0
#: What the reader may read, in both stores (agent level, the default namespace).
VISIBLE = [
    "The quarterly invoice export runs from the Zephyr batch host every Friday night.",
    "Invoices for the Lisbon office are archived in the finance share for seven years.",
    "The billing team reconciles Stripe payouts against the ledger each Monday.",
    "Zephyr batch jobs page the platform on-call when an export fails twice.",
    "The staging database is refreshed from production every second Sunday.",
]
#: Records the reader may not read or find, in the second store only: above its level, in
#: another namespace, forgotten by it. They share the query's rare words and sit nearer it
#: than anything visible, so that if they took a place among the candidates or weighed a
#: word, the reader's hits, order, scores or relevance would move.
HIDDEN = [
    ("Zephyr invoice export host credentials rotate each quarter.", "user", "writer", "default"),
    ("The Zephyr invoice export batch host moved to rack 12.", "sensitive", "boss", "default"),
    ("Zephyr invoice export failures go to the CFO directly.", "system", "boss", "default"),
    ("The Zephyr invoice export batch host runs every Friday.", "agent", "writer", "other"),
]
FORGOTTEN = "The Zephyr invoice export batch host is decommissioned next Friday night."
QUERIES = [
    "when does the Zephyr invoice export run",
    "zephyr",
    "the of and a to",
    "!!! ... ??? ---",
    "zephyr & export | invoice:* !host 'batch'",
    "C:\\zephyr\\invoice's \\\\export\\",
    "Zephyr " * 285,
    "¿Cuándo se ejecuta la exportación de facturas Zephyr? 发票导出",
]
FLOORS: list[Any] = [0, 1, -0.0, 0.38, "0.5", "1e309", 1e-300, 0.9999999]


async def _setup(store: Store, *, hidden: bool) -> None:
    await store.agent("boss", TrustLevel.TRUSTED, writes_per_minute=FAST)
    await store.agent("writer", TrustLevel.STANDARD, writes_per_minute=FAST)
    await store.agent("reader", TrustLevel.RESTRICTED, writes_per_minute=FAST)
    sessions = {
        name: AgentSession(store.kernel, principal.caller)
        for name, principal in store.principals.items()
    }
    for content in VISIBLE:
        written = await sessions["writer"].remember({"type": "belief", "content": content})
        assert written.approved, written.reason
    if hidden:
        for content, level, author, namespace in HIDDEN:
            payload = {
                "type": "belief",
                "content": content,
                "access_level": level,
                "namespace": namespace,
            }
            written = await sessions[author].remember(payload)
            assert written.approved, written.reason
        mine = await sessions["reader"].remember({"type": "belief", "content": FORGOTTEN})
        assert mine.record_id is not None, mine.reason
        gone = await sessions["reader"].forget(mine.record_id, expected_version=1)
        assert gone.approved, gone.reason
    await store.kernel.events.settled()


def _bodies() -> list[dict[str, Any]]:
    """The REST bodies of :func:`_searches`, in its order."""
    return [{"query": q, "limit": 5, "min_score": f} for q in QUERIES for f in FLOORS]


async def _searches(store: Store) -> list[Any]:
    """Every search answer the reader gets, through REST, MCP and in process."""
    reader = store.principals["reader"]
    out: list[Any] = []
    for query in QUERIES:
        for body in [b for b in _bodies() if b["query"] == query]:
            out += await searched_through_rest_and_mcp(store, body)
        for floor in (0.0, 0.3, 1.0):
            found = await store.kernel.retrieval.search(
                reader.caller, query, limit=5, min_score=floor
            )
            out.append(search_view(found))
    return out


async def test_records_the_reader_may_not_find_change_no_search_answer(
    twin_a: Store, twin_b: Store
) -> None:
    """Held. The default search orders by the adapted question and weighs the query's words
    by their rarity among the candidates: records above the reader's level, in another
    namespace, or forgotten, nearer the query than anything it may read and sharing its rare
    words, change none of the reader's hits, their order, scores or relevance, through REST,
    MCP and in process, for ordinary queries, stopwords, punctuation, tsquery operators,
    backslashes and quotes, the longest query, other scripts, and floors at and around the
    edges (0, 1, -0.0, the text "0.5", "1e309" refused)."""
    await _setup(twin_a, hidden=False)
    await _setup(twin_b, hidden=True)
    a = normalised(await _searches(twin_a))
    b = normalised(await _searches(twin_b))
    assert [] == differences(a, b)
    rest = [item for item in a if "status" in item and "error" not in item]
    statuses = {(q["min_score"], r["status"]) for q, r in zip(_bodies(), rest, strict=True)}
    assert {("0.5", 200), ("1e309", 422), (1, 200), (-0.0, 200)} <= statuses
    assert any(item.get("hits") for item in a), "nothing was found at all"
    # the hidden records are there, among the nearest for a reader cleared for them
    boss = twin_b.principals["boss"].caller
    found = await twin_b.kernel.retrieval.search(boss, QUERIES[0], limit=4)
    assert len({hit.record.content for hit in found.hits} & {c for c, *_ in HIDDEN}) >= 2


async def _memory_access(store: Store, record_id: UUID) -> Any:
    await store.kernel.temporal.flush_reads()
    return await store.kernel.db.fetchrow(
        "SELECT access_count[5] AS access_count, last_accessed_at[5] AS last_accessed_at"
        " FROM memory_access WHERE record_id = $1",
        record_id,
    )


async def _attempts(store: Store, record_id: UUID) -> list[Any]:
    """What the reader gets from rating, reading and changing ``record_id``, through each
    adapter (the id itself written as ``<id>``)."""
    reader = store.principals["reader"]
    rid = str(record_id)
    headers = store.headers["reader"]
    out: list[Any] = []
    for key in (None, "rate-1", "rate-1"):
        extra = {} if key is None else {"Idempotency-Key": key}
        response = await store.client.post(
            "/v1/feedback",
            json={"record_id": rid, "useful": True},
            headers={**headers, **extra},
        )
        out.append({"status": response.status_code, **response.json()})
        tool = await store.tools.call("feedback", {"record_id": rid, "useful": True}, reader)
        out.append({"error": tool.is_error, **(tool.structured_content or {})})
        try:
            await store.kernel.retrieval.feedback(
                reader.caller, record_id, useful=True, request_id=key
            )
        except EngramError as exc:
            out.append({"error": type(exc).__name__, "message": str(exc)})
    for url in (f"/v1/memories/{rid}", f"/v1/memories/{rid}/versions"):
        response = await store.client.get(url, headers=headers)
        out.append({"status": response.status_code, **response.json()})
    for name in ("get", "history"):
        tool = await store.tools.call(name, {"record_id": rid}, reader)
        out.append({"error": tool.is_error, **(tool.structured_content or {})})
    return json.loads(json.dumps(out, default=str).replace(rid, "<id>"))


async def test_rating_or_reading_a_hidden_record_is_told_as_an_unknown_one_and_counts_nothing(
    twin_a: Store,
) -> None:
    """Held. A reader's rating (with and without an idempotency key, and its retry), read and
    history of a record above its level get exactly the answers an id nothing has gets,
    through REST, MCP and in process (same status, error type and message), and none of it
    counts as a read of the hidden record (its decay inputs stay untouched)."""
    await _setup(twin_a, hidden=False)
    boss = AgentSession(twin_a.kernel, twin_a.principals["boss"].caller)
    hidden = await boss.remember(
        {"type": "belief", "content": HIDDEN[1][0], "access_level": "sensitive"}
    )
    assert hidden.record_id is not None, hidden.reason
    reader = twin_a.principals["reader"].caller
    await twin_a.kernel.retrieval.search(reader, HIDDEN[1][0], limit=100)
    told_hidden = await _attempts(twin_a, hidden.record_id)
    told_unknown = await _attempts(twin_a, uuid4())
    assert told_unknown == told_hidden
    assert all(item.get("status", 404) == 404 for item in told_hidden), told_hidden
    assert await _memory_access(twin_a, hidden.record_id) is None
    # while the same reads of a record it may read do count
    [seen] = (await twin_a.kernel.retrieval.search(reader, VISIBLE[0], limit=1)).hits
    assert (await _memory_access(twin_a, seen.record.record_id))["access_count"] >= 1


async def _level_change(kernel: Kernel, caller: CallerIdentity, record_id: UUID, level: str) -> Any:
    """``caller``'s PATCH of ``record_id``'s access level (in process), its events delivered."""
    head = await head_of(kernel, record_id)
    session = AgentSession(kernel, caller)
    result = await session.amend(record_id, {"access_level": level}, expected_version=head.version)
    await kernel.events.settled()
    return result


async def _outbox(kernel: Kernel) -> dict[str, int]:
    rows = await kernel.db.fetch("SELECT event_type, count(*) AS n FROM outbox GROUP BY 1")
    return {row["event_type"]: row["n"] for row in rows}


async def test_a_level_change_by_a_caller_that_may_not_make_it_is_refused_and_undoes_nothing(
    kernel: Kernel,
) -> None:
    """Held. v2.1 ended v2.0's validity. A standard agent raising v2.1 above its ceiling, a
    restricted agent changing another's record, and a read-only agent are refused and
    audited; no level change is published, v2.0 stays ended, nothing is escalated."""
    older, newer = await _superseded(kernel)
    before = (await head_of(kernel, older), await head_of(kernel, newer), await _outbox(kernel))
    for caller, level in ((WRITER, "sensitive"), (OTHER, "system"), (INTERN, "public")):
        refused = await _level_change(kernel, caller, newer, level)
        assert GateDecision.REJECTED is refused.decision, refused.reason
        entry = await kernel.audit.by_decision(refused.decision_id)
        assert entry is not None
        assert GateDecision.REJECTED.value == entry.decision
    reader = caller_for_tier("agent-read-only", TrustLevel.READ_ONLY)
    refused = await _level_change(kernel, reader, newer, "public")
    assert GateDecision.REJECTED is refused.decision
    after = (await head_of(kernel, older), await head_of(kernel, newer), await _outbox(kernel))
    assert before == after
    assert [] == await _escalated(kernel)


async def test_raise_lower_raise_gives_the_restricted_reader_what_the_levels_say_each_time(
    kernel: Kernel,
) -> None:
    """Held. v2.1 raised, lowered and raised again: after each raise the restricted reader
    reads v2.0 open and active (v2.1 hidden), after the lowering ended by v2.1 again (the
    lowering, a PATCH, states the claim anew and is resolved as any write), and each raise
    put the conflict in front of a person once; the store's invariants hold and replay
    agrees."""
    older, newer = await _superseded(kernel)
    shown: list[Any] = []
    for level in ("sensitive", "agent", "sensitive"):
        changed = await _level_change(kernel, BOSS, newer, level)
        assert changed.approved, changed.reason
        seen = await kernel.temporal.current(older, caller=INTERN, count_read=False)
        assert seen is not None
        shown.append((seen.event_time_end, seen.status))
    opened = (None, MemoryStatus.ACTIVE)
    assert [opened, opened] == shown[::2]
    # the lowering states the claim anew (as of now: a PATCH does not carry the event time)
    assert shown[1][0] is not None
    assert MemoryStatus.ACTIVE is shown[1][1]
    assert 2 == len(await _escalated(kernel))
    assert [] == await broken_invariants(kernel)
    await _no_replay_changes(kernel)


async def test_a_raise_leaves_a_forgotten_record_forgotten_and_a_forgotten_one_is_not_raised(
    kernel: Kernel,
) -> None:
    """Held. With v2.0 forgotten, raising v2.1 restates nothing (v2.0 stays forgotten, no
    escalation); with v2.1 forgotten, the trusted agent's raise of it is refused as for an
    unknown record, audited, and publishes no level change."""
    older, newer = await _superseded(kernel)
    forgotten = await AgentSession(kernel, WRITER).forget(older, expected_version=2)
    assert forgotten.approved, forgotten.reason
    await kernel.events.settled()
    head = await head_of(kernel, older)
    raised = await _level_change(kernel, BOSS, newer, "sensitive")
    assert raised.approved, raised.reason
    assert head == await head_of(kernel, older)
    assert [] == await _escalated(kernel)

    older, newer = await _superseded(kernel, namespace="second")
    forgotten = await AgentSession(kernel, WRITER).forget(newer, expected_version=1)
    assert forgotten.approved, forgotten.reason
    await kernel.events.settled()
    published = await _outbox(kernel)
    refused = await AgentSession(kernel, BOSS).amend(
        newer, {"access_level": "sensitive"}, expected_version=2
    )
    await kernel.events.settled()
    assert GateDecision.REJECTED is refused.decision
    assert await kernel.audit.by_decision(refused.decision_id) is not None
    assert published == await _outbox(kernel)


async def test_an_undone_resolution_shows_the_lower_reader_nothing_of_the_hidden_claim(
    twin_a: Store,
) -> None:
    """Held. v2.1 ended v2.0; the trusted agent raises v2.1 to sensitive, the resolution is
    undone and escalated, and v2.1 marked challenged. Nothing the restricted reader gets
    about v2.0 or from searches and listings, through REST, MCP or in process, names v2.1's
    record, its versions or the decisions that wrote them, or holds its content; the
    admin's queue of conflicts is closed to it."""
    await _setup(twin_a, hidden=False)
    writer = AgentSession(twin_a.kernel, twin_a.principals["writer"].caller)
    older = await writer.remember(
        {"type": "belief", "content": V20, "event_time": "2025-03-01T09:00:00Z"}
    )
    newer = await writer.remember(
        {"type": "belief", "content": V21, "event_time": "2025-04-10T09:00:00Z"}
    )
    assert older.record_id is not None
    assert newer.record_id is not None
    await twin_a.kernel.events.settled()
    assert (await head_of(twin_a.kernel, older.record_id)).event_time_end is not None
    raised = await _level_change(
        twin_a.kernel, twin_a.principals["boss"].caller, newer.record_id, "sensitive"
    )
    assert raised.approved, raised.reason
    assert (await head_of(twin_a.kernel, older.record_id)).event_time_end is None
    hidden_ids = {
        str(v.id) for v in await twin_a.kernel.temporal.get_version_chain(newer.record_id)
    } | {str(newer.record_id), str(raised.decision_id), str(newer.decision_id)}
    hidden_ids |= {
        str(v.gate_decision_id)
        for v in await twin_a.kernel.temporal.get_version_chain(newer.record_id)
    }

    reader = twin_a.principals["reader"]
    headers = twin_a.headers["reader"]
    rid = str(older.record_id)
    urls = (f"/v1/memories/{rid}", f"/v1/memories/{rid}/versions", "/v1/memories")
    said: list[Any] = [(await twin_a.client.get(u, headers=headers)).json() for u in urls]
    body = {"query": "which version does the web app deploy", "limit": 10, "min_score": 0}
    said.append((await twin_a.client.post("/v1/search", json=body, headers=headers)).json())
    for name, arguments in (
        ("get", {"record_id": rid}),
        ("history", {"record_id": rid}),
        ("list", {"limit": 50}),
        ("recall", body),
    ):
        said.append((await twin_a.tools.call(name, arguments, reader)).structured_content)
    for superseded in (False, True):
        found = await twin_a.kernel.retrieval.search(
            reader.caller, body["query"], limit=10, include_superseded=superseded
        )
        said.append(search_view(found))
    text = json.dumps(said, default=str)
    assert [] == [item for item in hidden_ids if item in text]
    assert V21 not in text
    assert V20 in text
    conflicts = await twin_a.client.get("/v1/conflicts", headers=headers)
    assert 403 == conflicts.status_code
