"""Hostile pass W, probes that held: self-healing raced by an agent and cut by a lost
acknowledgement, and a webhook receiver that hangs up mid-answer.

Each test passed on the code it was written against and stays as a regression test. Real
embedded PostgreSQL, the real embedding model, real faults (a row lock another session holds,
a backend terminated while its COMMIT waits, a socket closed mid-response), no mocks.
"""

from __future__ import annotations

import asyncio
import uuid
from uuid import UUID

import pytest

from engram import Kernel
from engram.errors import WebhookUnavailable
from engram.infra.events import Event
from engram.infra.webhook import WebhookSink
from engram.memory.types import AccessLevel, GateDecision
from engram.notifications.dispatcher import AdminQueue, NotificationDispatcher
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import head_of
from tests.integration.gate_helpers import (
    INTERN,
    WRITER,
    belief,
    holding_head,
    lock_waiters,
    update,
)
from tests.integration.lost_ack import with_lost_ack
from tests.integration.test_hostile_pass_s import Receiver
from tests.integration.test_self_healing import MARKER, assert_flagged, rescan, write

TEXT = f"The {MARKER} launch moves to the spring offsite in Lisbon."
MOVED = f"The {MARKER} launch moves to the autumn offsite in Porto."


async def _audit_rows(kernel: Kernel, decision_id: UUID | None) -> int:
    count: int = await kernel.db.fetchval(
        "SELECT count(*) FROM librarian_audit WHERE decision_id = $1", decision_id
    )
    return count


async def test_a_rescan_raced_by_the_writers_update_loses_nothing_and_audits_each_once(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """The rescan's flag and the writer's own UPDATE of the same record wait on one row lock
    and go in that order: the flag is stored, the update is refused as a conflict, each is
    one audit row, and no reader below ``sensitive`` reads any version of the record."""
    record_id = await write(kernel, belief(TEXT))
    async with holding_head(database.admin_url, record_id) as held:
        pass_ = asyncio.create_task(rescan(kernel).run())
        await lock_waiters(held.watch, 1)
        updating = asyncio.create_task(
            kernel.gate.evaluate(update(record_id, MOVED, expected_version=1, caller=WRITER))
        )
        await lock_waiters(held.watch, 2)
        await held.release()
        report, result = await pass_, await updating
    assert (report.flagged, report.refused) == (1, 0)
    assert GateDecision.CONFLICT is result.decision, result.reason
    assert 1 == await _audit_rows(kernel, result.decision_id)
    head = await head_of(kernel, record_id)
    assert_flagged(head)
    assert (2, TEXT) == (head.version, head.content)
    assert 1 == await _audit_rows(kernel, head.gate_decision_id)
    for reader in (INTERN, WRITER):
        assert [] == await kernel.temporal.query(record_id=record_id, caller=reader)
    again = await rescan(kernel).run()
    assert (again.scanned, again.flagged, again.refused) == (0, 0, 0)


async def test_a_flag_whose_commit_acknowledgement_is_lost_is_stored_and_audited_once(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """The rescan's self-healing UPDATE commits, and its backend is terminated before the
    kernel hears so: the retry finds its own decision; the record is raised once (one new
    version, one audit row), counted flagged, and the next pass has nothing to read."""
    record_id = await write(kernel, belief(TEXT))
    report = await with_lost_ack(database.admin_url, rescan(kernel).run(), "memories")
    assert (report.flagged, report.refused) == (1, 0), report
    head = await head_of(kernel, record_id)
    assert_flagged(head)
    assert 2 == head.version
    rows = await kernel.db.fetchval(
        "SELECT count(*) FROM librarian_audit WHERE record_id = $1 "
        "AND decision_type = 'self_healing'",
        record_id,
    )
    assert 1 == rows
    assert AccessLevel.SENSITIVE is head.access_level
    again = await rescan(kernel).run()
    assert (again.scanned, again.flagged) == (0, 0)


async def _hang_up(writer: asyncio.StreamWriter) -> None:
    """Half a status line, then the socket is closed."""
    writer.write(b"HTTP/1.1 2")
    await writer.drain()


@pytest.mark.timeout(60)
async def test_a_receiver_hanging_up_mid_answer_defers_the_escalation_and_queues_it_once(
    kernel: Kernel,
) -> None:
    """A webhook receiver reads each escalation and closes the socket before its status: the
    sink tries again and then reports the webhook unavailable (an infrastructure error, so
    the outbox delivers the event again), every attempt carries the same key and no
    content, and the admin queue keeps one row however often the event comes back."""
    bodies: list[bytes] = []

    class Recording(Receiver):
        async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            bodies.append(await reader.readexactly(length))
            await _hang_up(writer)
            writer.close()

    record_id = uuid.uuid4()
    event = Event(
        "memory.conflict_detected",
        record_id,
        {"decision_id": str(uuid.uuid4()), "classification": "unresolvable"},
    )
    async with Recording(_hang_up) as url:
        sink = WebhookSink(url, retries=2, initial_wait_seconds=0.05, pause_seconds=0.0)
        dispatcher = NotificationDispatcher([AdminQueue(kernel.db), sink])
        for _ in range(2):
            with pytest.raises(WebhookUnavailable):
                await dispatcher.handle(event)
    assert 6 == len(bodies)
    assert 1 == len(set(bodies))
    assert TEXT.encode() not in bodies[0]
    queued = await kernel.db.fetchval(
        "SELECT count(*) FROM escalations WHERE record_id = $1", record_id
    )
    assert 1 == queued
