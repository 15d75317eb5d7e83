"""Each conflict class end to end through gate.evaluate: linked, resolved through the Gate,
and (when a person must decide) escalated to the admin queue, the log and a webhook."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from uuid import UUID

import asyncpg
import pytest
from structlog.testing import capture_logs

from engram import Kernel
from engram.errors import WebhookUnavailable
from engram.infra.events import Event
from engram.infra.webhook import WebhookSink
from engram.memory.gate.requests import GateResult
from engram.memory.types import GateDecision, MemoryRecord, utc_now
from engram.notifications.dispatcher import Escalation
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import STANDARD, belief, create, lock_waiters, update

WRITER = replace(STANDARD, writes_per_minute=100_000)
MARCH = datetime(2025, 3, 1, 9, tzinfo=UTC)
APRIL = datetime(2025, 4, 10, 9, tzinfo=UTC)
FEBRUARY = datetime(2025, 2, 1, 9, tzinfo=UTC)
MAY = datetime(2025, 5, 1, 9, tzinfo=UTC)


async def _write(kernel: Kernel, record: MemoryRecord) -> GateResult:
    result = await kernel.gate.evaluate(create(record, WRITER))
    assert GateDecision.APPROVED == result.decision, result.reason
    return result


async def _edges(kernel: Kernel, source: UUID) -> list[str]:
    rows = await kernel.db.fetch("SELECT kind FROM memory_edges WHERE source_id = $1", source)
    return sorted(row["kind"] for row in rows)


async def _wait_for(predicate: Callable[[], Any], within: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "not delivered in time"
        await asyncio.sleep(0.02)


async def test_supersession_ends_the_older_fact_where_the_newer_begins(kernel: Kernel) -> None:
    """v2.1 after v2.0: a supersedes link, and v2.0's validity closed in April, via the Gate."""
    old = await _write(
        kernel, belief("The deploy target for the web app is v2.0.", event_time=MARCH)
    )
    new = await _write(
        kernel, belief("The deploy target for the web app is v2.1.", event_time=APRIL)
    )
    assert new.layer2_decision is not None
    assert ["supersession"] == [c.classification.value for c in new.layer2_decision.conflicts]
    assert new.modified_record is not None
    assert old.record_id is not None
    assert ["supersedes"] == await _edges(kernel, new.modified_record.id)
    await kernel.events.settled()  # resolutions follow the commit, from the outbox
    closed = await kernel.temporal.current(old.record_id)
    assert closed is not None
    assert (2, APRIL) == (closed.version, closed.event_time_end)
    assert ("self_healing", "updated") == tuple(
        await kernel.db.fetchrow(
            "SELECT decision_type, outcome FROM librarian_audit WHERE decision_id = $1",
            closed.gate_decision_id,
        )
        or ()
    )
    in_march = await kernel.temporal.query(record_id=old.record_id, as_of_event=MARCH)
    in_may = await kernel.temporal.query(record_id=old.record_id, as_of_event=MAY)
    assert ([2], []) == ([r.version for r in in_march], in_may)
    # Both statements stay believed; only the newer one is true now (ADR-009, amended).
    believed = await kernel.temporal.query(limit=10)
    assert {old.record_id, new.record_id} == {r.record_id for r in believed}
    live = await kernel.temporal.query(limit=10, as_of_event=utc_now())
    assert [new.record_id] == [r.record_id for r in live]
    assert (await kernel.audit.verify()).ok


async def test_contradiction_links_and_challenges_both_records(kernel: Kernel) -> None:
    """JWT vs session cookies, the older observed: a contradicts link, and both records
    marked challenged."""
    old = await _write(
        kernel,
        belief(
            "The public API authenticates requests with JWT bearer tokens.",
            source_confidence=0.9,
        ),
    )
    new = await _write(
        kernel,
        belief(
            "The public API authenticates requests with session cookies.", source_confidence=0.5
        ),
    )
    assert new.layer2_decision is not None
    assert new.modified_record is not None
    assert ["contradiction"] == [c.classification.value for c in new.layer2_decision.conflicts]
    assert ["contradicts"] == await _edges(kernel, new.modified_record.id)
    await kernel.events.settled()
    heads = await kernel.db.fetch(
        "SELECT status::text FROM memories WHERE superseded_by IS NULL ORDER BY record_id"
    )
    assert ["challenged", "challenged"] == [row["status"] for row in heads]
    resolutions = await kernel.db.fetch(
        "SELECT record_id FROM librarian_audit WHERE decision_type = 'self_healing'"
    )
    assert {old.record_id, new.record_id} == {row["record_id"] for row in resolutions}
    assert 4 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    row = await kernel.db.fetchrow(
        "SELECT aggregate_id, payload FROM outbox WHERE event_type = 'memory.conflicts_found'"
    )
    assert row is not None
    again = await kernel.gate.resolve_conflicts(
        Event("memory.conflicts_found", row["aggregate_id"], dict(row["payload"]))
    )
    # Delivered twice (at least once): the second answers from the log and changes nothing.
    assert [True, True] == [result.replayed for result in again]
    assert 4 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    assert 4 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")


async def test_refinement_is_linked_and_changes_no_state(kernel: Kernel) -> None:
    """Added detail: a refines link; both records stay active, no resolution write."""
    await _write(kernel, belief("The ledger job settles payments nightly."))
    new = await _write(
        kernel,
        belief(
            "The ledger job settles payments nightly at 02:00 UTC and retries failed batches once."
        ),
    )
    assert new.modified_record is not None
    assert ["refines"] == await _edges(kernel, new.modified_record.id)
    await kernel.events.settled()
    assert 2 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    statuses = await kernel.db.fetch("SELECT DISTINCT status::text FROM memories")
    assert [("active",)] == [tuple(r) for r in statuses]


async def test_unresolvable_conflict_reaches_a_person(kernel: Kernel) -> None:
    """An older, no surer value retires nothing: it is queued, logged and published."""
    old = await _write(
        kernel,
        belief(
            "The API gateway allows 100 requests per minute per key.",
            event_time=MAY,
            source_confidence=0.9,
        ),
    )
    with capture_logs() as logs:
        new = await _write(
            kernel,
            belief(
                "The API gateway allows 60 requests per minute per key.",
                event_time=FEBRUARY,
                source_confidence=0.9,
            ),
        )
        assert new.layer2_decision is not None
        assert new.modified_record is not None
        assert ["unresolvable"] == [c.classification.value for c in new.layer2_decision.conflicts]

        async def queued() -> bool:
            return bool(await kernel.admin_queue.pending())

        await _wait_for(queued)
    await kernel.events.settled()
    assert 2 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    assert ["relates_to"] == await _edges(kernel, new.modified_record.id)
    [item] = await kernel.admin_queue.pending()
    assert ("memory.conflict_detected", new.record_id) == (item["kind"], item["record_id"])
    assert str(old.record_id) == item["payload"]["existing_record_id"]
    assert "60 requests" not in json.dumps(item["payload"])
    escalated = [e for e in logs if e["event"] == "notification.escalated"]
    assert [str(new.record_id)] == [e["record_id"] for e in escalated]
    assert await kernel.admin_queue.acknowledge(item["id"], by="admin")
    assert [] == await kernel.admin_queue.pending()
    assert not await kernel.admin_queue.acknowledge(item["id"], by="admin")
    active = await kernel.db.fetchval("SELECT count(*) FROM memories WHERE status = 'active'")
    assert 2 == active


class _Hook(BaseHTTPRequestHandler):
    """A loopback webhook that fails its first ``failures`` requests with 503."""

    failures = 1
    bodies: list[dict[str, Any]] = []  # noqa: RUF012 - shared by the test's server only

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if type(self).failures > 0:
            type(self).failures -= 1
            self.send_response(503)
        else:
            type(self).bodies.append(body)
            self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        del args


@pytest.fixture
def webhook() -> Iterator[str]:
    """A real HTTP server on loopback that answers 503 once, then 204."""
    _Hook.failures, _Hook.bodies = 1, []
    server = HTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook"
    server.shutdown()
    server.server_close()


async def test_webhook_sink_retries_a_failing_endpoint(webhook: str) -> None:
    """A 503 is retried; the escalation arrives once, with its identifiers."""
    sink = WebhookSink(webhook, retries=3, initial_wait_seconds=0.01)
    escalation = Escalation(
        "memory.conflict_detected",
        UUID(int=7),
        {"decision_id": "d1", "existing_version_id": "v1", "classification": "unresolvable"},
    )
    await sink.deliver(escalation)
    assert 1 == len(_Hook.bodies)
    assert ("memory.conflict_detected", "unresolvable") == (
        _Hook.bodies[0]["kind"],
        _Hook.bodies[0]["classification"],
    )
    assert 0 == _Hook.failures


async def test_a_supersession_whose_older_record_moves_meanwhile_is_carried_out(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """The older record's row is held (a real lock) while its owner changes only its
    metadata and the superseding write commits; the resolver's step, queued behind both,
    finds the record moved on. Its claim still stands, so the step is carried out against
    the new head, and delivering the event again writes nothing more."""
    old = await _write(
        kernel, belief("The deploy target for the web app is v2.0.", event_time=MARCH)
    )
    assert old.modified_record is not None
    assert old.record_id is not None
    admin = await asyncpg.connect(database.admin_url)
    try:
        held = admin.transaction()
        await held.start()
        await admin.fetch(
            "SELECT 1 FROM engram.memories WHERE id = $1 FOR NO KEY UPDATE", old.modified_record.id
        )
        tagging = asyncio.create_task(
            kernel.gate.evaluate(
                update(
                    old.record_id,
                    old.modified_record.content,
                    1,
                    WRITER,
                    event_time=MARCH,
                    metadata={"owner": "web-team"},
                )
            )
        )
        await lock_waiters(admin, 1)
        new = await _write(
            kernel, belief("The deploy target for the web app is v2.1.", event_time=APRIL)
        )
        assert new.layer2_decision is not None
        assert ["supersession"] == [c.classification.value for c in new.layer2_decision.conflicts]
        await lock_waiters(admin, 2)  # the resolver's step waits behind the metadata change
        await held.rollback()
        tagged = await tagging
        assert (GateDecision.APPROVED, 2) == (tagged.decision, tagged.version)
        await kernel.events.settled()
    finally:
        await admin.close()
    head = await kernel.temporal.current(old.record_id)
    assert head is not None
    assert (3, APRIL, {"owner": "web-team"}) == (head.version, head.event_time_end, head.metadata)
    row = await kernel.db.fetchrow(
        "SELECT aggregate_id, payload FROM outbox WHERE event_type = 'memory.conflicts_found'"
    )
    assert row is not None
    await kernel.gate.resolve_conflicts(
        Event("memory.conflicts_found", row["aggregate_id"], dict(row["payload"]))
    )
    again = await kernel.temporal.current(old.record_id)
    assert again is not None
    assert 3 == again.version
    assert (await kernel.audit.verify()).ok


async def test_a_webhook_that_just_failed_is_not_called_again_for_a_while(webhook: str) -> None:
    """After its retries fail, the sink answers WebhookUnavailable at once, without a
    request, for its pause: the outbox's other events do not wait behind it."""
    _Hook.failures = 1
    sink = WebhookSink(webhook, retries=0, initial_wait_seconds=0.01, pause_seconds=60)
    escalation = Escalation("memory.conflict_detected", UUID(int=8), {"decision_id": "d2"})
    with pytest.raises(WebhookUnavailable):
        await sink.deliver(escalation)  # the 503
    with pytest.raises(WebhookUnavailable, match="not tried"):
        await sink.deliver(escalation)  # the server would answer 204 now
    assert [] == _Hook.bodies


async def test_kernel_conflicts_detects_and_names_each_resolution(kernel: Kernel) -> None:
    """kernel.conflicts detects on demand and says how each class is resolved."""
    old = belief("The deploy target for the web app is v2.0.", event_time=MARCH)
    new = belief("The deploy target for the web app is v2.1.", event_time=APRIL)
    [found] = await kernel.conflicts.detect(new, [old], similarities={old.id: 0.98})
    resolution = await kernel.conflicts.resolve(found)
    assert ("supersession", False) == (found.classification.value, resolution.escalated)
    assert "end the older record's validity" in resolution.action


async def test_an_escalation_the_admin_queue_could_not_take_is_delivered_again(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """With INSERT on the admin queue revoked (a real privilege error from PostgreSQL), the
    escalation is not marked delivered: its event stays in the outbox, and once the privilege
    is back the delivery at its retry time queues it, once."""
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute("REVOKE INSERT ON engram.escalations FROM engram_runtime")
        await _write(kernel, belief("The build cache lives on nfs-07 and holds 2 TB."))
        with capture_logs() as logs:
            new = await _write(kernel, belief("The build cache lives on nfs-07 and holds 4 TB."))
            assert new.layer2_decision is not None
            kinds = [c.classification.value for c in new.layer2_decision.conflicts]
            assert ["unresolvable"] == kinds
            await kernel.events.settled()
            await admin.execute(  # not due again until the privilege is back
                "UPDATE engram.outbox SET next_attempt_at = now() + interval '1 hour' "
                "WHERE event_type = 'memory.conflict_detected'"
            )
        failed = [e for e in logs if e["event"] == "notification.sink_failed"]
        assert failed  # each delivery so far failed at the admin queue, and only there
        assert {"admin_queue"} == {e["sink"] for e in failed}
        assert 0 == await admin.fetchval("SELECT count(*) FROM engram.escalations")
        pending = await admin.fetchrow(
            "SELECT attempts, dispatched_at FROM engram.outbox "
            "WHERE event_type = 'memory.conflict_detected'"
        )
        assert pending is not None
        assert (len(failed), None) == (pending["attempts"], pending["dispatched_at"])
    finally:
        await admin.execute("GRANT INSERT ON engram.escalations TO engram_runtime")
    try:
        await admin.execute(
            "UPDATE engram.outbox SET next_attempt_at = now() + interval '200 milliseconds' "
            "WHERE event_type = 'memory.conflict_detected'"
        )
        await kernel.events.resume()

        async def queued() -> bool:
            return bool(await kernel.admin_queue.pending())

        await _wait_for(queued)  # the event's retry time comes; no write is needed
        await kernel.events.settled()
        [item] = await kernel.admin_queue.pending()
        assert new.record_id == item["record_id"]
        delivered = await admin.fetchval(
            "SELECT dispatched_at IS NOT NULL FROM engram.outbox "
            "WHERE event_type = 'memory.conflict_detected'"
        )
        assert delivered is True
    finally:
        await admin.close()
