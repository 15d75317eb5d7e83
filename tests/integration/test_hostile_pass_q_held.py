"""Hostile pass Q: probes of the newest code that held (the attack and what was checked).

Real embedded PostgreSQL, the real embedding model, no mocks."""

from __future__ import annotations

from typing import Any

from engram.memory.types import TrustLevel
from engram.protocols.inprocess import AgentSession
from engram.protocols.views import search_view
from tests.integration.twin_helpers import Store, differences, normalised, twin_a, twin_b

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
            response = await store.client.post(
                "/v1/search", json=body, headers=store.headers["reader"]
            )
            assert response.status_code < 500, response.text
            out.append({"status": response.status_code, **response.json()})
            tool = await store.tools.call("recall", body, reader)
            out.append({"error": tool.is_error, **(tool.structured_content or {})})
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
