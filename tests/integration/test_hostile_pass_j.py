"""Hostile pass J: differential tests. Two stores get the same visible setup and the same
caller operations; store B also holds records the caller may not read. Every answer the
caller gets must be the same in both, up to fresh ids, instants and timings. Real embedded
PostgreSQL and the real embedding model, no mocks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from engram.config import EMBEDDING_DIMENSION, EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.consolidation import ConsolidationTrigger
from engram.memory.types import AccessLevel, TrustLevel, WriteOutcome
from engram.protocols.inprocess import AgentSession
from engram.protocols.views import record_view, result_view, search_view
from engram.retrieval.search import Retrieval, SearchTuning
from tests.integration.consolidation_helpers import DAY, DEEP, INCIDENT, LATE_ETL, engine_with
from tests.integration.twin_helpers import Store, differences, normalised, twin_a, twin_b

__all__ = ["twin_a", "twin_b"]

FAST = 100_000.0
C1 = "The incident bridge for the payments outage is room Orion on floor nine."
PARA = "Payments outage incidents are bridged in room Orion, floor nine."
VEGA = "The incident bridge for the payments outage is room Vega on floor two."
DRILL = "The zyqbar failover drill runs every Thursday at noon."
DRILL_FRI = "The zyqbar failover drill runs every Friday at noon."
VISIBLE = [
    "The staging cluster runs Kubernetes 1.29 on three nodes.",
    "The quarterly report is due on the fifth working day.",
    "The incident bridge for payments outages is announced in the ops channel.",
    "The zyqbar service exports metrics to the shared Prometheus.",
]
PII = "Call Dana Whitfield at dana.whitfield@example.com about the zyqbar drill in room Orion."


def _belief(content: str, level: str = "agent", **extra: Any) -> dict[str, Any]:
    return {"type": "belief", "content": content, "access_level": level, **extra}


async def _agents(store: Store) -> None:
    await store.agent("boss", TrustLevel.TRUSTED, writes_per_minute=FAST)
    await store.agent("writer", TrustLevel.STANDARD, writes_per_minute=FAST)
    await store.agent("intern", TrustLevel.RESTRICTED, writes_per_minute=FAST)
    await store.agent("other", TrustLevel.STANDARD, writes_per_minute=FAST)


def _session(store: Store, name: str) -> AgentSession:
    return AgentSession(store.kernel, store.principals[name].caller)


async def _visible(store: Store) -> None:
    other = _session(store, "other")
    for content in VISIBLE:
        result = await other.remember(_belief(content))
        assert result.record_id is not None, result.reason


async def _hidden(store: Store, name: str) -> None:
    """Records ``name`` may not read, as influential as they can be (the restricted agent
    may not read the standard agent's user-level records either)."""
    boss = _session(store, "boss")
    levels = [("boss", "sensitive")] + ([("other", "user")] if name == "intern" else [])
    for writer, level in levels:
        for content in (C1, PARA, VEGA, DRILL):
            result = await _session(store, writer).remember(_belief(content, level))
            assert result.record_id is not None, result.reason
    raised = await boss.remember(_belief(DRILL_FRI + " Owner: platform."))
    assert raised.record_id is not None
    result = await boss.update(
        raised.record_id, _belief(DRILL_FRI + " Owner: platform.", "sensitive"), expected_version=1
    )
    assert result.version == 2, result.reason
    other = _session(store, "other")
    forgotten = await other.remember(_belief(DRILL_FRI))
    assert forgotten.record_id is not None
    await other.forget(forgotten.record_id)
    await other.remember(_belief(PII))
    await store.kernel.events.settled()


async def _writes(store: Store, name: str) -> tuple[list[Any], list[Any]]:
    """The caller's writes through the three adapters; returns (answers, record ids)."""
    session = _session(store, name)
    principal = store.principals[name]
    headers = store.headers[name]
    out: list[Any] = []
    ids: list[Any] = []
    for content in (C1, DRILL):
        result = await session.remember(_belief(content))
        out.append(result_view(result))
        ids.append(result.record_id)
    response = await store.client.post("/v1/memories", json=_belief(PARA), headers=headers)
    out.append([response.status_code, response.json()])
    ids.append(response.json().get("record_id"))
    tool = await store.tools.call("remember", _belief(DRILL_FRI), principal)
    out.append([tool.is_error, tool.structured_content])
    ids.append((tool.structured_content or {}).get("record_id"))
    return out, ids


async def _reads(store: Store, name: str, ids: list[Any]) -> list[Any]:
    """The caller's reads (and a few more writes) through the three adapters."""
    caller = store.principals[name].caller
    principal = store.principals[name]
    headers = store.headers[name]
    session = AgentSession(store.kernel, caller)
    out: list[Any] = []
    retrieval = store.kernel.retrieval
    client = store.client
    for query in ("zyqbar drill", "incident bridge room Orion floor nine", "Vega", "Dana"):
        for options in (
            {},
            {"min_score": 0.38},
            {"limit": 1},
            {"limit": 3, "min_score": 0.0},
            {"as_of_ingestion": datetime.now(UTC)},
            {"as_of_event": datetime.now(UTC)},
            {"include_superseded": True},
            {"include_consolidated": True},
            {"include_superseded": True, "limit": 2, "min_score": 0.0},
        ):
            found = await retrieval.search(caller, query, **options)
            out.append({"query": query, "options": str(sorted(options)), **search_view(found)})
            body = {
                "query": query,
                **{k: str(v) if isinstance(v, datetime) else v for k, v in options.items()},
            }
            response = await client.post("/v1/search", json=body, headers=headers)
            out.append(response.json())
            tool = await store.tools.call("recall", body, principal)
            out.append(tool.structured_content)
    temporal = store.kernel.temporal
    for record_id in ids:
        chain = await temporal.get_version_chain(record_id, caller=caller)
        out.append([record_view(v) for v in chain])
        out.append((await client.get(f"/v1/memories/{record_id}", headers=headers)).json())
        out.append((await client.get(f"/v1/memories/{record_id}/versions", headers=headers)).json())
        tool = await store.tools.call("history", {"record_id": str(record_id)}, principal)
        out.append(tool.structured_content)
    out.append([record_view(r) for r in await temporal.page(caller=caller)])
    out.append((await store.tools.call("list", {"limit": 3}, principal)).structured_content)
    out.append((await store.tools.call("list", {}, principal)).structured_content)
    receipt = await retrieval.feedback(caller, ids[0], useful=True)
    out.append({"useful": receipt.useful, "version": str(receipt.version_id)})
    body = {"record_id": str(ids[1]), "useful": False}
    out.append((await client.post("/v1/feedback", json=body, headers=headers)).json())
    updated = await session.amend(ids[0], {"content": C1 + " Bring a badge."}, expected_version=1)
    out.append(result_view(updated))
    response = await client.patch(
        f"/v1/memories/{ids[1]}",
        json={"content": DRILL + " Owner: ops."},
        headers={**headers, "If-Match": '"1"'},
    )
    out.append([response.status_code, response.json()])
    tool = await store.tools.call(
        "update", {"record_id": str(ids[2]), "content": PARA + " Badge needed."}, principal
    )
    out.append([tool.is_error, tool.structured_content])
    forgot = await session.forget(ids[3])
    out.append(result_view(forgot))
    for record_id in ids:
        args = {"record_id": str(record_id), "include_forgotten": True}
        out.append((await store.tools.call("get", args, principal)).structured_content)
    for content in (DRILL_FRI, C1, VEGA, PII, DRILL + " Owner: platform."):
        again = await session.remember(_belief(content))
        out.append(result_view(again))
    return out


async def _run(store: Store, name: str, *, hidden: bool, reader: str = "") -> list[Any]:
    """``name`` writes, ``reader`` (``name`` unless given) reads; the hidden records are
    those ``reader`` may not read."""
    reader = reader or name
    await _agents(store)
    await _visible(store)
    if hidden:
        await _hidden(store, reader)
    out, ids = await _writes(store, name)
    if reader != name:
        out = []  # what the writer was answered is its own view
    if hidden:
        await _hidden_after(store, reader, ids)
    await store.kernel.events.settled()
    out += await _reads(store, reader, ids)
    await store.kernel.events.settled()
    return out


async def _hidden_after(store: Store, name: str, ids: list[Any]) -> None:
    """Hidden writes after the caller's: the trusted agent repeats, contradicts and
    paraphrases them at sensitive."""
    levels = [("boss", "sensitive")] + ([("other", "user")] if name == "intern" else [])
    for writer, level in levels:
        for content in (C1, VEGA, PARA + " Confirmed.", DRILL_FRI):
            await _session(store, writer).remember(_belief(content, level))


async def test_every_answer_is_the_same_with_records_the_caller_may_not_read(
    twin_a: Store, twin_b: Store
) -> None:
    """Writes, searches (floors, limits, as-of, old versions, consolidated), reads, version
    chains, listings, feedback, updates and forgets through the three adapters answer the
    standard agent alike whether or not the store also holds the trusted agent's sensitive
    copies, paraphrases and contradictions of its facts, a raised record, a forgotten one and
    a quarantined one."""
    a = normalised(await _run(twin_a, "writer", hidden=False))
    b = normalised(await _run(twin_b, "writer", hidden=True))
    assert len(a) > 140
    assert [] == differences(a, b)


async def test_every_answer_is_the_same_for_a_restricted_caller(
    twin_a: Store, twin_b: Store
) -> None:
    """The same for the restricted agent, with the standard agent's user-level copies,
    paraphrases and contradictions of its facts hidden from it as well."""
    a = normalised(await _run(twin_a, "intern", hidden=False))
    b = normalised(await _run(twin_b, "intern", hidden=True))
    assert len(a) > 140
    assert [] == differences(a, b)


async def test_what_a_standard_writer_stores_beside_hidden_records_reads_the_same(
    twin_a: Store, twin_b: Store
) -> None:
    """The standard agent writes; the restricted agent reads what it wrote. The standard
    agent may read the user-level copies, paraphrases and contradictions of its facts, which
    the restricted agent may not: they must not change what the restricted agent gets."""
    a = normalised(await _run(twin_a, "writer", hidden=False, reader="intern"))
    b = normalised(await _run(twin_b, "writer", hidden=True, reader="intern"))
    assert len(a) > 130
    assert [] == differences(a, b)


async def test_what_a_trusted_writer_stores_beside_its_sensitive_records_reads_the_same(
    twin_a: Store, twin_b: Store
) -> None:
    """The trusted agent writes agent-level facts beside its own sensitive copies,
    paraphrases and contradictions of them; the standard agent reads them alike."""
    a = normalised(await _run(twin_a, "boss", hidden=False, reader="writer"))
    b = normalised(await _run(twin_b, "boss", hidden=True, reader="writer"))
    assert len(a) > 130
    assert [] == differences(a, b)


async def test_a_repetition_above_a_records_level_is_not_counted_for_its_readers(
    twin_a: Store, twin_b: Store
) -> None:
    """The trusted agent repeating an agent-level fact at ``sensitive`` is answered as a
    reinforcement of it, but counts no repetition: the standard writer's next repeat is routed
    to consolidation (three repetitions) only when its own readers repeated it so often. Audit
    replay gives back every decision (it subtracts only the repetitions that counted)."""
    answers = []
    for store, hidden in ((twin_a, False), (twin_b, True)):
        await _agents(store)
        writer = _session(store, "writer")
        first = await writer.remember(_belief(DRILL))
        if hidden:
            boss = _session(store, "boss")
            for _ in range(2):
                again = await boss.remember(_belief(DRILL, "sensitive"))
                assert (WriteOutcome.REINFORCED, first.record_id) == (
                    again.outcome,
                    again.record_id,
                )
        second = await writer.remember(_belief(DRILL))
        assert WriteOutcome.REINFORCED == second.outcome
        answers.append(normalised([result_view(first), result_view(second)]))
    assert [] == differences(*answers)
    # replay rebuilds each decision's repetitions from today's minus those counted since
    writer, boss = _session(twin_b, "writer"), _session(twin_b, "boss")
    for session, level in ((writer, "agent"), (writer, "agent"), (boss, "sensitive")):
        routed = await session.remember(_belief(VISIBLE[1], level))
    assert routed.layer2_decision is not None
    assert routed.layer2_decision.route_to_consolidation
    await writer.remember(_belief(VISIBLE[1]))
    report = await twin_b.kernel.replay.replay()
    assert [] == [(d.action, d.reasons) for d in report.changed]
    assert len(report.decisions) - len(report.skipped) >= 4


async def _consolidated_reads(store: Store, *, hidden: bool) -> list[Any]:
    """The writer's episodes of two topics, consolidated by a deep pass (store B: the trusted
    agent's sensitive accounts of the same topics too); then its reads."""
    await _agents(store)
    writer, boss = _session(store, "writer"), _session(store, "boss")
    for offset, texts in ((0, INCIDENT), (40, LATE_ETL)):
        for n, text in enumerate(texts):
            when = (DAY + timedelta(days=offset + n)).isoformat()
            result = await writer.remember({"type": "episode", "content": text, "event_time": when})
            assert result.record_id is not None, result.reason
            if hidden:
                late = (DAY + timedelta(days=offset + n, hours=5)).isoformat()
                for variant in (text, text.replace("again", "once more") + " Confirmed."):
                    body = {"type": "episode", "content": variant, "event_time": late}
                    await boss.remember({**body, "access_level": "sensitive"})
    await store.kernel.events.settled()
    stored = await store.kernel.admin_temporal.query(limit=1000)
    sensitive = [r for r in stored if r.access_level is AccessLevel.SENSITIVE]
    assert len(sensitive) >= (len(INCIDENT) + len(LATE_ETL) if hidden else 0)
    report = await store.kernel.consolidation.run(DEEP)
    assert report.batches
    caller = store.principals["writer"].caller
    out: list[Any] = []
    for query in ("checkout-api latency incident", "orders_daily ETL late"):
        for options in ({}, {"include_consolidated": True}, {"include_superseded": True}):
            found = await store.kernel.retrieval.search(caller, query, **options)
            out.append(search_view(found))
    # the summaries of one batch share its instant, so their order in a page is the ids'
    page = sorted(await store.kernel.temporal.page(caller=caller), key=lambda r: r.content)
    out.append([record_view(r) for r in page])
    for record in page:
        chain = await store.kernel.temporal.get_version_chain(record.record_id, caller=caller)
        out.append([record_view(v) for v in chain])
        for cited in record.evidence_links:
            source = await store.kernel.temporal.get_version_chain(cited, caller=caller)
            out.append([record_view(v) for v in source])
    return out


async def test_consolidation_gives_the_caller_the_same_summaries_beside_hidden_accounts(
    twin_a: Store, twin_b: Store
) -> None:
    """A deep pass over the writer's episodes makes the same summaries from them, consolidates
    the same sources and answers the same searches whether or not the trusted agent holds
    sensitive accounts of the same incidents."""
    a = normalised(await _consolidated_reads(twin_a, hidden=False))
    b = normalised(await _consolidated_reads(twin_b, hidden=True))
    assert [] == differences(a, b)


async def test_versions_of_equal_similarity_come_newest_first(twin_a: Store) -> None:
    """Versions restating one content (a record marked ``challenged`` by a resolution) are
    equally similar to any query: a search of old versions returns them newest first, not in
    the order the table's layout gave (which records the caller may not read shape too)."""
    await _agents(twin_a)
    intern = _session(twin_a, "intern")
    services = ("billing", "ledger", "search", "mail", "identity", "reports")
    for service in services:
        await intern.remember(
            _belief(f"The incident bridge for the {service} outage is room Orion on floor nine.")
        )
        await intern.remember(
            _belief(f"The incident bridge for the {service} outage is room Vega on floor two.")
        )
        await twin_a.kernel.events.settled()
    caller = twin_a.principals["intern"].caller
    found = await twin_a.kernel.retrieval.search(
        caller, "which cache holds the sessions", include_superseded=True, limit=50
    )
    tied: dict[float | None, list[tuple[Any, int]]] = {}
    for hit in found.hits:
        tied.setdefault(hit.similarity, []).append((hit.record.record_id, hit.record.version))
    pairs = [versions for versions in tied.values() if len(versions) > 1]
    assert len(pairs) >= len(services), found.hits
    assert [sorted(p, key=lambda v: (str(v[0]), -v[1])) for p in pairs] == pairs


async def test_a_hidden_version_leaves_no_gap_in_the_version_numbers(
    twin_a: Store, twin_b: Store
) -> None:
    """The trusted agent edits the writer's record once where the writer can see it (A), or
    raises it to sensitive first and then edits it back down (B): the writer's chain and its
    stale If-Match's answer are the same in both (its numbering leaves no gap)."""
    answers = []
    for store, hidden in ((twin_a, False), (twin_b, True)):
        await _agents(store)
        written = await _session(store, "writer").remember(_belief(C1))
        assert written.record_id is not None
        boss = _session(store, "boss")
        version = 1
        if hidden:
            raised = await boss.update(
                written.record_id, _belief(C1, "sensitive"), expected_version=1
            )
            assert raised.version == 2, raised.reason
            version = 2
        edited = await boss.update(
            written.record_id, _belief(C1 + " Bring a badge."), expected_version=version
        )
        assert edited.decision.value == "approved", edited.reason
        headers = store.headers["writer"]
        chain = await store.client.get(
            f"/v1/memories/{written.record_id}/versions", headers=headers
        )
        stale = await store.client.patch(
            f"/v1/memories/{written.record_id}",
            json={"content": C1},
            headers={**headers, "If-Match": '"1"'},
        )
        answers.append(normalised([chain.json(), stale.status_code, stale.json()]))
    assert [] == differences(*answers)


async def test_pressure_consolidation_does_not_depend_on_hidden_records(
    twin_a: Store, twin_b: Store
) -> None:
    """The trusted agent's sensitive episodes push the store as a whole over the fast-path
    limit; a pressure pass used to consolidate the writer's late-ETL episodes then, and only
    then. The limit holds per access level now, and neither store's pass touches them."""
    statuses = []
    for store, hidden in ((twin_a, False), (twin_b, True)):
        await _agents(store)
        writer = _session(store, "writer")
        ids = []
        for n, text in enumerate(LATE_ETL):
            when = (DAY + timedelta(days=n)).isoformat()
            result = await writer.remember({"type": "episode", "content": text, "event_time": when})
            ids.append(result.record_id)
        if hidden:
            boss = _session(store, "boss")
            for n in range(6):
                note = f"Vendor call {n} about the Q{n % 4 + 1} invoice dispute went nowhere."
                when = (DAY + timedelta(days=20 * n)).isoformat()
                body = {"type": "episode", "content": note, "event_time": when}
                body["access_level"] = "sensitive"
                assert (await boss.remember(body)).record_id is not None
        engine = engine_with(store.kernel, fast_path_limit=len(LATE_ETL) + 2)
        await engine.run(ConsolidationTrigger.PRESSURE_DRIVEN)
        caller = store.principals["writer"].caller
        heads = [await store.kernel.temporal.current(i, caller=caller) for i in ids]
        statuses.append([None if h is None else h.status.value for h in heads])
    assert statuses[0] == statuses[1]


async def _other_searches(store: Store, *, hidden: bool, model: Path) -> list[Any]:
    """The writer's searches answered by the text leg alone (no model files: a degraded
    search) and by both legs fused (``text_leg`` on)."""
    await _agents(store)
    await _visible(store)
    if hidden:
        await _hidden(store, "writer")
    _, ids = await _writes(store, "writer")
    if hidden:
        await _hidden_after(store, "writer", ids)
    await store.kernel.events.settled()
    settings = EngramSettings()
    broken = FastembedEmbedder(
        model,
        model_name=settings.embedding_model_name,
        dimension=EMBEDDING_DIMENSION,
        workers=1,
        threads=1,
    )
    kernel = store.kernel
    fused = Retrieval(
        kernel.db, kernel.embeddings, kernel.temporal, tuning=SearchTuning(text_leg=True)
    )
    caller = store.principals["writer"].caller
    out: list[Any] = []
    for retrieval in (Retrieval(kernel.db, broken, kernel.temporal), fused):
        for query in ("zyqbar drill", "incident bridge room Orion floor nine", "Vega Thursday"):
            for options in (
                {},
                {"limit": 1},
                {"as_of_ingestion": datetime.now(UTC)},
                {"include_superseded": True},
            ):
                found = await retrieval.search(caller, query, **options)
                out.append(search_view(found))
    await broken.close()
    return out


async def test_text_leg_searches_are_the_same_with_hidden_records(
    twin_a: Store, twin_b: Store, tmp_path: Path
) -> None:
    """Degraded searches (the text leg on every word) and searches fusing both legs answer
    alike whether or not the store holds hidden records with the query's rare words."""
    a = normalised(await _other_searches(twin_a, hidden=False, model=tmp_path))
    b = normalised(await _other_searches(twin_b, hidden=True, model=tmp_path))
    assert any(view["degraded"] and view["hits"] for view in a)
    assert [] == differences(a, b)
