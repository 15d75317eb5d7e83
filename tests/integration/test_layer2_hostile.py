"""Hostile probes of Layer 2's visibility rule and of resolutions on a caller's behalf: what a
caller may not read must not influence what it gets back, and a write on its behalf changes
only what it may change (ADR-008, ADR-010 as amended 2026-11-25).

Races are made deterministic with a second connection that holds a row lock (or the pending
outbox rows) while the Gate works; nothing in the kernel is replaced."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import asyncpg
from structlog.testing import capture_logs

from engram import Kernel
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.requests import GateRequest, GateResult, result_json
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateDecision,
    MemoryRecord,
    TrustLevel,
)
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import (
    BOSS,
    EXTERNAL,
    INTERN,
    OTHER,
    WRITER,
    belief,
    create,
    update,
)

ADMIN = CallerIdentity.system("admin")
READER = caller_for_tier("agent-reader-2", TrustLevel.STANDARD)
MARCH = datetime(2025, 3, 1, 9, tzinfo=UTC)
APRIL = datetime(2025, 4, 10, 9, tzinfo=UTC)
V20 = "The deploy target for the web app is v2.0."
V21 = "The deploy target for the web app is v2.1."
SECRET = "The incident bridge for the payments outage is room Orion on floor nine."
PII_TEXT = "Reach the on-call lead Dana Whitfield at dana.whitfield@example.com or +1 415 555 0134."
PII_META = {"owner": "dana.whitfield@example.com"}


# --- helpers -------------------------------------------------------------------------------------


async def _approved(kernel: Kernel, request: GateRequest) -> GateResult:
    result = await kernel.gate.evaluate(request)
    assert GateDecision.APPROVED == result.decision, result.reason
    assert result.record_id is not None
    return result


def _record(result: GateResult) -> MemoryRecord:
    assert result.modified_record is not None
    return result.modified_record


def _mentions(result: GateResult, hidden: UUID) -> bool:
    return str(hidden) in json.dumps(result_json(result), default=str)


async def _chain(kernel: Kernel, record_id: UUID) -> list[tuple[int, str, str, Any]]:
    chain = await kernel.temporal.get_version_chain(record_id)
    return [(v.version, v.status.value, v.access_level.value, v.event_time_end) for v in chain]


async def _outcomes(kernel: Kernel, agent_id: str) -> list[tuple[str, str, str]]:
    rows = await kernel.db.fetch(
        "SELECT action, decision, outcome FROM librarian_audit WHERE agent_id = $1 ORDER BY seq",
        agent_id,
    )
    return [(r["action"], r["decision"], r["outcome"]) for r in rows]


@asynccontextmanager
async def _row_locked(database: ScratchDatabase, version_id: UUID) -> AsyncIterator[Any]:
    """Hold ``FOR NO KEY UPDATE`` on one version row (a Gate's head lock waits; edges citing
    it, which take KEY SHARE, do not)."""
    conn = await asyncpg.connect(database.admin_url)
    try:
        tx = conn.transaction()
        await tx.start()
        found = await conn.fetchval(
            "SELECT count(*) FROM (SELECT 1 FROM engram.memories WHERE id = $1"
            " FOR NO KEY UPDATE) AS locked",
            version_id,
        )
        assert 1 == found
        try:
            yield conn
        finally:
            await tx.rollback()
    finally:
        await conn.close()


async def _waiters(conn: Any, n: int) -> None:
    """Wait until ``n`` backends of this database wait for a lock."""
    deadline = asyncio.get_running_loop().time() + 20
    while True:
        # Activity is snapshotted once per transaction, and ``conn`` is inside one.
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        waiting = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        if waiting >= n:
            return
        assert asyncio.get_running_loop().time() < deadline, f"{waiting} of {n} waiters"
        await asyncio.sleep(0.01)


@asynccontextmanager
async def _outbox_held(database: ScratchDatabase) -> AsyncIterator[Any]:
    """A connection that, once ``hold`` is called, keeps every pending outbox row locked
    (the drain skips locked rows) until the block ends."""
    conn = await asyncpg.connect(database.admin_url)
    tx = conn.transaction()
    try:
        await tx.start()

        async def hold(event_type: str) -> int:
            rows = await conn.fetch(
                "SELECT id, event_type FROM engram.outbox WHERE dispatched_at IS NULL"
                " FOR UPDATE NOWAIT"
            )
            return sum(1 for r in rows if r["event_type"] == event_type)

        yield hold
    finally:
        await tx.rollback()
        await conn.close()


# --- findings: resolutions on a caller's behalf -------------------------------------------------


async def test_a_sensitive_newer_value_does_not_end_a_record_a_standard_reader_sees(
    kernel: Kernel,
) -> None:
    """A trusted agent's sensitive v2.1 must not end a standard agent's visible v2.0 (the
    reader would learn the hidden record's existence and event time)."""
    older = await _approved(kernel, create(belief(V20, event_time=MARCH), WRITER))
    hidden = await _approved(
        kernel,
        create(
            belief(
                V21,
                source_agent=BOSS.agent_id,
                event_time=APRIL,
                access_level=AccessLevel.SENSITIVE,
            ),
            BOSS,
        ),
    )
    assert hidden.layer2_decision is not None
    assert ["supersession"] == [c.classification.value for c in hidden.layer2_decision.conflicts]
    await kernel.events.settled()
    assert older.record_id is not None
    seen = await kernel.temporal.current(older.record_id, caller=READER, count_read=False)
    assert seen is not None
    assert (1, None) == (seen.version, seen.event_time_end), (
        "a standard reader sees its record ended at the sensitive record's event time"
    )


async def test_a_quarantined_newer_value_does_not_end_another_agents_visible_record(
    kernel: Kernel,
) -> None:
    """Agent B's v2.1, quarantined for PII in its metadata (so B itself cannot read it), must
    not retire agent A's visible v2.0."""
    older = await _approved(kernel, create(belief(V20, event_time=MARCH), WRITER))
    newer = await _approved(
        kernel,
        create(
            belief(V21, source_agent=OTHER.agent_id, event_time=APRIL, metadata=PII_META), OTHER
        ),
    )
    assert AccessLevel.SENSITIVE == _record(newer).access_level
    await kernel.events.settled()
    assert older.record_id is not None
    assert [(1, "active", "agent", None)] == await _chain(kernel, older.record_id)


async def test_a_resolution_keeps_a_released_record_at_the_level_the_admin_chose(
    kernel: Kernel,
) -> None:
    """Superseding a record an admin released from quarantine must not quarantine it again
    (a standard agent's resolution would write a sensitive version it may not write)."""
    older = await _approved(
        kernel,
        create(
            belief(V20, event_time=MARCH, metadata=PII_META, access_level=AccessLevel.USER),
            WRITER,
        ),
    )
    assert older.record_id is not None
    assert AccessLevel.SENSITIVE == _record(older).access_level
    await kernel.quarantine.release(
        older.record_id, admin=ADMIN, reason="a shared team alias", level=AccessLevel.USER
    )
    await asyncio.sleep(0.002)
    newer = await _approved(
        kernel, create(belief(V21, source_agent=OTHER.agent_id, event_time=APRIL), OTHER)
    )
    assert newer.layer2_decision is not None
    assert ["supersession"] == [c.classification.value for c in newer.layer2_decision.conflicts]
    await kernel.events.settled()
    chain = await _chain(kernel, older.record_id)
    assert [(1, "superseded", "user", None), (2, "active", "user", APRIL)] == chain


async def test_a_resolution_does_not_act_on_a_newer_claim_forgotten_before_delivery(
    kernel: Kernel,
    database: ScratchDatabase,
) -> None:
    """v2.1 is forgotten before its resolution commits: v2.0 must stay valid (the claim that
    would end it was retracted)."""
    older = await _approved(kernel, create(belief(V20, event_time=MARCH), WRITER))
    await kernel.events.settled()
    async with _row_locked(database, _record(older).id):
        newer = await _approved(kernel, create(belief(V21, event_time=APRIL), WRITER))
        assert newer.layer2_decision is not None
        assert ["supersession"] == [c.classification.value for c in newer.layer2_decision.conflicts]
        retracted = await kernel.gate.evaluate(
            GateRequest.forget(_record(newer), WRITER, EXTERNAL, expected_version=1)
        )
        assert GateDecision.APPROVED == retracted.decision, retracted.reason
    await kernel.events.settled()
    assert older.record_id is not None
    assert [(1, "active", "agent", None)] == await _chain(kernel, older.record_id)


async def test_an_escalated_dispute_with_a_record_forgotten_before_delivery_challenges_nothing(
    kernel: Kernel,
    database: ScratchDatabase,
) -> None:
    """The trusted record a restricted agent disputed is forgotten before the outbox delivers:
    the restricted agent's record is not challenged over a record that is gone."""
    older = await _approved(
        kernel,
        create(belief(V20, source_agent=BOSS.agent_id, event_time=MARCH), BOSS),
    )
    await kernel.events.settled()
    async with _outbox_held(database) as hold:
        newer = await _approved(
            kernel,
            create(belief(V21, source_agent=INTERN.agent_id, event_time=APRIL), INTERN),
        )
        assert 1 == await hold("memory.conflicts_found"), "delivery was not held in time"
        gone = await kernel.gate.evaluate(
            GateRequest.forget(_record(older), BOSS, EXTERNAL, expected_version=1)
        )
        assert GateDecision.APPROVED == gone.decision, gone.reason
    await kernel.events.settled()
    assert newer.record_id is not None
    assert [(1, "active", "agent", None)] == await _chain(kernel, newer.record_id)


async def test_resolving_against_an_older_record_forgotten_before_delivery_is_skipped(
    kernel: Kernel,
    database: ScratchDatabase,
) -> None:
    """A supersession whose older record was forgotten before delivery is skipped like one
    that moved on, not proposed to the Gate (and refused) on the resolver's behalf."""
    older = await _approved(kernel, create(belief(V20, event_time=MARCH), WRITER))
    await kernel.events.settled()
    async with _outbox_held(database) as hold:
        await _approved(kernel, create(belief(V21, event_time=APRIL), WRITER))
        assert 1 == await hold("memory.conflicts_found"), "delivery was not held in time"
        gone = await kernel.gate.evaluate(
            GateRequest.forget(_record(older), WRITER, EXTERNAL, expected_version=1)
        )
        assert GateDecision.APPROVED == gone.decision, gone.reason
    await kernel.events.settled()
    assert [] == await _outcomes(kernel, "system:conflict-resolver")


async def test_a_metadata_only_update_does_not_lower_a_records_standing(kernel: Kernel) -> None:
    """Standing is 'the tier of the agent whose write gave the record its current content':
    a standard agent tagging a trusted agent's fact does not let a standard agent's inferred
    supersession retire it."""
    older = await _approved(
        kernel, create(belief(V20, source_agent=BOSS.agent_id, event_time=MARCH), BOSS)
    )
    assert older.record_id is not None
    tagged = await _approved(
        kernel,
        update(older.record_id, V20, 1, WRITER, event_time=MARCH, metadata={"reviewed": True}),
    )
    assert "updated" == tagged.outcome.value
    await _approved(
        kernel, create(belief(V21, source_agent=OTHER.agent_id, event_time=APRIL), OTHER)
    )
    await kernel.events.settled()
    head = await kernel.temporal.current(older.record_id, count_read=False)
    assert head is not None
    assert (2, None) == (head.version, head.event_time_end)


# --- findings: the no-op UPDATE ------------------------------------------------------------------


async def test_an_update_that_only_raises_the_access_level_is_not_a_noop(kernel: Kernel) -> None:
    """A trusted agent moving a record to 'sensitive' without touching its text gets a new
    version at that level, not 'reinforced' with the record left readable to everyone."""
    created = await _approved(kernel, create(belief(SECRET, source_agent=BOSS.agent_id), BOSS))
    assert created.record_id is not None
    hide = update(created.record_id, SECRET, 1, BOSS, access_level=AccessLevel.SENSITIVE)
    result = await _approved(kernel, hide)
    seen = await kernel.temporal.current(created.record_id, caller=READER, count_read=False)
    assert ("updated", None) == (result.outcome.value, seen)


async def test_an_update_that_only_moves_the_namespace_is_not_a_noop(kernel: Kernel) -> None:
    """An UPDATE that changes only the namespace is either carried out or refused, never
    approved as 'reinforced' while nothing moves."""
    created = await _approved(kernel, create(belief(V20), WRITER))
    assert created.record_id is not None
    result = await kernel.gate.evaluate(update(created.record_id, V20, 1, WRITER, namespace="ops"))
    head = await kernel.temporal.current(created.record_id, count_read=False)
    assert head is not None
    assert not (result.outcome.value == "reinforced" and head.namespace == "default")


# --- findings: replay and history ----------------------------------------------------------------


async def test_citing_a_record_whose_head_became_sensitive_answers_as_citing_an_unknown_one(
    kernel: Kernel,
) -> None:
    """A record whose head is above the caller's read level is absent for it (UPDATE and
    FORGET say 'no record'), so citing it must be refused like citing an unknown id."""
    cited = await _approved(kernel, create(belief(V20, source_agent=BOSS.agent_id), BOSS))
    assert cited.record_id is not None
    await _approved(
        kernel,
        update(cited.record_id, SECRET, 1, BOSS, access_level=AccessLevel.SENSITIVE),
    )
    answers = []
    for ref in (cited.record_id, uuid.uuid4()):
        result = await kernel.gate.evaluate(
            create(
                belief("The payments outage review is on Friday.", evidence_links=(ref,)), WRITER
            )
        )
        answers.append((result.decision.value, result.reason.replace(str(ref), "<id>")))
    assert answers[0] == answers[1]


async def test_replay_reproduces_a_rejection_for_citing_a_record_that_became_hidden(
    kernel: Kernel,
) -> None:
    """Citing a record whose first and current versions are sensitive was refused; replay must
    reach the same verdict (it must not accept the citation through a visible middle version)."""
    cited = await _approved(
        kernel,
        create(belief(V20, source_agent=BOSS.agent_id, access_level=AccessLevel.SENSITIVE), BOSS),
    )
    assert cited.record_id is not None
    await _approved(kernel, update(cited.record_id, V21, 1, BOSS, access_level=AccessLevel.USER))
    await _approved(
        kernel, update(cited.record_id, SECRET, 2, BOSS, access_level=AccessLevel.SENSITIVE)
    )
    refused = await kernel.gate.evaluate(
        create(
            belief("The payments outage review is on Friday.", evidence_links=(cited.record_id,)),
            WRITER,
        )
    )
    assert GateDecision.REJECTED == refused.decision, refused.reason
    await asyncio.sleep(0.002)
    report = await kernel.replay.replay()
    row = next(d for d in report.decisions if d.decision_id == str(refused.decision_id))
    assert () == row.reasons


async def test_past_reads_of_a_record_whose_head_became_sensitive_name_no_hidden_version(
    kernel: Kernel,
) -> None:
    """A standard reader reading a record as of before its head became sensitive (GET
    /memories/{id}?as_of_ingestion=...), or its versions, is not told the hidden version's id."""
    created = await _approved(kernel, create(belief(V20), WRITER))
    assert created.record_id is not None
    await asyncio.sleep(0.002)
    between = datetime.now(UTC)
    await asyncio.sleep(0.002)
    hidden = await _approved(
        kernel,
        update(created.record_id, SECRET, 1, BOSS, access_level=AccessLevel.SENSITIVE),
    )
    assert await kernel.temporal.current(created.record_id, caller=READER) is None
    then = await kernel.temporal.query(
        record_id=created.record_id, as_of_ingestion=between, caller=READER, count_read=False
    )
    versions = await kernel.temporal.query(
        record_id=created.record_id, include_superseded=True, caller=READER, count_read=False
    )
    leaked = [
        (v.version, str(v.superseded_by))
        for v in [*then, *versions]
        if v.superseded_by == _record(hidden).id
    ]
    assert [] == leaked


# --- regressions (expected to hold) --------------------------------------------------------------


async def test_an_unchanged_update_of_a_record_that_became_sensitive_answers_as_unknown(
    kernel: Kernel,
) -> None:
    """A standard agent restating v1 after a trusted agent made v2 sensitive gets the answer
    for an unknown id and reinforces nothing."""
    created = await _approved(kernel, create(belief(V20), WRITER))
    assert created.record_id is not None
    await _approved(
        kernel,
        update(created.record_id, SECRET, 1, BOSS, access_level=AccessLevel.SENSITIVE),
    )
    unknown = uuid.uuid4()
    answers = []
    for record_id in (created.record_id, unknown):
        result = await kernel.gate.evaluate(update(record_id, V20, 1, WRITER))
        answers.append(
            (
                result.decision.value,
                result.reason.replace(str(record_id), "<id>"),
                result.current_version,
                result.layer2_decision,
            )
        )
    assert answers[0] == answers[1]
    assert 0 == await kernel.db.fetchval(
        "SELECT count(*) FROM librarian_audit WHERE outcome = 'reinforced'"
    )


async def test_an_unchanged_update_racing_a_move_to_sensitive_names_no_version(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """The trusted agent's move to 'sensitive' commits while a standard agent's restatement of
    v1 waits for the head lock: CONFLICT without a version, and nothing reinforced."""
    created = await _approved(kernel, create(belief(V20), WRITER))
    first = _record(created)
    async with _row_locked(database, first.id) as conn:
        hide = asyncio.ensure_future(
            kernel.gate.evaluate(
                update(
                    first.record_id,
                    V20,
                    1,
                    BOSS,
                    access_level=AccessLevel.SENSITIVE,
                    metadata={"classified": True},
                )
            )
        )
        await _waiters(conn, 1)
        restate = asyncio.ensure_future(
            kernel.gate.evaluate(update(first.record_id, V20, 1, WRITER))
        )
        await _waiters(conn, 2)
    hidden, answer = await asyncio.gather(hide, restate)
    assert "updated" == hidden.outcome.value, hidden.reason
    assert (GateDecision.CONFLICT, None) == (answer.decision, answer.current_version)
    assert "current version is None" in answer.reason
    assert 1 == await kernel.db.fetchval("SELECT repetitions FROM memories WHERE id = $1", first.id)
    assert 1 == await kernel.db.fetchval(
        "SELECT count(*) FROM librarian_audit WHERE decision_id = $1", answer.decision_id
    )


async def test_a_duplicate_that_turns_sensitive_while_a_create_waits_is_planned_again(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A CREATE advised to reinforce a record that becomes sensitive before the lock is planned
    again and stores the caller's own copy: one audit row, the hidden record not named."""
    dup = await _approved(kernel, create(belief(SECRET, source_agent=BOSS.agent_id), BOSS))
    first = _record(dup)
    with capture_logs() as logs:
        async with _row_locked(database, first.id) as conn:
            hide = asyncio.ensure_future(
                kernel.gate.evaluate(
                    update(
                        first.record_id,
                        SECRET,
                        1,
                        BOSS,
                        access_level=AccessLevel.SENSITIVE,
                        metadata={"classified": True},
                    )
                )
            )
            await _waiters(conn, 1)
            repost = asyncio.ensure_future(kernel.gate.evaluate(create(belief(SECRET), WRITER)))
            await _waiters(conn, 2)
        hidden, answer = await asyncio.gather(hide, repost)
    assert [1] == [e["attempt"] for e in logs if e["event"] == "gate.replanned"]
    assert "updated" == hidden.outcome.value, hidden.reason
    assert ("approved", "created") == (answer.decision.value, answer.outcome.value), answer.reason
    assert answer.record_id != first.record_id
    assert not _mentions(answer, first.record_id)
    assert [1, 1] == [
        r["repetitions"]
        for r in await kernel.db.fetch(
            "SELECT repetitions FROM memories WHERE record_id = $1 ORDER BY version",
            first.record_id,
        )
    ]
    assert 1 == await kernel.db.fetchval(
        "SELECT count(*) FROM librarian_audit WHERE decision_id = $1", answer.decision_id
    )


async def test_a_restricted_agent_meets_user_level_records_as_unknown(kernel: Kernel) -> None:
    """UPDATE and FORGET of a user-level record by a restricted agent answer as for an unknown
    id; repeating its text stores the restricted agent's own copy."""
    visible = await _approved(kernel, create(belief(V20, access_level=AccessLevel.USER), WRITER))
    assert visible.record_id is not None
    unknown = uuid.uuid4()
    for action in ("update", "forget"):
        answers = []
        for record_id in (visible.record_id, unknown):
            if action == "update":
                request = update(record_id, V21, 1, INTERN)
            else:
                target = belief("x", record_id=record_id, source_agent=INTERN.agent_id)
                request = GateRequest.forget(target, INTERN, EXTERNAL, expected_version=1)
            result = await kernel.gate.evaluate(request)
            answers.append((result.decision.value, result.reason.replace(str(record_id), "<id>")))
        assert answers[0] == answers[1], action
    copy = await _approved(kernel, create(belief(V20, source_agent=INTERN.agent_id), INTERN))
    assert ("created", False) == (copy.outcome.value, _mentions(copy, visible.record_id))


async def test_citing_a_hidden_record_answers_as_citing_an_unknown_one(kernel: Kernel) -> None:
    """Evidence naming a sensitive record is refused exactly like evidence naming no record."""
    hidden = _record(
        await _approved(
            kernel,
            create(
                belief(SECRET, source_agent=BOSS.agent_id, access_level=AccessLevel.SENSITIVE),
                BOSS,
            ),
        )
    )
    answers = []
    for ref in (hidden.record_id, hidden.id, uuid.uuid4()):
        result = await kernel.gate.evaluate(
            create(
                belief("The payments outage review is on Friday.", evidence_links=(ref,)), WRITER
            )
        )
        answers.append((result.decision.value, result.reason.replace(str(ref), "<id>")))
    assert answers[0] == answers[1] == answers[2]


async def test_repeating_ones_own_quarantined_text_stores_a_second_copy(kernel: Kernel) -> None:
    """An agent cannot read its own quarantined record, so repeating it neither names nor
    reinforces the first copy."""
    first = await _approved(kernel, create(belief(PII_TEXT), WRITER))
    assert first.record_id is not None
    second = await _approved(kernel, create(belief(PII_TEXT), WRITER))
    assert ("created", False) == (second.outcome.value, _mentions(second, first.record_id))
    assert 1 == await kernel.db.fetchval(
        "SELECT repetitions FROM memories WHERE id = $1", _record(first).id
    )


async def test_replay_reproduces_decisions_made_beside_hidden_and_released_records(
    kernel: Kernel,
) -> None:
    """Layer 2 decisions beside a sensitive record and a released quarantine replay the same."""
    await _approved(
        kernel,
        create(
            belief(SECRET, source_agent=BOSS.agent_id, access_level=AccessLevel.SENSITIVE), BOSS
        ),
    )
    await _approved(kernel, create(belief(SECRET), WRITER))
    quarantined = await _approved(kernel, create(belief(PII_TEXT), WRITER))
    assert quarantined.record_id is not None
    await asyncio.sleep(0.002)
    await kernel.quarantine.release(
        quarantined.record_id, admin=ADMIN, reason="a shared team alias", level=AccessLevel.USER
    )
    await asyncio.sleep(0.002)
    again = await _approved(kernel, create(belief(PII_TEXT, source_agent=OTHER.agent_id), OTHER))
    assert ("reinforced", quarantined.record_id) == (again.outcome.value, again.record_id)
    await kernel.events.settled()
    await asyncio.sleep(0.002)
    report = await kernel.replay.replay()
    assert [] == [(d.action, d.agent_id, d.reasons) for d in report.changed]
