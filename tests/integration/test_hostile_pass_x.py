"""Hostile pass X: the webhook relay of migration 0021 (a relay whose lease ran out while its
receiver was slow wrote its late failure, or its release at shutdown, over the row another
relay had taken since; a due row another session held locked set the relay spinning; a
webhook URL no one can POST to was accepted at startup; a failed send's log did not say
what the receiver answered).

Every test here failed on the code it was written against; what held is in
``test_hostile_pass_x_held.py``. Real embedded PostgreSQL, real HTTP servers on loopback, two
relays on pools of their own, no mocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import asyncpg
import pytest
from pydantic import ValidationError
from structlog.testing import capture_logs

from engram.config import EngramSettings
from engram.infra.postgres import PostgresDatabase
from engram.infra.resilience import CircuitBreaker, Resilience
from engram.infra.webhook import WebhookSink
from engram.notifications.dispatcher import AdminQueue
from engram.notifications.relay import WebhookRelay
from engram.protocols.cli.output import problems_of
from tests.conftest import ScratchDatabase
from tests.integration.test_webhook_relay import escalation, relay_process


@dataclass
class Script:
    """A loopback receiver playing ``steps`` in turn, one per request: wait for the step's
    event (if any), then answer its status (with ``headers`` and ``body_size`` bytes of
    body); past the script it answers 204 at once."""

    steps: list[tuple[threading.Event | None, int]] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    body_size: int = 0
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


def serve(script: Script) -> ThreadingHTTPServer:
    """Start a receiver for ``script`` on a free loopback port (its URL set on ``script``)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with script.lock:
                script.bodies.append(body)
                gate, status = script.steps.pop(0) if script.steps else (None, 204)
            if gate is not None:
                gate.wait(30)
            self.send_response(status)
            for name, value in script.headers.items():
                self.send_header(name, value)
            size = script.body_size if status >= 200 and status != 204 else 0
            self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = b"x" * 65536
            with contextlib.suppress(OSError):  # the client reads the status only, then goes
                for _ in range(size // len(chunk)):
                    self.wfile.write(chunk)

        def log_message(self, *args: object) -> None:
            del args

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    script.url = f"http://127.0.0.1:{server.server_port}/hook"
    return server


@pytest.fixture
def script() -> Iterator[Script]:
    """A scripted receiver; every held request is let go at the end."""
    played = Script()
    server = serve(played)
    yield played
    for gate, _ in played.steps:
        if gate is not None:
            gate.set()
    server.shutdown()
    server.server_close()


async def pool(database: ScratchDatabase) -> PostgresDatabase:
    """A pool of its own on the runtime role, as a second kernel would have."""
    return await PostgresDatabase.connect(
        database.runtime_url,
        resilience=Resilience(CircuitBreaker("postgres")),
        min_size=1,
        max_size=2,
    )


@pytest.fixture
async def pools(database: ScratchDatabase) -> AsyncIterator[tuple[PostgresDatabase, ...]]:
    """Three pools on the scratch database: three relays' worth."""
    opened = [await pool(database) for _ in range(3)]
    yield tuple(opened)
    for db in opened:
        await db.close()


def slow_sink(url: str) -> WebhookSink:
    """One request per send, waited on for up to 30 s."""
    return WebhookSink(url, retries=0, timeout_seconds=30.0, pause_seconds=0.0)


async def until(predicate: Any, within: float = 10.0) -> None:
    """Wait until ``predicate()`` is true."""
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "not in time"
        await asyncio.sleep(0.02)


async def state(db: PostgresDatabase) -> tuple[Any, ...]:
    """(due, attempts, sent) of the only escalation."""
    row = await db.fetchrow(
        "SELECT webhook_due_at, webhook_attempts, webhook_sent_at FROM escalations"
    )
    assert row is not None
    return row["webhook_due_at"], row["webhook_attempts"], row["webhook_sent_at"]


async def test_a_late_failure_does_not_undo_the_send_of_the_relay_that_took_the_row_since(
    pools: tuple[PostgresDatabase, ...], script: Script
) -> None:
    """Relay A (a lease of 0.5 s) sends; its receiver answers only after 2 s, with a 503.
    Meanwhile A's lease ran out, relay B took the row and the receiver accepted B's send, so
    the row is sent. A's failure then arrived: it counted an attempt and made the sent row due
    again, and the escalation went out a third time. A failure must only count for the relay
    that still holds the row."""
    first, second, _ = pools
    held = threading.Event()
    script.steps = [(held, 503)]
    await AdminQueue(first, webhook=lambda: None).deliver(escalation(1))
    slow = WebhookRelay(first, slow_sink(script.url), lease_seconds=0.5, retry_seconds=0.2)
    sending = asyncio.create_task(slow.send_due())
    await until(lambda: len(script.bodies) == 1)
    await asyncio.sleep(0.7)  # A's lease is over; A's request is still open
    quick = WebhookRelay(second, slow_sink(script.url))
    assert await quick.send_due() is None
    assert 2 == len(script.bodies)
    held.set()
    await sending
    due, attempts, sent = await state(first)
    assert (None, 0) == (due, attempts)
    assert sent is not None
    await asyncio.sleep(0.4)
    assert await quick.send_due() is None
    assert 2 == len(script.bodies)


async def test_a_relay_closed_after_its_lease_ended_does_not_hand_back_another_relays_row(
    pools: tuple[PostgresDatabase, ...], script: Script
) -> None:
    """Relay A's lease (0.5 s) ran out mid-send and relay B took the row; then A's kernel
    shut down. A's close released "its" row, which was B's: due at once, a third relay took
    it and sent it while B was still sending. The release must only touch a row A holds."""
    first, second, third = pools
    held_a, held_b = threading.Event(), threading.Event()
    script.steps = [(held_a, 204), (held_b, 204)]
    await AdminQueue(first, webhook=lambda: None).deliver(escalation(2))
    slow = WebhookRelay(first, slow_sink(script.url), lease_seconds=0.5)
    slow.start()
    await until(lambda: len(script.bodies) == 1)
    await asyncio.sleep(0.7)
    taker = WebhookRelay(second, slow_sink(script.url))
    taking = asyncio.create_task(taker.send_due())
    await until(lambda: len(script.bodies) == 2)
    await slow.close()
    other = WebhookRelay(third, slow_sink(script.url))
    wait = await other.send_due()
    assert 2 == len(script.bodies), "a third relay sent the row B holds"
    assert wait is not None
    assert wait > 60  # B's lease (120 s) still holds
    held_b.set()
    held_a.set()
    assert await taking is None
    due, attempts, sent = await state(third)
    assert (None, 0) == (due, attempts)
    assert sent is not None


async def test_a_due_row_another_session_holds_does_not_set_the_relay_spinning(
    database: ScratchDatabase, pools: tuple[PostgresDatabase, ...], script: Script
) -> None:
    """A due row is locked by another session (an operator's open transaction, a long
    retention delete): the claim skips it, and ``webhook_next`` answers that a row is due
    already (a wait <= 0), so the relay looked again at once, as fast as the database
    answered, for as long as the lock held. Counted on the server: the table's scans in
    two seconds."""
    first, _, _ = pools
    await AdminQueue(first, webhook=lambda: None).deliver(escalation(3))
    admin = await asyncpg.connect(database.admin_url)
    relay = WebhookRelay(first, slow_sink(script.url), poll_seconds=30.0)
    try:
        locker = admin.transaction()
        await locker.start()
        await admin.execute("SELECT id FROM engram.escalations FOR UPDATE")
        relay.start()
        await asyncio.sleep(0.5)
        before = await scans(database)
        await asyncio.sleep(2.0)
        after = await scans(database)
        await locker.rollback()
        assert after - before < 40, f"{after - before} scans of escalations in 2 s"
        await until(lambda: len(script.bodies) == 1, within=5.0)
    finally:
        await relay.close()
        await admin.close()


async def scans(database: ScratchDatabase) -> int:
    """Scans of engram.escalations so far (a fresh snapshot of the statistics)."""
    conn = await asyncpg.connect(database.admin_url)
    try:
        await asyncio.sleep(1.1)  # the relay's backend flushes its counts about once a second
        value = await conn.fetchval(
            "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables "
            "WHERE schemaname = 'engram' AND relname = 'escalations'"
        )
        return int(value)
    finally:
        await conn.close()


@pytest.mark.parametrize(
    "url",
    [
        "hooks.example.com/engram?token=tok-31c",  # the scheme forgotten
        "ftp://hook:pw-31c@files.example.com/x",
        "file:///var/run/hook-31c",
        "http:///hook-31c",  # no host
        "https://hook:pw-31c@example.com:port/x",  # a port that is not a number
    ],
)
def test_a_webhook_url_that_cannot_be_posted_to_is_refused_at_startup(url: str) -> None:
    """``ENGRAM_WEBHOOK_URL`` without http(s):// or a host was accepted: the kernel started,
    and every escalation then failed to send as if the receiver were down (``httpx``'s
    UnsupportedProtocol is a transport error): deferred ten times over eight minutes, then
    given up, each one, with ``WebhookUnavailable`` the only clue (a port that is not a
    number: ``InvalidURL``, each given up at once). A database URL is checked
    when the settings are read; so is the webhook's now, without quoting it (it may hold a
    password or a token)."""
    with pytest.raises(ValidationError) as refused:
        EngramSettings(webhook_url=url)
    assert "webhook_url" in str(refused.value)
    assert "31c" not in str(refused.value)
    assert "webhook_url: " in " ".join(problems_of(refused.value, whole="settings"))  # the CLI
    assert "31c" not in " ".join(problems_of(refused.value, whole="settings"))


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/hook", "https://user:pw@hooks.example.com/x?token=t"]
)
def test_an_http_webhook_url_is_still_accepted(url: str) -> None:
    """(The check of the previous test refuses nothing an operator could post to.)"""
    settings = EngramSettings(webhook_url=url)
    assert settings.webhook_url is not None
    assert url == settings.webhook_url.get_secret_value()


async def test_a_relay_process_frozen_past_its_lease_does_not_re_due_a_row_sent_since(
    database: ScratchDatabase, pools: tuple[PostgresDatabase, ...], script: Script
) -> None:
    """The same race with a real freeze: a relay process (lease 1 s) is SIGSTOPped while its
    request is open (a paused VM, a container frozen); another relay takes the row after the
    lease and the receiver accepts it. The receiver then answers the frozen relay's request
    with a 503 and the process is SIGCONTed: its failure must not make the sent row due
    again nor count an attempt."""
    first, _, _ = pools
    held = threading.Event()
    script.steps = [(held, 503)]
    await AdminQueue(first, webhook=lambda: None).deliver(escalation(4))
    process = await relay_process(database.runtime_url, script.url, retry_seconds=0.2)
    try:
        await until(lambda: len(script.bodies) == 1, within=30.0)
        os.kill(process.pid, signal.SIGSTOP)
        await asyncio.sleep(1.3)
        assert await WebhookRelay(first, slow_sink(script.url)).send_due() is None
        assert 2 == len(script.bodies)
        held.set()
        await asyncio.sleep(0.2)  # the 503 waits in the frozen process's socket
        os.kill(process.pid, signal.SIGCONT)
        assert 0 == await asyncio.wait_for(process.wait(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    due, attempts, sent = await state(first)
    assert (None, 0) == (due, attempts)
    assert sent is not None


@pytest.mark.parametrize(
    ("status", "event"),
    [(301, "webhook.abandoned"), (404, "webhook.abandoned"), (503, "webhook.deferred")],
)
async def test_a_failed_send_logs_the_receivers_status(
    pools: tuple[PostgresDatabase, ...], script: Script, status: int, event: str
) -> None:
    """A receiver behind a proxy that redirects http to https (301), a wrong path (404) and
    a busy receiver (503) were all logged as ``error=HTTPStatusError`` or
    ``WebhookUnavailable`` alone: the operator could not tell a redirect from a refusal.
    The relay's log now carries the receiver's status (never its location or body)."""
    first, _, _ = pools
    script.steps = [(None, status)]
    script.headers = {"Location": "https://127.0.0.1:9/hook?token=tok-73a"}
    await AdminQueue(first, webhook=lambda: None).deliver(escalation(5))
    with capture_logs() as logs:
        await WebhookRelay(first, slow_sink(script.url), retry_seconds=30.0).send_due()
    [logged] = [e for e in logs if e["event"] == event]
    assert status == logged["status"]
    assert "tok-73a" not in repr(logs)
