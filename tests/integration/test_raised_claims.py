"""A resolution rests on a claim its record's readers could read; when that claim is raised
above them, the resolution is undone through the Gate and the conflict escalated (ADR-010,
amended 2026-11-28). Real embedded PostgreSQL and the real embedding model, no mocks.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from engram import Kernel
from engram.infra.events import Event
from engram.memory.gate.reopen import LEVEL_CHANGED
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.types import (
    AccessLevel,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
)
from tests.integration.consolidation_helpers import head_of
from tests.integration.gate_helpers import BOSS, EXTERNAL, INTERN, WRITER, belief, create
from tests.integration.race_helpers import broken_invariants
from tests.integration.test_gate_access_isolation import _approved
from tests.integration.test_layer2_hostile import APRIL, MARCH, V20, V21

MAY = datetime(2025, 5, 20, 9, tzinfo=UTC)
V22 = "The deploy target for the web app is v2.2."
JWT = "The public API authenticates requests with JWT bearer tokens."
COOKIES = "The public API authenticates requests with session cookies."


async def _written(kernel: Kernel, request: GateRequest) -> UUID:
    """``request`` approved and its resolutions delivered; the record's id."""
    result = await _approved(kernel, request)
    await kernel.events.settled()
    assert result.record_id is not None
    return result.record_id


async def _raised(
    kernel: Kernel, record_id: UUID, level: AccessLevel = AccessLevel.SENSITIVE
) -> GateResult:
    """The trusted agent's PATCH of ``record_id`` to ``level``, its events delivered."""
    head = await head_of(kernel, record_id)
    proposal = head.model_copy(update={"source_agent": BOSS.agent_id, "access_level": level})
    result = await _approved(
        kernel,
        GateRequest(GateAction.UPDATE, proposal, BOSS, EXTERNAL, expected_version=head.version),
    )
    await kernel.events.settled()
    return result


async def _superseded(kernel: Kernel, **fields: Any) -> tuple[UUID, UUID]:
    """v2.0 (March) and v2.1 (April) by the standard agent: v2.0's validity ended in April."""
    older = await _written(kernel, create(belief(V20, event_time=MARCH, **fields), WRITER))
    newer = await _written(kernel, create(belief(V21, event_time=APRIL, **fields), WRITER))
    assert (await head_of(kernel, older)).event_time_end is not None, "no supersession"
    return older, newer


async def _escalated(kernel: Kernel) -> list[tuple[str, str]]:
    """(existing record, newer record) of each open escalation in the admin queue."""
    rows = await kernel.admin_queue.pending()
    return [(row["payload"]["existing_record_id"], row["payload"]["record_id"]) for row in rows]


async def _no_replay_changes(kernel: Kernel) -> None:
    """Audit replay decides every recorded request as the Gate did."""
    replayed = await kernel.replay.replay()
    assert [] == [d.to_json() for d in replayed.changed]


async def test_a_supersession_is_undone_when_the_newer_claim_is_raised(kernel: Kernel) -> None:
    """v2.1 ended v2.0's validity; the trusted agent raises v2.1 to sensitive: the resolver
    restates v2.0 with its validity open again (a self-healing version under a request id
    of its own), v2.1 is marked challenged as an escalated write would be, and the conflict
    goes to a person."""
    older, newer = await _superseded(kernel)
    await _raised(kernel, newer)

    seen = await kernel.temporal.current(older, caller=INTERN, count_read=False)
    assert seen is not None
    assert (None, MemoryStatus.ACTIVE) == (seen.event_time_end, seen.status)
    reopened = await head_of(kernel, older)
    assert GateDecisionType.SELF_HEALING is reopened.gate_decision_type
    entry = await kernel.audit.by_decision(reopened.gate_decision_id)
    assert entry is not None
    assert entry.request_id is not None
    assert entry.request_id.startswith("reopen:")
    assert MemoryStatus.CHALLENGED is (await head_of(kernel, newer)).status
    assert [(str(older), str(newer))] == await _escalated(kernel)
    assert [] == await broken_invariants(kernel)
    await _no_replay_changes(kernel)


async def test_a_contradiction_is_undone_when_the_claim_behind_it_is_raised(
    kernel: Kernel,
) -> None:
    """The trusted agent's JWT belief and its less sure cookies belief contradict (both
    challenged); raising the cookies belief to sensitive gives the restricted reader the JWT
    belief active again, while the cookies belief, whose readers may read the JWT one, stays
    challenged."""
    jwt = await _written(
        kernel, create(belief(JWT, source_agent=BOSS.agent_id, source_confidence=0.9), BOSS)
    )
    cookies = await _written(
        kernel, create(belief(COOKIES, source_agent=BOSS.agent_id, source_confidence=0.5), BOSS)
    )
    statuses = [(await head_of(kernel, r)).status for r in (jwt, cookies)]
    assert [MemoryStatus.CHALLENGED, MemoryStatus.CHALLENGED] == statuses, "no contradiction"

    await _raised(kernel, cookies)

    seen = await kernel.temporal.current(jwt, caller=INTERN, count_read=False)
    assert seen is not None
    assert MemoryStatus.ACTIVE is seen.status
    assert MemoryStatus.CHALLENGED is (await head_of(kernel, cookies)).status
    assert [(str(jwt), str(cookies))] == await _escalated(kernel)
    assert [] == await broken_invariants(kernel)
    await _no_replay_changes(kernel)


async def _three_versions(kernel: Kernel) -> tuple[UUID, UUID, UUID, datetime]:
    """v2.0 superseded by v2.1 (April) and then by v2.2 (May): the three records, and the
    end v2.1's resolution gave v2.0."""
    older, middle = await _superseded(kernel)
    by_middle = (await head_of(kernel, older)).event_time_end
    assert by_middle is not None
    latest = await _written(kernel, create(belief(V22, event_time=MAY), WRITER))
    ended = (await head_of(kernel, older)).event_time_end
    assert ended is not None
    assert ended > by_middle, "v2.2 did not supersede v2.0"
    return older, middle, latest, by_middle


async def _seen_end(kernel: Kernel, record_id: UUID) -> datetime | None:
    """The validity end of ``record_id`` as the restricted reader reads it."""
    seen = await kernel.temporal.current(record_id, caller=INTERN, count_read=False)
    assert seen is not None
    return seen.event_time_end


async def test_an_ending_also_made_by_a_readable_claim_stays(kernel: Kernel) -> None:
    """v2.0 is superseded by v2.1 (April), then by v2.2 (May). Raising v2.2 gives v2.0 back
    the ending v2.1, which its readers may still read, had given it; raising v2.1 as well
    then opens it: no claim its readers may read ends it any more."""
    older, middle, latest, by_middle = await _three_versions(kernel)

    await _raised(kernel, latest)
    assert by_middle == await _seen_end(kernel, older)

    await _raised(kernel, middle)
    assert await _seen_end(kernel, older) is None
    assert [] == await broken_invariants(kernel)


async def test_an_ending_overwritten_by_a_readable_claim_is_not_undone(kernel: Kernel) -> None:
    """v2.0 is superseded by v2.1, then by v2.2: raising v2.1, whose ending v2.0 no longer
    shows, writes nothing (v2.2 still ends it); raising v2.2 then opens it, since the
    ending before v2.2's rests on v2.1, hidden too."""
    older, middle, latest, _ = await _three_versions(kernel)
    ended = await _seen_end(kernel, older)
    versions = len(await kernel.admin_temporal.get_version_chain(older))

    await _raised(kernel, middle)
    assert ended == await _seen_end(kernel, older)
    assert versions == len(await kernel.admin_temporal.get_version_chain(older))

    await _raised(kernel, latest)
    assert await _seen_end(kernel, older) is None
    assert [] == await broken_invariants(kernel)
    await _no_replay_changes(kernel)


async def test_a_raise_its_readers_may_still_read_changes_nothing(kernel: Kernel) -> None:
    """v2.0 is user-level, v2.1 agent-level: raising v2.1 to user leaves v2.0 ended, since
    everyone who reads v2.0 may read v2.1 still; no version is written, nothing escalated."""
    older, newer = await _superseded(kernel, access_level=AccessLevel.AGENT)
    await _raised(kernel, older, AccessLevel.USER)
    before = await kernel.admin_temporal.get_version_chain(older)
    assert before[-1].event_time_end is not None
    escalated = await _escalated(kernel)  # the raise of v2.0 met the conflict again

    await _raised(kernel, newer, AccessLevel.USER)

    after = await kernel.admin_temporal.get_version_chain(older)
    assert [v.id for v in before] == [v.id for v in after]
    assert escalated == await _escalated(kernel)


async def test_forgetting_the_newer_claim_changes_nothing(kernel: Kernel) -> None:
    """Forgetting is not retraction: v2.0 stays ended after v2.1 is forgotten."""
    older, newer = await _superseded(kernel)
    head = await head_of(kernel, newer)
    await _written(
        kernel, GateRequest(GateAction.FORGET, head, WRITER, EXTERNAL, expected_version=1)
    )
    assert (await head_of(kernel, older)).event_time_end is not None
    assert [] == await _escalated(kernel)


def _view(record: MemoryRecord | None) -> tuple[object, ...]:
    """The fields of a record a reader relies on for its standing: validity and status."""
    assert record is not None
    return (record.content, record.event_time, record.event_time_end, record.status)


async def _restricted_view(kernel: Kernel, older: UUID, namespace: str) -> list[Any]:
    """What the restricted reader gets of v2.0: the current version, the newest version of
    its chain, and its search hits."""
    current = await kernel.temporal.current(older, caller=INTERN, count_read=False)
    chain = await kernel.temporal.get_version_chain(older, caller=INTERN)
    found = await kernel.retrieval.search(
        INTERN, "What is the deploy target for the web app?", namespace=namespace
    )
    return [_view(current), _view(chain[-1]), [_view(hit.record) for hit in found.hits]]


async def test_raised_later_reads_as_written_raised_from_the_start(kernel: Kernel) -> None:
    """Differential: v2.1 written agent-level, resolved, then raised, and v2.1 written
    sensitive from the start give the restricted reader the same v2.0 (current, chain head,
    search hits: validity and status), and the trusted agent the same v2.1 status."""
    older, newer = await _superseded(kernel, namespace="raised")
    await _raised(kernel, newer)

    born_older = await _written(
        kernel, create(belief(V20, event_time=MARCH, namespace="born"), WRITER)
    )
    born_newer = await _written(
        kernel,
        create(
            belief(
                V21,
                event_time=APRIL,
                namespace="born",
                source_agent=BOSS.agent_id,
                access_level=AccessLevel.SENSITIVE,
            ),
            BOSS,
        ),
    )

    raised = await _restricted_view(kernel, older, "raised")
    born = await _restricted_view(kernel, born_older, "born")
    assert born == raised
    assert (await head_of(kernel, born_newer)).status == (await head_of(kernel, newer)).status


async def test_a_second_delivery_changes_nothing(kernel: Kernel) -> None:
    """The raise's event delivered again writes no version and queues no second escalation."""
    older, newer = await _superseded(kernel)
    raise_result = await _raised(kernel, newer)
    assert raise_result.modified_record is not None
    chains = [len(await kernel.admin_temporal.get_version_chain(r)) for r in (older, newer)]
    escalations = await _escalated(kernel)

    payload = {
        "record_id": str(newer),
        "version_id": str(raise_result.modified_record.id),
        "decision_id": str(raise_result.decision_id),
    }
    again = await kernel.gate.reopen_raised(Event(LEVEL_CHANGED, newer, payload))
    await kernel.events.settled()

    assert all(GateDecision.APPROVED is r.decision and r.replayed for r in again)
    assert chains == [len(await kernel.admin_temporal.get_version_chain(r)) for r in (older, newer)]
    assert escalations == await _escalated(kernel)
    seen = await kernel.temporal.current(older, caller=INTERN, count_read=False)
    assert seen is not None
    assert seen.event_time_end is None


async def test_an_ended_record_lowered_below_its_grounds_is_reopened(kernel: Kernel) -> None:
    """The symmetric case: v2.1 ends v2.0 while both are sensitive; the trusted agent then
    lowers v2.0 to agent level, where v2.1 cannot be read: the restricted reader reads v2.0
    open, as if it had been agent-level when v2.1 was written."""
    sensitive = {"source_agent": BOSS.agent_id, "access_level": AccessLevel.SENSITIVE}
    older = await _written(kernel, create(belief(V20, event_time=MARCH, **sensitive), BOSS))
    newer = await _written(kernel, create(belief(V21, event_time=APRIL, **sensitive), BOSS))
    assert (await head_of(kernel, older)).event_time_end is not None, "no supersession"

    await _raised(kernel, older, AccessLevel.AGENT)

    assert await _seen_end(kernel, older) is None
    assert MemoryStatus.CHALLENGED is (await head_of(kernel, newer)).status
    assert [] == await broken_invariants(kernel)
