"""An UPDATE in one statement (engram.memory.gate.at_once.update_at_once, ADR-016).

It must store what the transactional path stores (the head closed, the next version, the
``supersedes`` edge, the events, an audit row stamped with the version's time), and when the
head it was planned against changed before the statement ran, it must write nothing and let
the transactional path answer: a version conflict for a writer that named the version, none
for a head now beyond the writer's reach. The changes are made by other sessions holding the
head's row lock, as concurrent writers and admins do.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any
from uuid import UUID

import pytest

from engram.kernel import Kernel
from engram.memory.gate import at_once, write_path
from engram.memory.gate.requests import GateResult
from engram.memory.types import GateDecision, MemoryRecord, WriteOutcome
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import (
    WRITER,
    HeldHead,
    belief,
    create,
    holding_head,
    lock_waiters,
)
from tests.integration.gate_helpers import update as update_request

UPDATED = "memory.updated"


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each UPDATE the one-statement path took: whether it wrote (behaviour unchanged)."""
    calls: list[bool] = []
    real = at_once.update_at_once

    async def observed(*args: Any, **kwargs: Any) -> Any:
        answer = await real(*args, **kwargs)
        calls.append(answer is not None)
        return answer

    monkeypatch.setattr(write_path, "update_at_once", observed)
    return calls


async def _created(kernel: Kernel, text: str) -> MemoryRecord:
    record = belief(text, source_agent=WRITER.agent_id)
    result = await kernel.gate.evaluate(create(record, WRITER))
    assert result.outcome is WriteOutcome.CREATED, result.reason
    return record


async def _stored(kernel: Kernel, record_id: UUID, decision_id: UUID) -> dict[str, Any]:
    """Everything an UPDATE wrote, without the ids and times that differ between records."""
    versions = await kernel.db.fetch(
        "SELECT id, version, status::text AS status, superseded_by, ingestion_time, "
        "ingestion_time_end, expected_version, gate_decision_type, consolidation_path, "
        "importance, embedding IS NOT NULL AS embedded "
        "FROM memories WHERE record_id = $1 ORDER BY version",
        record_id,
    )
    old, new = versions
    edges = await kernel.db.fetch(
        "SELECT target_id, kind, weight, provenance FROM memory_edges WHERE source_id = $1 "
        "ORDER BY kind",
        new["id"],
    )
    events = await kernel.db.fetch(
        "SELECT event_type, aggregate_id, payload FROM outbox WHERE decision_id = $1 ORDER BY id",
        decision_id,
    )
    audit = await kernel.db.fetchrow(
        "SELECT occurred_at, reason, version_id, record_id, outcome FROM librarian_audit "
        "WHERE decision_id = $1",
        decision_id,
    )
    assert audit is not None
    payloads = [
        json.loads(e["payload"]) if isinstance(e["payload"], str) else dict(e["payload"])
        for e in events
    ]
    return {
        "closed": (old["status"], old["superseded_by"] == new["id"]),
        "one_instant": old["ingestion_time_end"] == new["ingestion_time"] == audit["occurred_at"],
        "new": (
            new["version"],
            new["status"],
            new["expected_version"],
            new["gate_decision_type"],
            new["consolidation_path"],
            new["embedded"],
        ),
        "edges": [
            (e["kind"], e["target_id"] == old["id"], e["weight"], dict(e["provenance"]))
            for e in edges
        ],
        "events": [
            (e["event_type"], e["aggregate_id"] == record_id, sorted(p))
            for e, p in zip(events, payloads, strict=True)
        ],
        "versions_named": [p.get("version") for p in payloads],
        "audit": (audit["reason"], audit["version_id"] == new["id"], audit["outcome"]),
    }


async def test_an_update_at_once_stores_what_the_transactional_path_stores(
    kernel: Kernel, written: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two records of one shape, one updated in one statement and one through the
    transactional path (chosen by turning the predicate off): the same rows either way, the
    head's end, the version's start and the audit row's time one instant, and the chain
    verifies across both."""
    texts = (
        "The billing service's nightly export writes to the analytics bucket.",
        "The search indexer's weekly rebuild reads from the catalogue replica.",
    )
    first, second = [await _created(kernel, text) for text in texts]
    one = await kernel.gate.evaluate(
        update_request(first.record_id, texts[0] + " It runs at 02:00.", 1, WRITER)
    )
    assert (one.outcome, one.version, written) == (WriteOutcome.UPDATED, 2, [True])
    monkeypatch.setattr(write_path, "updates_at_once", lambda plan: False)
    other = await kernel.gate.evaluate(
        update_request(second.record_id, texts[1] + " It runs at 03:00.", 1, WRITER)
    )
    assert (other.outcome, other.version, written) == (WriteOutcome.UPDATED, 2, [True])
    at_once_rows = await _stored(kernel, first.record_id, one.decision_id)
    transactional_rows = await _stored(kernel, second.record_id, other.decision_id)
    assert at_once_rows == transactional_rows
    assert at_once_rows["closed"] == ("superseded", True)
    assert at_once_rows["one_instant"]
    assert [e[0] for e in at_once_rows["edges"]] == ["supersedes"]
    assert at_once_rows["edges"][0][3] == {"reason": "update", "agent": WRITER.agent_id}
    assert [e[0] for e in at_once_rows["events"]] == [UPDATED]
    assert (await kernel.audit.verify()).ok


async def test_an_update_that_raises_the_level_announces_it_after_the_version(
    kernel: Kernel, written: list[bool]
) -> None:
    """New content carrying an address is quarantined above the head's level: the one
    statement publishes ``memory.updated`` then ``memory.level_changed``, as the
    transactional path does."""
    record = await _created(kernel, "The on-call rota for checkout is kept in the wiki.")
    result = await kernel.gate.evaluate(
        update_request(
            record.record_id,
            "The on-call rota for checkout is kept by jana.novak@example.com.",
            1,
            WRITER,
        )
    )
    assert result.outcome is WriteOutcome.UPDATED, result.reason
    assert written == [True]
    events = await kernel.db.fetch(
        "SELECT event_type, payload FROM outbox WHERE decision_id = $1 ORDER BY id",
        result.decision_id,
    )
    assert [e["event_type"] for e in events] == [UPDATED, "memory.level_changed"]
    moved = events[1]["payload"]
    moved = json.loads(moved) if isinstance(moved, str) else moved
    assert (moved["from_level"], moved["to_level"]) == ("agent", "sensitive")
    await kernel.events.settled()
    assert (await kernel.audit.verify()).ok


async def test_two_updates_of_one_version_store_one_and_answer_the_other_with_a_conflict(
    kernel: Kernel, database: ScratchDatabase, written: list[bool]
) -> None:
    """Two writers plan against version 1 while another session holds the head's lock.
    When it lets go, one statement closes the head and the other finds it closed: that one
    writes nothing, and the transactional path answers it with a version conflict naming
    version 2. One new version, one approved audit row, and the chain verifies."""
    record = await _created(kernel, "The payments gateway retries a failed capture twice.")
    texts = (
        "The payments gateway retries a failed capture three times.",
        "The payments gateway retries a failed capture four times.",
    )
    async with holding_head(database.admin_url, record.record_id) as held:
        racing = [
            asyncio.create_task(
                kernel.gate.evaluate(update_request(record.record_id, text, 1, WRITER))
            )
            for text in texts
        ]
        await lock_waiters(held.watch, 2)
        await held.release()
        results = await asyncio.gather(*racing)
    assert sorted(r.decision.value for r in results) == ["approved", "conflict"]
    assert sorted(written) == [False, True]
    loser = next(r for r in results if r.decision is GateDecision.CONFLICT)
    assert "2" in loser.reason, loser.reason
    assert 2 == await kernel.db.fetchval(
        "SELECT count(*) FROM memories WHERE record_id = $1", record.record_id
    )
    assert 1 == await kernel.db.fetchval(
        "SELECT count(*) FROM librarian_audit WHERE record_id = $1 AND action = 'UPDATE' "
        "AND decision = 'approved'",
        record.record_id,
    )
    assert (await kernel.audit.verify()).ok


async def test_an_update_whose_head_was_raised_meanwhile_writes_nothing_it_may_not(
    kernel: Kernel, database: ScratchDatabase, written: list[bool]
) -> None:
    """While a writer's update waits for the head's lock, an admin's session raises the
    head to ``sensitive`` in place (as a quarantine does) and commits. The statement finds
    the head at another level than it was planned against and writes nothing; the
    transactional path then finds a head the writer may not read and answers as for a
    record it does not know. The head stays as the admin left it."""
    record = await _created(kernel, "The staging cluster's certificates renew on Mondays.")
    async with holding_head(database.admin_url, record.record_id) as held:
        running, _ = await _waiting_update(
            kernel, held, record.record_id, "The staging cluster's certificates renew on Tuesdays."
        )
        await held.admin.execute(
            "UPDATE engram.memories SET access_level = 'sensitive' "
            "WHERE record_id = $1 AND superseded_by IS NULL",
            record.record_id,
        )
        assert held.held is not None
        await held.held.commit()
        held.held = None
        result = await running
    assert result.decision is GateDecision.CONFLICT, result.reason
    assert written == [False]
    assert str(record.record_id) not in result.reason
    rows = await kernel.db.fetch(
        "SELECT version, status::text AS status, access_level FROM memories WHERE record_id = $1",
        record.record_id,
    )
    assert [(r["version"], r["status"], r["access_level"]) for r in rows] == [
        (1, "active", "sensitive")
    ]
    assert (await kernel.audit.verify()).ok


#: The backends of this database waiting for a lock.
_LOCK_WAITERS = (
    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
    "AND datname = current_database()"
)


async def _waiting_update(
    kernel: Kernel, held: HeldHead, record_id: UUID, content: str
) -> tuple[asyncio.Task[GateResult], int]:
    """The writer's update of ``record_id`` (from version 1) to ``content``, started and
    waiting for ``held``'s lock: its task and the backend that waits."""
    running = asyncio.create_task(
        kernel.gate.evaluate(update_request(record_id, content, 1, WRITER))
    )
    await lock_waiters(held.watch, 1)
    pid: int = await held.watch.fetchval(_LOCK_WAITERS)
    return running, pid


def _close_socket_of(kernel: Kernel, server_pid: int) -> None:
    """Shut down, on the kernel's side, the socket of its pooled connection served by the
    backend ``server_pid``: the kernel loses the connection, the server does not notice
    until it answers (a closed socket, not a killed backend)."""
    pool = kernel.db._pool  # type: ignore[attr-defined]
    for holder in pool._holders:
        con = holder._con
        if con is not None and not con.is_closed() and con.get_server_pid() == server_pid:
            con._transport.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
            return
    raise AssertionError(f"no pooled connection is served by backend {server_pid}")


async def test_a_retry_whose_first_attempt_committed_after_its_connection_was_lost_is_answered(
    kernel: Kernel, database: ScratchDatabase, written: list[bool]
) -> None:
    """The update's statement waits for the head's lock, and the kernel's side of its
    connection is closed: the driver retries on another connection, whose statement waits
    behind the first. When the lock is let go, the server finishes the first statement and
    commits it although nobody hears the answer; the retry then finds the head closed. It
    must look for its decision before falling back: the transactional path would have found
    the writer's own version 2 and answered a conflict for a write that was stored."""
    record = await _created(kernel, "The build cache for the monorepo is kept for seven days.")
    async with holding_head(database.admin_url, record.record_id) as held:
        running, first = await _waiting_update(
            kernel,
            held,
            record.record_id,
            "The build cache for the monorepo is kept for fourteen days.",
        )
        _close_socket_of(kernel, first)
        await lock_waiters(held.watch, 2)  # the retry, behind the first attempt
        await held.release()
        result = await running
    assert (result.decision, result.outcome, result.version) == (
        GateDecision.APPROVED,
        WriteOutcome.UPDATED,
        2,
    ), result.reason
    assert 2 == await kernel.db.fetchval(
        "SELECT count(*) FROM memories WHERE record_id = $1", record.record_id
    )
    assert [("approved", 1)] == [
        (r["decision"], r["n"])
        for r in await kernel.db.fetch(
            "SELECT decision, count(*) AS n FROM librarian_audit "
            "WHERE record_id = $1 AND action = 'UPDATE' GROUP BY decision",
            record.record_id,
        )
    ]
    assert (await kernel.audit.verify()).ok


async def test_an_update_whose_backend_is_killed_while_it_waits_is_written_once(
    kernel: Kernel, database: ScratchDatabase, written: list[bool]
) -> None:
    """The backend running the update's statement is terminated while it waits for the
    head's lock: the statement dies whole (no closed head, no version, no audit row), the
    driver retries on another connection, and once the lock is let go the update is stored
    once, as version 2."""
    record = await _created(kernel, "The release train leaves every second Thursday.")
    async with holding_head(database.admin_url, record.record_id) as held:
        running, victim = await _waiting_update(
            kernel, held, record.record_id, "The release train leaves every Thursday."
        )
        assert await held.watch.fetchval("SELECT pg_terminate_backend($1)", victim)
        for _ in range(1000):  # until the retry waits, on another connection
            waiting = await held.watch.fetch(_LOCK_WAITERS)
            if any(row["pid"] != victim for row in waiting):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the update was not retried on another connection")
        await held.release()
        result = await running
    assert (result.decision, result.version) == (GateDecision.APPROVED, 2), result.reason
    assert written == [True]
    rows = await kernel.db.fetch(
        "SELECT version, status::text AS status FROM memories WHERE record_id = $1 "
        "ORDER BY version",
        record.record_id,
    )
    assert [(r["version"], r["status"]) for r in rows] == [(1, "superseded"), (2, "active")]
    assert 1 == await kernel.db.fetchval(
        "SELECT count(*) FROM librarian_audit WHERE record_id = $1 AND action = 'UPDATE'",
        record.record_id,
    )
    assert (await kernel.audit.verify()).ok
