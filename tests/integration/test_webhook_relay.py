"""The webhook relay (migration 0021): escalations reach the webhook from the admin queue's
table, outside the outbox, so a receiver that answers slowly holds no event; a receiver that
is down gets them when it is back, one that refuses a body is given up on, and a relay killed
mid-send leaves its row to the next. Real HTTP servers on loopback, the real database."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from uuid import UUID

import httpx
import pytest
from structlog.testing import capture_logs

from engram import Kernel, open_kernel
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.infra.webhook import WebhookSink
from engram.memory.types import GateDecision
from engram.notifications.dispatcher import AdminQueue, Escalation
from engram.notifications.relay import RETRY_SECONDS, WebhookRelay
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import STANDARD, belief, create

WRITER = replace(STANDARD, writes_per_minute=100_000)


@dataclass
class Receiver:
    """What the loopback receiver does: answers ``statuses`` in turn (then 204), each after
    ``delay`` seconds; with ``hang`` set it holds each request until ``release`` is set."""

    delay: float = 0.0
    statuses: list[int] = field(default_factory=list)
    hang: bool = False
    release: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Event = field(default_factory=threading.Event)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


def _serve(receiver: Receiver, port: int = 0) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            receiver.bodies.append(body)
            receiver.arrived.set()
            held = receiver.hang
            if held:  # answered after its client is gone: never counts as accepted
                receiver.release.wait(30)
            time.sleep(receiver.delay)
            status = receiver.statuses.pop(0) if receiver.statuses else 204
            if status < 300 and not held:
                receiver.accepted.append(body)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            del args

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    receiver.url = f"http://127.0.0.1:{server.server_port}/hook"
    return server


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A loopback receiver that answers 204 at once, until a test says otherwise."""
    answer = Receiver()
    server = _serve(answer)
    yield answer
    answer.release.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
async def hooked_kernel(
    database: ScratchDatabase, embedder: FastembedEmbedder, receiver: Receiver
) -> AsyncIterator[Kernel]:
    """A kernel whose ``ENGRAM_WEBHOOK_URL`` is the loopback receiver."""
    settings = EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        retry_initial_wait_seconds=0.01,
        webhook_url=receiver.url,
    )
    async with open_kernel(settings=settings, embeddings=embedder) as opened:
        yield opened


async def _escalate(kernel: Kernel) -> None:
    """Two beliefs about one thing, equally sure and with no change said: unresolvable."""
    for content in (
        "The build cache lives on nfs-07 and holds 2 TB.",
        "The build cache lives on nfs-07 and holds 4 TB.",
    ):
        result = await kernel.gate.evaluate(create(belief(content), WRITER))
        assert GateDecision.APPROVED == result.decision, result.reason


async def _until(predicate: Any, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not await predicate():
        assert time.monotonic() < deadline, "not in time"
        await asyncio.sleep(0.02)


async def _row(kernel: Kernel) -> Any:
    return await kernel.db.fetchrow(
        "SELECT id, dedupe_key, webhook_due_at, webhook_attempts, webhook_sent_at "
        "FROM escalations ORDER BY id LIMIT 1"
    )


async def test_a_slow_receiver_holds_no_event_of_the_outbox(
    hooked_kernel: Kernel, receiver: Receiver
) -> None:
    """The receiver takes 2 s to answer. Before 0021 the outbox waited for it inside its
    drain, so the escalation's event (and every event behind it) took at least that long;
    now the event is delivered at once and the webhook gets the escalation afterwards, once,
    with the admin queue's key."""
    receiver.delay = 2.0
    await _escalate(hooked_kernel)
    started = time.monotonic()
    await hooked_kernel.events.settled()
    assert time.monotonic() - started < 1.0
    assert 0 == await hooked_kernel.db.fetchval(
        "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL"
    )

    async def sent() -> bool:
        row = await _row(hooked_kernel)
        return row is not None and row["webhook_sent_at"] is not None

    await _until(sent)
    row = await _row(hooked_kernel)
    assert [row["dedupe_key"]] == [body["key"] for body in receiver.accepted]
    assert (None, 0) == (row["webhook_due_at"], row["webhook_attempts"])
    [pending] = await hooked_kernel.admin_queue.pending()
    assert "memory.conflict_detected" == pending["kind"]


async def test_a_receiver_that_is_down_gets_the_escalation_when_it_is_back(
    kernel: Kernel,
) -> None:
    """Nothing listens on the webhook's port: the outbox still marks the event delivered
    (the row is queued), the relay counts failed sends and waits between them, and once a
    server listens there it sends the escalation once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sink = WebhookSink(f"http://127.0.0.1:{port}/hook", retries=0, pause_seconds=0.0)
    relay = WebhookRelay(kernel.db, sink, retry_seconds=0.2, poll_seconds=0.5)
    kernel.notifications.sinks[1] = AdminQueue(kernel.db, webhook=relay.wake)
    relay.start()
    try:
        with capture_logs() as logs:
            await _escalate(kernel)
            await kernel.events.settled()
            assert 0 == await kernel.db.fetchval(
                "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL"
            )

            async def failed_twice() -> bool:
                row = await _row(kernel)
                return row is not None and row["webhook_attempts"] >= 2

            await _until(failed_twice)
        deferred = [e for e in logs if e["event"] == "webhook.deferred"]
        assert deferred
        assert {"WebhookUnavailable"} == {e["error"] for e in deferred}
        answer = Receiver()
        server = _serve(answer, port)
        try:

            async def sent() -> bool:
                return (await _row(kernel))["webhook_sent_at"] is not None

            await _until(sent)
        finally:
            server.shutdown()
            server.server_close()
    finally:
        await relay.close()
    row = await _row(kernel)
    assert [row["dedupe_key"]] == [body["key"] for body in answer.accepted]
    assert 1 == len(await kernel.admin_queue.pending())


async def test_a_refused_body_is_given_up_at_once(kernel: Kernel, receiver: Receiver) -> None:
    """A 400 is final: one request, the row no longer due, its attempt counted, and the
    giving up logged at error level; the escalation stays in the admin queue."""
    receiver.statuses = [400]
    relay = WebhookRelay(kernel.db, WebhookSink(receiver.url, pause_seconds=0.0))
    queue = AdminQueue(kernel.db, webhook=relay.wake)
    with capture_logs() as logs:
        await queue.deliver(escalation(1))
        assert await relay.send_due() is None
    row = await _row(kernel)
    assert (None, 1, None) == (
        row["webhook_due_at"],
        row["webhook_attempts"],
        row["webhook_sent_at"],
    )
    assert 1 == len(receiver.bodies)
    [abandoned] = [e for e in logs if e["event"] == "webhook.abandoned"]
    assert ("error", "HTTPStatusError") == (abandoned["log_level"], abandoned["error"])
    assert 1 == len(await kernel.admin_queue.pending())


async def test_a_sink_makes_one_client_for_its_deliveries_and_the_relay_closes_it(
    kernel: Kernel, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty escalations through one relay reach the receiver with one HTTP client made, not
    one per delivery (each costs about 45 ms of CPU, its TLS context), and none on the event
    loop's thread; closing the relay closes it. Counted, not patched: the real client is
    made and used."""
    made: list[str] = []
    real_init = httpx.AsyncClient.__init__

    def counted(self: httpx.AsyncClient, *args: Any, **kwargs: Any) -> None:
        made.append(threading.current_thread().name)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(httpx.AsyncClient, "__init__", counted)
    sink = WebhookSink(receiver.url, pause_seconds=0.0)
    relay = WebhookRelay(kernel.db, sink)
    queue = AdminQueue(kernel.db, webhook=relay.wake)
    for n in range(20):
        await queue.deliver(escalation(n))
    assert await relay.send_due() is None
    assert 20 == len(receiver.accepted)
    assert 1 == len(made)
    assert threading.main_thread().name not in made
    client = sink._client
    assert client is not None
    await relay.close()
    assert client.is_closed


async def test_a_row_queued_again_is_due_only_if_it_was_never_tried(
    kernel: Kernel, receiver: Receiver
) -> None:
    """The outbox delivers at least once. A row queued while no webhook was configured (or
    before 0021) becomes due when its event is delivered again with one; a row already sent
    or given up is not sent again."""
    plain = AdminQueue(kernel.db)
    await plain.deliver(escalation(2))
    assert (await _row(kernel))["webhook_due_at"] is None
    relay = WebhookRelay(kernel.db, WebhookSink(receiver.url, pause_seconds=0.0))
    hooked = AdminQueue(kernel.db, webhook=relay.wake)
    await hooked.deliver(escalation(2))
    assert (await _row(kernel))["webhook_due_at"] is not None
    assert await relay.send_due() is None
    assert 1 == len(receiver.accepted)
    await hooked.deliver(escalation(2))
    row = await _row(kernel)
    assert (None, 0) == (row["webhook_due_at"], row["webhook_attempts"])
    assert row["webhook_sent_at"] is not None
    assert await relay.send_due() is None
    assert 1 == len(receiver.bodies)
    assert 1 == await kernel.db.fetchval("SELECT count(*) FROM escalations")


#: A relay in a process of its own, with a one-second lease; argv: database URL, webhook URL,
#: the seconds before a failed send is tried again.
RELAY = """
import asyncio, sys
from engram.infra.postgres import PostgresDatabase
from engram.infra.resilience import CircuitBreaker, Resilience
from engram.infra.webhook import WebhookSink
from engram.notifications.relay import WebhookRelay

async def main():
    db = await PostgresDatabase.connect(
        sys.argv[1], resilience=Resilience(CircuitBreaker("postgres")), min_size=1, max_size=2
    )
    sink = WebhookSink(sys.argv[2], retries=0, timeout_seconds=60.0, pause_seconds=0.0)
    relay = WebhookRelay(db, sink, lease_seconds=1.0, retry_seconds=float(sys.argv[3]))
    await relay.send_due()

asyncio.run(main())
"""


async def relay_process(
    database_url: str, url: str, *, retry_seconds: float = RETRY_SECONDS
) -> asyncio.subprocess.Process:
    """A :data:`RELAY` process sending the due rows of ``database_url`` to ``url`` (none of
    this process's ``ENGRAM_`` settings passed on)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        RELAY,
        database_url,
        url,
        str(retry_seconds),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def test_a_relay_killed_mid_send_leaves_the_row_to_the_next(
    kernel: Kernel, database: ScratchDatabase, receiver: Receiver
) -> None:
    """A relay process is SIGKILLed while the receiver holds its request: the row is neither
    sent nor counted as failed, no other relay takes it during its lease, and one takes it
    when the lease ends and sends it (the receiver sees the key twice, as at-least-once
    delivery says)."""
    receiver.hang = True
    await AdminQueue(kernel.db, webhook=lambda: None).deliver(escalation(3))
    process = await relay_process(database.runtime_url, receiver.url)
    try:
        assert await asyncio.to_thread(receiver.arrived.wait, 30)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        await process.wait()
    assert -signal.SIGKILL == process.returncode
    row = await _row(kernel)
    assert (0, None) == (row["webhook_attempts"], row["webhook_sent_at"])
    receiver.hang = False
    receiver.release.set()
    relay = WebhookRelay(kernel.db, WebhookSink(receiver.url, pause_seconds=0.0))
    wait = await relay.send_due()  # still leased to the killed relay
    assert wait is not None
    assert 0 < wait <= 1.0
    assert [] == receiver.accepted
    await asyncio.sleep(wait + 0.05)
    assert await relay.send_due() is None
    row = await _row(kernel)
    assert row["webhook_sent_at"] is not None
    assert [row["dedupe_key"]] * 2 == [body["key"] for body in receiver.bodies]


def escalation(n: int) -> Escalation:
    """The ``n``-th escalation (its key ``memory.conflict_detected:d<n>:v<n>``)."""
    return Escalation(
        "memory.conflict_detected",
        UUID(int=n),
        {"decision_id": f"d{n}", "existing_version_id": f"v{n}", "classification": "unresolvable"},
    )


async def test_a_relay_closed_does_not_start_again(
    hooked_kernel: Kernel, receiver: Receiver
) -> None:
    """The first readiness check that finds the schema current starts the relay; one that
    ran while the kernel closed could start it after its close, leaving a task sending past
    the pool's end (left open by pass AJ). A closed relay no longer starts."""
    relay = hooked_kernel.webhook_relay
    assert relay is not None
    await relay.close()
    relay.start()
    await _escalate(hooked_kernel)
    await asyncio.sleep(1.0)
    assert [] == receiver.bodies
    assert None is (await _row(hooked_kernel))["webhook_sent_at"]
