"""Layer 2 sees only what the caller may read: a record hidden from a caller influences
nothing it gets back (content, ids, existence, metadata, counts), and a write on its behalf,
conflict resolution included, changes only records it may change (ADR-010)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from engram import Kernel
from engram.memory.gate.requests import GateRequest, GateResult, result_json
from engram.memory.types import AccessLevel, GateDecision, MemoryRecord
from engram.protocols.inprocess import AgentSession
from engram.protocols.mcp.tools import EngramTools
from tests.integration.gate_helpers import (
    BOSS,
    EXTERNAL,
    FAST,
    INTERN,
    OTHER,
    STANDARD,
    WRITER,
    belief,
    create,
    update,
)

MARCH = datetime(2025, 3, 1, 9, tzinfo=UTC)
APRIL = datetime(2025, 4, 10, 9, tzinfo=UTC)
SECRET = "The incident bridge for the payments outage is room Orion on floor nine."
PII_TEXT = "Reach the on-call lead Dana Whitfield at dana.whitfield@example.com or +1 415 555 0134."


async def _approved(kernel: Kernel, request: GateRequest) -> GateResult:
    result = await kernel.gate.evaluate(request)
    assert GateDecision.APPROVED == result.decision, result.reason
    assert result.record_id is not None
    return result


async def _sensitive(kernel: Kernel, content: str, **fields: Any) -> UUID:
    """A record only a trusted caller may read, written by the trusted agent."""
    record = belief(
        content, source_agent=BOSS.agent_id, access_level=AccessLevel.SENSITIVE, **fields
    )
    result = await _approved(kernel, create(record, BOSS))
    assert result.record_id is not None
    return result.record_id


def _mentions(result: GateResult, hidden: UUID) -> bool:
    return str(hidden) in json.dumps(result_json(result), default=str)


async def _audited_mentions(kernel: Kernel, result: GateResult, hidden: UUID) -> bool:
    row = await kernel.db.fetchrow(
        "SELECT reason, layer2_decision::text AS advice FROM librarian_audit"
        " WHERE decision_id = $1",
        result.decision_id,
    )
    assert row is not None
    return str(hidden) in f"{row['reason']} {row['advice']}"


async def _repetitions(kernel: Kernel, record_id: UUID) -> int:
    value = await kernel.db.fetchval(
        "SELECT repetitions FROM memories WHERE record_id = $1 AND superseded_by IS NULL",
        record_id,
    )
    return int(value)


async def test_reposting_a_sensitive_records_content_stores_the_callers_own_copy(
    kernel: Kernel,
) -> None:
    """A standard agent repeating a sensitive record's text creates its own; the hidden one
    is neither named nor reinforced."""
    hidden = await _sensitive(kernel, SECRET)
    result = await _approved(kernel, create(belief(SECRET), WRITER))
    assert ("created", False) == (result.outcome.value, result.record_id == hidden)
    assert result.layer2_decision is not None
    assert (None, None, ()) == (
        result.layer2_decision.target_record_id,
        result.layer2_decision.update_candidate_of,
        result.layer2_decision.conflicts,
    )
    assert (False, False) == (
        _mentions(result, hidden),
        await _audited_mentions(kernel, result, hidden),
    )
    assert 1 == await _repetitions(kernel, hidden)


async def test_the_trusted_writer_repeating_its_sensitive_record_still_reinforces_it(
    kernel: Kernel,
) -> None:
    """A caller that may read the sensitive record gets the usual duplicate answer when it
    repeats it at that level; at a lower level the copy is a record of its own, which that
    level's readers may find (ADR-008, amended 2026-11-27)."""
    hidden = await _sensitive(kernel, SECRET)
    again = belief(SECRET, source_agent=BOSS.agent_id, access_level=AccessLevel.SENSITIVE)
    result = await _approved(kernel, create(again, BOSS))
    assert ("reinforced", hidden) == (result.outcome.value, result.record_id)
    assert 2 == await _repetitions(kernel, hidden)
    lower = await _approved(kernel, create(belief(SECRET, source_agent=BOSS.agent_id), BOSS))
    assert "created" == lower.outcome.value
    assert lower.record_id != hidden
    assert 2 == await _repetitions(kernel, hidden)


async def test_reposting_quarantined_pii_is_not_an_oracle_for_another_agent(
    kernel: Kernel,
) -> None:
    """Agent B re-posting agent A's quarantined PII text gets a new quarantined record of its
    own, exactly as if A had never written it."""
    first = await _approved(kernel, create(belief(PII_TEXT), WRITER))
    assert first.modified_record is not None
    assert AccessLevel.SENSITIVE == first.modified_record.access_level
    assert first.record_id is not None
    second = await _approved(kernel, create(belief(PII_TEXT, source_agent=OTHER.agent_id), OTHER))
    assert "created" == second.outcome.value
    assert second.record_id != first.record_id
    assert not _mentions(second, first.record_id)
    assert 1 == await _repetitions(kernel, first.record_id)


async def test_a_newer_value_of_a_hidden_fact_reports_no_conflict_and_changes_nothing(
    kernel: Kernel,
) -> None:
    """A standard agent's v2.1 beside a sensitive v2.0: no conflict, no candidate, and the
    resolver never writes a version of the sensitive record."""
    hidden = await _sensitive(
        kernel, "The deploy target for the web app is v2.0.", event_time=MARCH
    )
    result = await _approved(
        kernel,
        create(belief("The deploy target for the web app is v2.1.", event_time=APRIL), WRITER),
    )
    assert result.layer2_decision is not None
    assert ((), None) == (
        result.layer2_decision.conflicts,
        result.layer2_decision.update_candidate_of,
    )
    assert not _mentions(result, hidden)
    await kernel.events.settled()
    head = await kernel.temporal.current(hidden)
    assert head is not None
    assert (1, None) == (head.version, head.event_time_end)


async def test_update_and_forget_of_a_hidden_record_answer_as_for_an_unknown_one(
    kernel: Kernel,
) -> None:
    """The Gate's answer to a standard agent about a sensitive record equals its answer about
    an id that does not exist, the id aside."""
    hidden = await _sensitive(kernel, SECRET)
    unknown = uuid.uuid4()

    def shape(result: GateResult, record_id: UUID) -> tuple[str, str, list[str]]:
        reason = result.reason.replace(str(record_id), "<id>")
        return result.decision.value, reason, [c.name for c in result.failed_checks]

    for action in ("update", "forget"):
        answers = []
        for record_id in (hidden, unknown):
            if action == "update":
                request = update(record_id, "The incident bridge moved.", 1, WRITER)
            else:
                target = belief("x", record_id=record_id)
                request = GateRequest.forget(target, WRITER, EXTERNAL, expected_version=1)
            answers.append(shape(await kernel.gate.evaluate(request), record_id))
        assert answers[0] == answers[1], action
    assert 1 == (await kernel.temporal.current(hidden) or _never()).version


def _never() -> MemoryRecord:
    raise AssertionError("the hidden record vanished")


async def test_session_and_mcp_forget_of_a_hidden_record_answer_as_for_an_unknown_one(
    kernel: Kernel,
) -> None:
    """AgentSession.forget and the MCP forget tool reveal nothing about a hidden record."""
    hidden = await _sensitive(kernel, SECRET)
    unknown = uuid.uuid4()
    _, token = await kernel.agents.add("mcp-standard", STANDARD.trust_level, writes_per_minute=FAST)
    principal = await kernel.agents.authenticate(token)
    session = AgentSession(kernel, principal.caller)
    tools = EngramTools(kernel)
    answers = []
    for record_id in (hidden, unknown):
        result = await session.forget(record_id, expected_version=1)
        tool = await tools.call("forget", {"record_id": str(record_id)}, principal)
        answers.append(
            (
                result.decision.value,
                result.reason.replace(str(record_id), "<id>"),
                tool.is_error,
                json.dumps(_without_ids(tool.structured_content), sort_keys=True).replace(
                    str(record_id), "<id>"
                ),
            )
        )
    assert answers[0] == answers[1]


def _without_ids(value: Any) -> Any:
    """A tool answer with its per-call decision id left out."""
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k != "decision_id"}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


async def _restated(kernel: Kernel, record_id: UUID) -> list[tuple[int, str, Any]]:
    chain = await kernel.temporal.get_version_chain(record_id)
    return [(v.version, v.status.value, v.event_time_end) for v in chain]


async def test_a_lower_tier_may_challenge_but_not_supersede_a_higher_tiers_record(
    kernel: Kernel,
) -> None:
    """A restricted agent's newer value leaves the trusted agent's record valid, marks its own
    record challenged, and puts the dispute in front of a person."""
    older = await _approved(
        kernel,
        create(
            belief(
                "The deploy target for the web app is v2.0.",
                source_agent=BOSS.agent_id,
                event_time=MARCH,
            ),
            BOSS,
        ),
    )
    newer = await _approved(
        kernel,
        create(
            belief(
                "The deploy target for the web app is v2.1.",
                source_agent=INTERN.agent_id,
                event_time=APRIL,
            ),
            INTERN,
        ),
    )
    assert older.record_id is not None
    assert newer.record_id is not None
    assert newer.layer2_decision is not None
    assert ["supersession"] == [c.classification.value for c in newer.layer2_decision.conflicts]
    await kernel.events.settled()
    assert [(1, "active", None)] == await _restated(kernel, older.record_id)
    assert [(1, "superseded", None), (2, "challenged", None)] == await _restated(
        kernel, newer.record_id
    )
    assert newer.modified_record is not None
    edge = await kernel.db.fetchrow(
        "SELECT kind, provenance FROM memory_edges WHERE source_id = $1",
        newer.modified_record.id,
    )
    assert edge is not None
    provenance = edge["provenance"]
    assert ("contradicts", "supersession", "escalated") == (
        edge["kind"],
        provenance["classification"],
        provenance["resolution"],
    )
    queued = await kernel.db.fetchval(
        "SELECT count(*) FROM escalations WHERE record_id = $1", newer.record_id
    )
    assert 1 == queued


async def test_a_standard_agent_may_not_supersede_a_trusted_agents_record(kernel: Kernel) -> None:
    """The access matrix lets a standard agent change a trusted agent's user-level record,
    but a conflict resolution on its behalf does not retire a higher tier's fact."""
    older = await _approved(
        kernel,
        create(
            belief(
                "The deploy target for the web app is v2.0.",
                source_agent=BOSS.agent_id,
                event_time=MARCH,
            ),
            BOSS,
        ),
    )
    await _approved(
        kernel,
        create(belief("The deploy target for the web app is v2.1.", event_time=APRIL), WRITER),
    )
    await kernel.events.settled()
    assert older.record_id is not None
    assert [(1, "active", None)] == await _restated(kernel, older.record_id)


async def test_a_higher_tier_still_supersedes_a_lower_tiers_record(kernel: Kernel) -> None:
    """A trusted agent's newer value ends a standard agent's older one, as before."""
    older = await _approved(
        kernel,
        create(belief("The deploy target for the web app is v2.0.", event_time=MARCH), WRITER),
    )
    await _approved(
        kernel,
        create(
            belief(
                "The deploy target for the web app is v2.1.",
                source_agent=BOSS.agent_id,
                event_time=APRIL,
            ),
            BOSS,
        ),
    )
    await kernel.events.settled()
    assert older.record_id is not None
    assert [(1, "superseded", None), (2, "active", APRIL)] == await _restated(
        kernel, older.record_id
    )


async def test_a_request_id_another_agent_used_neither_leaks_its_result_nor_drops_the_write(
    kernel: Kernel,
) -> None:
    """Request ids are each agent's own: agent B reusing agent A's id gets its own write
    stored and answered, never A's recorded result."""
    first = await _approved(kernel, create(belief(SECRET), BOSS, request_id="r-1"))
    second = await _approved(
        kernel,
        create(belief("The staging cluster runs in Frankfurt."), WRITER, request_id="r-1"),
    )
    assert (False, "created") == (second.replayed, second.outcome.value)
    assert second.record_id != first.record_id
    assert first.record_id is not None
    assert not _mentions(second, first.record_id)
    again = await kernel.gate.evaluate(
        create(belief("The staging cluster runs in Frankfurt."), WRITER, request_id="r-1")
    )
    assert (True, second.record_id) == (again.replayed, again.record_id)
