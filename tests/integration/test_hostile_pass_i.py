"""Hostile pass I: the per-process lock a CREATE holds on its content (gate.serial), taken
by writers through ``AgentSession`` at once, one of them cancelled while it holds the lock or
while it waits for it. These tests passed when written: they pin what was checked."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any

import asyncpg

from engram import Kernel
from engram.memory.gate.requests import GateRequest
from engram.memory.types import AccessLevel, GateDecision, WriteOutcome
from engram.protocols.inprocess import AgentSession
from engram.protocols.mcp.tools import EngramTools
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import (
    BOSS,
    EXTERNAL,
    FAST,
    OTHER,
    WRITER,
    belief,
    create,
    lock_waiters,
)
from tests.integration.race_helpers import broken_invariants

CONTENT = "The nightly export job writes its files to the archive bucket."
BODY = {"type": "belief", "content": CONTENT}
MOVED = {"type": "belief", "content": "The incident bridge moved to room Vega."}
SECRET = "The incident bridge for the payments outage is room Orion on floor nine."


async def _live_heads(kernel: Kernel, content: str) -> int:
    count = await kernel.db.fetchval(
        "SELECT count(*) FROM memories WHERE content = $1 AND superseded_by IS NULL", content
    )
    return int(count)


async def _waiting_in_database(admin: asyncpg.Connection) -> int:
    count = await admin.fetchval(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock' AND datname = current_database()"
    )
    return int(count)


async def test_a_writer_cancelled_inside_its_commit_lets_the_next_writer_of_its_content_on(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """The first writer's commit waits for the audit log's lanes (held by another session),
    the second writer of the same content waits for the first; the first is cancelled (a
    client gone). Its lock is released with it: the second writes the content once the lanes
    are free, and no lock is left behind."""
    admin = await asyncpg.connect(database.admin_url)
    try:
        held = admin.transaction()
        await held.start()
        await admin.execute("SELECT 1 FROM engram.audit_chain_heads FOR UPDATE")
        first = asyncio.create_task(AgentSession(kernel, WRITER).remember(BODY))
        await lock_waiters(admin, 1)  # the first holds the content's lock, in its commit
        second = asyncio.create_task(AgentSession(kernel, OTHER).remember(BODY))
        await asyncio.sleep(0.3)
        assert not second.done()
        assert 1 == await _waiting_in_database(admin)  # the second waits in the process
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first
        await lock_waiters(admin, 1)  # the second reached its own commit
        await held.rollback()
        result = await asyncio.wait_for(second, 30)
    finally:
        await admin.close()
    assert (result.decision, result.outcome) == (GateDecision.APPROVED, WriteOutcome.CREATED)
    assert 1 == await _live_heads(kernel, CONTENT)
    assert 0 == len(kernel.gate._same_content)  # the lock table is empty
    assert [] == await broken_invariants(kernel)


async def test_a_writer_cancelled_while_it_waits_leaves_the_others_in_order(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Three writers of one content; the second is cancelled while it waits for the first.
    The first creates the record, the third reinforces it, nothing is left locked."""
    admin = await asyncpg.connect(database.admin_url)
    try:
        held = admin.transaction()
        await held.start()
        await admin.execute("SELECT 1 FROM engram.audit_chain_heads FOR UPDATE")
        first = asyncio.create_task(AgentSession(kernel, WRITER).remember(BODY))
        await lock_waiters(admin, 1)
        waiting = [
            asyncio.create_task(AgentSession(kernel, OTHER).remember(BODY)) for _ in range(2)
        ]
        await asyncio.sleep(0.3)
        waiting[0].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting[0]
        await held.rollback()
        created = await asyncio.wait_for(first, 30)
        again = await asyncio.wait_for(waiting[1], 30)
    finally:
        await admin.close()
    assert created.outcome is WriteOutcome.CREATED, created.reason
    assert again.outcome is WriteOutcome.REINFORCED, again.reason
    assert again.record_id == created.record_id
    assert 1 == await _live_heads(kernel, CONTENT)
    assert 0 == len(kernel.gate._same_content)  # the lock table is empty
    assert [] == await broken_invariants(kernel)


# --- forgotten_since: what a refusal answered "not found" may tell ---------------------------


def _without_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k != "decision_id"}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


async def test_update_and_forget_of_a_hidden_forgotten_record_answer_as_for_an_unknown_one(
    kernel: Kernel,
) -> None:
    """A sensitive record its trusted writer then forgot, and an id never used: through
    AgentSession and the MCP tools a standard agent gets the same answers for both (the
    not-found answer of a write that lost to a forget is given only for a record the caller
    may read)."""
    record = belief(SECRET, source_agent=BOSS.agent_id, access_level=AccessLevel.SENSITIVE)
    written = await kernel.gate.evaluate(create(record, BOSS))
    assert written.record_id is not None, written.reason
    head = await kernel.temporal.current(written.record_id)
    assert head is not None
    forgotten = await kernel.gate.evaluate(
        GateRequest.forget(head, BOSS, EXTERNAL, expected_version=head.version)
    )
    assert forgotten.approved, forgotten.reason
    _, token = await kernel.agents.add("mcp-i", WRITER.trust_level, writes_per_minute=FAST)
    principal = await kernel.agents.authenticate(token)
    session, tools = AgentSession(kernel, principal.caller), EngramTools(kernel)
    answers = []
    for record_id in (written.record_id, uuid.uuid4()):
        update = await session.update(record_id, MOVED, expected_version=2)
        forget = await session.forget(record_id, expected_version=2)
        said = [
            await tools.call(name, {"record_id": str(record_id), **extra}, principal)
            for name, extra in (("update", {**MOVED, "expected_version": 2}), ("forget", {}))
        ]
        answers.append(
            json.dumps(
                [[r.decision.value, r.reason] for r in (update, forget)]
                + [[t.is_error, _without_ids(t.structured_content)] for t in said],
                sort_keys=True,
            ).replace(str(record_id), "<id>")
        )
    assert answers[0] == answers[1]
