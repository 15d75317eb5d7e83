"""Hostile pass F: read paths that still let a record the caller may not read shape its answer.

A record A cites record B as evidence while both are at A's level (the Gate refuses a citation
above it). B is raised to ``sensitive`` later: by a trusted agent's UPDATE, or by the PII
rescan when A is not raised with it (an admin released A). Every reader of A who may not read
B must then find A without B's id, on every path that returns A. Real embedded PostgreSQL and
the real embedding model, no mocks.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from engram import Kernel
from engram.memory.types import AccessLevel, CallerIdentity, MemoryRecord
from engram.protocols.inprocess import AgentSession
from engram.protocols.mcp.tools import EngramTools
from engram.protocols.views import record_view, result_view
from tests.conftest import ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.consolidation_helpers import DEEP, head_of
from tests.integration.gate_helpers import BOSS, FAST, INTERN, WRITER, belief, create, update
from tests.integration.test_gate_access_isolation import _approved
from tests.integration.test_http_api import Api
from tests.integration.test_layer2_hostile import APRIL, MARCH, V20, V21, _outbox_held
from tests.integration.test_self_healing import _seed_incident, rescan, write

#: The REST app on the test's kernel and the first admin's headers (test_http_api's fixture).
api = http_api.api

CITED = "The payments ledger moved to the eu-west-2 cluster during the October migration."
CITING = "The ledger migration to eu-west-2 needs a written rollback plan before cutover."


async def _cited_then_raised(kernel: Kernel) -> tuple[UUID, UUID, datetime]:
    """A agent-level citing B agent-level (both by the trusted agent, A twice so it has a
    history), then B raised to sensitive by the trusted agent. Returns (A, B, an instant
    before the raise)."""
    cited = await _approved(
        kernel, create(belief(CITED, source_agent=BOSS.agent_id, access_level="agent"), BOSS)
    )
    assert cited.record_id is not None
    citing = await _approved(
        kernel,
        create(
            belief(
                CITING,
                source_agent=BOSS.agent_id,
                access_level="agent",
                evidence_links=[cited.record_id],
            ),
            BOSS,
        ),
    )
    assert citing.record_id is not None
    await _approved(
        kernel,
        update(
            citing.record_id,
            CITING + " Owner: the platform team.",
            1,
            BOSS,
            access_level="agent",
            evidence_links=[cited.record_id],
        ),
    )
    await asyncio.sleep(0.002)
    before = datetime.now(UTC)
    await asyncio.sleep(0.002)
    await _approved(
        kernel,
        update(cited.record_id, CITED, 1, BOSS, access_level=AccessLevel.SENSITIVE),
    )
    await kernel.events.settled()
    return citing.record_id, cited.record_id, before


def trusted_meta_kinds(record: MemoryRecord) -> list[str]:
    """The kinds of the PII finding ``record`` holds, as an admin reads it."""
    return list(record.metadata["pii"]["kinds"])


def _names(value: Any, hidden: UUID) -> bool:
    return str(hidden) in json.dumps(value, default=str)


def _views(records: list[MemoryRecord]) -> list[dict[str, Any]]:
    return [record_view(record) for record in records]


async def test_in_process_reads_leave_out_evidence_raised_above_the_reader(kernel: Kernel) -> None:
    """Current, as-of, history, version chain, listing page, versions by id and search: the
    restricted reader gets A, never B's id; the trusted reader still gets B's id."""
    citing, cited, before = await _cited_then_raised(kernel)
    temporal = kernel.temporal
    head = await temporal.current(citing, caller=INTERN, count_read=False)
    assert head is not None
    answers: dict[str, list[MemoryRecord]] = {
        "current": [head],
        "as_of": await temporal.query(
            record_id=citing, as_of_ingestion=before, caller=INTERN, count_read=False
        ),
        "history": await temporal.query(
            record_id=citing, include_superseded=True, caller=INTERN, count_read=False
        ),
        "chain": await temporal.get_version_chain(citing, caller=INTERN),
        "page": await temporal.page(caller=INTERN),
        "listing": await temporal.query(caller=INTERN, count_read=False),
        "versions": list((await temporal.versions([head.id], caller=INTERN)).values()),
    }
    for name, kwargs in {
        "search": {},
        "search_as_of": {"as_of_ingestion": datetime.now(UTC)},
        "search_superseded": {"include_superseded": True},
    }.items():
        found = await kernel.retrieval.search(INTERN, CITING, min_score=0.0, **kwargs)
        answers[name] = [hit.record for hit in found.hits if hit.record.record_id == citing]
    assert all(answers.values()), {name: len(found) for name, found in answers.items()}
    leaked = [name for name, found in answers.items() if _names(_views(found), cited)]
    assert [] == leaked
    trusted = await temporal.current(citing, caller=BOSS, count_read=False)
    assert trusted is not None
    assert (cited,) == tuple(trusted.evidence_links)


async def test_write_results_leave_out_evidence_raised_above_the_writer(kernel: Kernel) -> None:
    """The result of a write that returns A (a repeat reinforcing it, a replayed request id,
    a FORGET of it) shows A without B's id to a writer who may not read B."""
    citing, cited, _ = await _cited_then_raised(kernel)
    # the standard writer repeats A's text (same type, namespace and level): it reinforces A
    repeat = create(
        belief(CITING + " Owner: the platform team.", access_level="agent"),
        WRITER,
        request_id="repeat-1",
    )
    reinforced = await kernel.gate.evaluate(repeat)
    assert reinforced.record_id == citing, reinforced.reason
    replayed = await kernel.gate.evaluate(repeat)
    assert replayed.replayed
    forgot = await AgentSession(kernel, WRITER).forget(citing)
    assert forgot.record_id == citing, forgot.reason
    leaked = [
        name
        for name, result in {
            "reinforced": reinforced,
            "replayed": replayed,
            "forgot": forgot,
        }.items()
        if result.modified_record is None or _names(result_view(result), cited)
    ]
    assert [] == leaked


async def test_an_amend_by_a_reader_who_may_not_read_the_evidence_is_not_refused(
    kernel: Kernel,
) -> None:
    """An UPDATE that changes only A's metadata carries A's other fields as the writer read
    them: it is approved and names no hidden id, in its result or its reason."""
    citing, cited, _ = await _cited_then_raised(kernel)
    result = await AgentSession(kernel, WRITER).amend(
        citing, {"metadata": {"team": "platform"}}, expected_version=2
    )
    assert "approved" == result.decision.value, result.reason
    assert not _names(result_view(result), cited)


async def test_rest_reads_leave_out_evidence_raised_above_the_reader(api: Api) -> None:
    """GET /v1/memories/{id} (now and as of before), its versions and POST /v1/search."""
    citing, cited, before = await _cited_then_raised(api.kernel)
    headers = await api.agent("rest-intern", INTERN.trust_level, writes_per_minute=FAST)
    client = api.client
    responses = {
        "get": await client.get(f"/v1/memories/{citing}", headers=headers),
        "get_as_of": await client.get(
            f"/v1/memories/{citing}",
            params={"as_of_ingestion": before.isoformat()},
            headers=headers,
        ),
        "versions": await client.get(f"/v1/memories/{citing}/versions", headers=headers),
        "search": await client.post(
            "/v1/search", json={"query": CITING, "min_score": 0.0}, headers=headers
        ),
    }
    assert dict.fromkeys(responses, 200) == {n: r.status_code for n, r in responses.items()}
    assert str(citing) in responses["search"].text
    leaked = [name for name, response in responses.items() if str(cited) in response.text]
    assert [] == leaked


async def test_mcp_reads_leave_out_evidence_raised_above_the_reader(kernel: Kernel) -> None:
    """The MCP tools get, history, list and recall."""
    citing, cited, _ = await _cited_then_raised(kernel)
    _, token = await kernel.agents.add("mcp-intern", INTERN.trust_level, writes_per_minute=FAST)
    principal = await kernel.agents.authenticate(token)
    tools = EngramTools(kernel)
    answers = {
        "get": await tools.call("get", {"record_id": str(citing)}, principal),
        "history": await tools.call("history", {"record_id": str(citing)}, principal),
        "list": await tools.call("list", {}, principal),
        "recall": await tools.call("recall", {"query": CITING, "min_score": 0.0}, principal),
    }
    assert all(str(citing) in json.dumps(a.structured_content) for a in answers.values())
    leaked = [name for name, a in answers.items() if _names(a.structured_content, cited)]
    assert [] == leaked


async def test_a_record_released_after_the_rescan_raised_its_evidence_names_none(
    kernel: Kernel,
) -> None:
    """The PII rescan flags B and raises A, which cites it; an admin reads A, finds nothing
    in it and releases it to agent level. A's readers may read A again, not B: A's evidence
    is empty for them (it still names B for a trusted reader), and the finding A inherited
    (``metadata.pii``: ``propagated_from`` B, B's kinds) names neither B nor its kinds."""
    _, marked = await _seed_incident(kernel)
    citing = await write(
        kernel,
        belief("The payment-step pager alert needs a lower threshold.", evidence_links=[marked]),
        BOSS,
    )
    await kernel.events.settled()
    report = await rescan(kernel).run()
    assert (report.flagged, report.propagated) == (1, 1), report.summary()
    raised = await head_of(kernel, citing)
    assert raised.access_level is AccessLevel.SENSITIVE
    await kernel.quarantine.release(
        citing,
        admin=CallerIdentity.system("cli:dana"),
        reason="the alert note holds no personal data",
        expected_version=raised.version,
    )
    shown = await kernel.temporal.current(citing, caller=INTERN, count_read=False)
    assert shown is not None
    assert () == tuple(shown.evidence_links)
    # nor does the finding the release kept in its metadata name B or what B holds
    assert not _names(record_view(shown), marked)
    assert "kinds" not in shown.metadata["pii"]
    assert trusted_meta_kinds(await head_of(kernel, citing)) == ["codename"]
    trusted = await kernel.temporal.current(citing, caller=BOSS, count_read=False)
    assert trusted is not None
    assert (marked,) == tuple(trusted.evidence_links)


# --- consolidation: a source raised by an agent after the batch ----------------------------


async def test_a_source_raised_after_its_batch_is_not_read_through_the_summary(
    kernel: Kernel,
) -> None:
    """Three agent-level episodes are merged into an agent-level summary. The trusted agent
    then raises the middle source to sensitive (an UPDATE keeping its text). The release that
    follows forgets the summary; forgotten at agent level, its history would still give an
    agent-level reader the raised source's facts (and count it among the summary's sources),
    although the source itself is now absent for that reader at every instant."""
    sources, marked = await _seed_incident(kernel)
    batch = await kernel.consolidation.run(DEEP)
    [item] = [item for b in batch.batches for item in b.items]
    assert set(item.sources) == set(sources)
    summary = await head_of(kernel, item.record_id)
    assert summary.access_level is AccessLevel.AGENT
    raised_text = (await head_of(kernel, marked)).content
    assert raised_text.split(":")[0] in summary.content  # the merge quotes the source
    source = await head_of(kernel, marked)
    await _approved(
        kernel,
        update(
            marked,
            source.content,
            source.version,
            BOSS,
            memory_type=source.type,
            access_level=AccessLevel.SENSITIVE,
            event_time=source.event_time,
        ),
    )
    await kernel.events.settled()
    made = await head_of(kernel, item.record_id)
    assert ("forgotten", AccessLevel.SENSITIVE) == (made.status.value, made.access_level)
    for other in set(sources) - {marked}:
        head = await head_of(kernel, other)
        assert ("active", AccessLevel.AGENT) == (head.status.value, head.access_level)
    assert [] == await kernel.temporal.get_version_chain(marked, caller=INTERN)
    seen = [
        *await kernel.temporal.get_version_chain(item.record_id, caller=INTERN),
        *await kernel.temporal.query(
            record_id=item.record_id, include_forgotten=True, caller=INTERN, count_read=False
        ),
    ]
    assert [] == [v.version for v in seen if raised_text.split(":")[0] in v.content]


# --- a replay names a record hidden since the first answer --------------------------------


async def test_a_replayed_decision_names_no_record_hidden_from_the_caller_since(
    kernel: Kernel,
) -> None:
    """The standard writer's claim conflicts with the trusted agent's agent-level record X;
    the answer names X (it was readable). The trusted agent then raises X to sensitive. The
    writer retries under the same request id: the replayed Layer 2 decision still names X
    (its record and version ids, and the conflict's reason), which a read would now answer
    as an unknown id."""
    x = await _approved(
        kernel,
        create(
            belief("The deploy target for the web app is v2.0.", source_agent=BOSS.agent_id), BOSS
        ),
    )
    assert x.record_id is not None
    claim = create(
        belief("The deploy target for the web app is v2.1."), WRITER, request_id="claim-1"
    )
    first = await kernel.gate.evaluate(claim)
    assert first.layer2_decision is not None
    assert str(x.record_id) in json.dumps(result_view(first)), "the first answer names X"
    await _approved(
        kernel,
        update(
            x.record_id,
            "The deploy target for the web app is v2.0.",
            1,
            BOSS,
            access_level=AccessLevel.SENSITIVE,
        ),
    )
    await kernel.events.settled()
    assert await kernel.temporal.current(x.record_id, caller=WRITER) is None
    again = await kernel.gate.evaluate(claim)
    assert again.replayed
    shown = json.dumps(result_view(again))
    assert str(x.record_id) not in shown
    assert "v2.0" not in shown


async def test_a_record_raised_before_the_resolution_is_delivered_challenges_nothing(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """The restricted agent disputes the trusted agent's agent-level record; the resolution
    planned at the write marks the restricted agent's record ``challenged`` (its readers could
    read the other claim). Before the outbox delivers it, the trusted agent raises its record
    to sensitive: the challenge would now change a readable record on grounds hidden from its
    readers, so it is not made."""
    older = await _approved(
        kernel,
        create(belief(V20, source_agent=BOSS.agent_id, event_time=MARCH), BOSS),
    )
    assert older.record_id is not None
    await kernel.events.settled()
    async with _outbox_held(database) as hold:
        newer = await _approved(
            kernel, create(belief(V21, source_agent=INTERN.agent_id, event_time=APRIL), INTERN)
        )
        assert 1 == await hold("memory.conflicts_found"), "delivery was not held in time"
        await _approved(
            kernel,
            update(
                older.record_id,
                V20,
                1,
                BOSS,
                access_level=AccessLevel.SENSITIVE,
                event_time=MARCH,
            ),
        )
    await kernel.events.settled()
    assert newer.record_id is not None
    chain = await kernel.temporal.get_version_chain(newer.record_id, caller=INTERN)
    assert [(1, "active")] == [(v.version, v.status.value) for v in chain]
