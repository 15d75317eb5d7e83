"""Hostile pass X, probes that held: the webhook relay of migration 0021 against its
database's faults (backends terminated mid-send, the database refusing connections, a
shutdown mid-send), odd receivers (redirects, an interim 100, a huge body, a reset, a name
that does not resolve, credentials in the URL), retention and acknowledgement racing a send,
and volume (2,000 due rows, the receiver up and down).

Each test passed on the code it was written against and stays as a regression test. Real
embedded PostgreSQL, real HTTP servers and sockets on loopback, real faults, no mocks.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from structlog.testing import capture_logs

from engram import open_kernel
from engram.autonomy.catalogue import SQL as RETENTION
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.infra.postgres import PostgresDatabase
from engram.infra.resilience import CircuitBreaker, Resilience
from engram.infra.webhook import WebhookSink
from engram.notifications.dispatcher import AdminQueue
from engram.notifications.relay import WebhookRelay
from tests.conftest import ScratchDatabase
from tests.integration.test_hostile_pass_x import (
    Script,
    escalation,
    pools,
    script,
    slow_sink,
    state,
    until,
)
from tests.integration.test_webhook_relay import _escalate as escalate

__all__ = ["pools", "script"]  # fixtures


async def terminate(database: ScratchDatabase) -> None:
    """Terminate every runtime-role backend on the scratch database."""
    admin = await asyncpg.connect(database.server.admin_url("postgres"))
    try:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = $1 AND usename = 'engram_runtime'",
            database.name,
        )
    finally:
        await admin.close()


async def allow_connections(database: ScratchDatabase, *, allowed: bool) -> None:
    """Let the scratch database accept connections, or refuse them (and drop those open)."""
    admin = await asyncpg.connect(database.server.admin_url("postgres"))
    try:
        flag = "true" if allowed else "false"
        await admin.execute(f'ALTER DATABASE "{database.name}" ALLOW_CONNECTIONS {flag}')
    finally:
        await admin.close()
    if not allowed:
        await terminate(database)


async def quick_pool(database: ScratchDatabase) -> PostgresDatabase:
    """A pool whose own retries are short (a failing call fails in about a tenth of a second)."""
    return await PostgresDatabase.connect(
        database.runtime_url,
        resilience=Resilience(CircuitBreaker("postgres"), initial_wait_seconds=0.02),
        min_size=1,
        max_size=2,
    )


@pytest.mark.parametrize("status", [204, 503])
async def test_the_relays_backends_terminated_mid_send_its_outcome_still_lands(
    database: ScratchDatabase,
    pools: tuple[PostgresDatabase, ...],
    script: Script,
    status: int,
) -> None:
    """Between the claim and the outcome (the receiver holding the request) every runtime
    backend is terminated. The outcome's UPDATE is retried on a fresh connection: a 204 is
    recorded as sent, once; a 503 counts one attempt and makes the row due after its
    backoff. Nothing is sent twice."""
    first, _, _ = pools
    held = threading.Event()
    script.steps = [(held, status)]
    await AdminQueue(first, webhook=lambda: None).deliver(escalation(10))
    relay = WebhookRelay(first, slow_sink(script.url), retry_seconds=30.0)
    sending = asyncio.create_task(relay.send_due())
    await until(lambda: len(script.bodies) == 1)
    await terminate(database)
    held.set()
    wait = await sending
    due, attempts, sent = await state(first)
    if status == 204:
        assert (wait, due, attempts) == (None, None, 0)
        assert sent is not None
    else:
        assert (wait, attempts, sent) == (30.0, 1, None)
        assert due is not None
        assert due > datetime.now(UTC) + timedelta(seconds=20)
    assert 1 == len(script.bodies)


async def test_a_database_refusing_connections_holds_the_relay_back_and_it_recovers(
    database: ScratchDatabase, script: Script
) -> None:
    """The database refuses connections while the relay runs: each look fails, is logged
    (``webhook.relay_failed``, the error's type only) and waits longer than the last, so the
    relay does not hammer the server; a row queued meanwhile (by a session that was already
    connected) is sent once, after connections are allowed again."""
    db = await quick_pool(database)
    admin = await asyncpg.connect(database.admin_url)
    relay = WebhookRelay(db, slow_sink(script.url), retry_seconds=0.2, poll_seconds=0.3)
    try:
        relay.start()
        await asyncio.sleep(0.2)
        with capture_logs() as logs:
            await allow_connections(database, allowed=False)
            await asyncio.sleep(3.0)
            await admin.execute(
                "INSERT INTO engram.escalations (kind, record_id, dedupe_key, payload, "
                "webhook_due_at) VALUES ('memory.conflict_detected', gen_random_uuid(), "
                '\'k:outage\', \'{"decision_id": "outage", "existing_version_id": "v"}\', now())'
            )
            await allow_connections(database, allowed=True)
            await until(lambda: len(script.bodies) == 1, within=20.0)
        failed = [e for e in logs if e["event"] == "webhook.relay_failed"]
        assert 1 <= len(failed) <= 6, failed
        waits = [e["retry_in"] for e in failed]
        assert waits == sorted(waits)
        assert all(set(e) <= {"event", "log_level", "error", "retry_in"} for e in failed)
        await asyncio.sleep(0.5)
        assert ["memory.conflict_detected:outage:v"] == [body["key"] for body in script.bodies]
    finally:
        await allow_connections(database, allowed=True)
        await relay.close()
        await admin.close()
        await db.close()


async def test_a_shutdown_mid_send_hands_the_row_back_and_a_failing_hand_back_is_harmless(
    database: ScratchDatabase, pools: tuple[PostgresDatabase, ...], script: Script
) -> None:
    """A relay closed while its receiver holds the request hands the row back: due at once,
    no attempt counted, not sent. A second relay closed mid-send while the database refuses
    connections cannot hand its row back: its close still returns (in a few seconds, without
    raising), and the row waits out the lease, neither sent nor counted."""
    first, _, _ = pools
    held = threading.Event()
    script.steps = [(held, 204), (held, 204)]
    await AdminQueue(first, webhook=lambda: None).deliver(escalation(11))
    relay = WebhookRelay(first, slow_sink(script.url))
    relay.start()
    await until(lambda: len(script.bodies) == 1)
    await relay.close()
    due, attempts, sent = await state(first)
    assert (attempts, sent) == (0, None)
    assert due is not None
    assert due <= datetime.now(UTC)

    db = await quick_pool(database)
    other = WebhookRelay(db, slow_sink(script.url))
    try:
        other.start()
        await until(lambda: len(script.bodies) == 2)
        await allow_connections(database, allowed=False)
        started = time.monotonic()
        await other.close()
        assert time.monotonic() - started < 10.0
    finally:
        await allow_connections(database, allowed=True)
        held.set()
        await db.close()
    due, attempts, sent = await state(first)
    assert (attempts, sent) == (0, None)
    assert due is not None
    assert due > datetime.now(UTC) + timedelta(seconds=60)  # the lease


@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_a_redirect_is_not_taken_for_success_nor_followed(
    pools: tuple[PostgresDatabase, ...], script: Script, status: int
) -> None:
    """The receiver answers a redirect to a URL carrying a token. It is not followed (one
    request) and not taken as accepted: the row is given up (the receiver will not take it
    at this URL), and the log names the error's type, never the location."""
    first, _, _ = pools
    script.steps = [(None, status)]
    script.headers = {"Location": "http://127.0.0.1:9/elsewhere?token=redirect-secret-51"}
    await AdminQueue(first, webhook=lambda: None).deliver(escalation(12))
    with capture_logs() as logs:
        assert await WebhookRelay(first, slow_sink(script.url)).send_due() is None
    assert (None, 1, None) == await state(first)
    assert 1 == len(script.bodies)
    assert "redirect-secret-51" not in repr(logs)
    [abandoned] = [e for e in logs if e["event"] == "webhook.abandoned"]
    assert "HTTPStatusError" == abandoned["error"]


def raw_receiver(answer: bytes | None) -> tuple[socket.socket, list[bytes]]:
    """A one-thread loopback server: each connection's request is read, then ``answer`` is
    written and the socket closed; with None the connection is reset (RST) instead."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def loop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                seen.append(data)
                if answer is None:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                else:
                    conn.sendall(answer)

    threading.Thread(target=loop, daemon=True).start()
    return listener, seen


@pytest.mark.parametrize(
    ("answer", "accepted"),
    [
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", True),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n", False),
        (None, False),
    ],
    ids=["interim-then-204", "interim-then-503", "reset"],
)
async def test_an_interim_answer_or_a_reset_decides_nothing_by_itself(
    pools: tuple[PostgresDatabase, ...], answer: bytes | None, accepted: bool
) -> None:
    """An interim 100 is skipped and the final status decides (204 sent, 503 deferred); a
    connection reset before any answer is a failed send, deferred, never taken as sent."""
    first, _, _ = pools
    listener, seen = raw_receiver(answer)
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
        await AdminQueue(first, webhook=lambda: None).deliver(escalation(13))
        relay = WebhookRelay(first, slow_sink(url), retry_seconds=30.0)
        wait = await relay.send_due()
    finally:
        listener.close()
    due, attempts, sent = await state(first)
    assert 1 == len(seen)
    if accepted:
        assert (wait, due, attempts) == (None, None, 0)
        assert sent is not None
    else:
        assert (wait, attempts, sent) == (30.0, 1, None)
        assert due is not None


async def test_a_huge_answer_is_left_unread_and_a_name_that_does_not_resolve_is_deferred(
    pools: tuple[PostgresDatabase, ...], script: Script
) -> None:
    """A 200 with a 256 MB body is accepted on its status at once (the body is not read:
    the send takes well under the time the body would); a host whose name does not resolve
    (``.invalid``) is a failed send, deferred, with the error's type only."""
    first, second, _ = pools
    script.steps = [(None, 200)]
    script.body_size = 256 * 1024 * 1024
    await AdminQueue(first, webhook=lambda: None).deliver(escalation(14))
    started = time.monotonic()
    assert await WebhookRelay(first, slow_sink(script.url)).send_due() is None
    assert time.monotonic() - started < 5.0
    assert (None, 0) == (await state(first))[:2]

    await second.execute("DELETE FROM escalations")
    await AdminQueue(first, webhook=lambda: None).deliver(escalation(15))
    sink = WebhookSink("http://engram-hook.invalid/x", retries=0, pause_seconds=0.0)
    with capture_logs() as logs:
        assert 30.0 == await WebhookRelay(first, sink, retry_seconds=30.0).send_due()
    [deferred] = [e for e in logs if e["event"] == "webhook.deferred"]
    assert "WebhookUnavailable" == deferred["error"]
    assert (1, None) == (await state(first))[1:]


#: A relay in a process of its own, logging at debug level as ``ENGRAM_LOG_LEVEL=debug``
#: would; argv: database URL, webhook URL.
LOUD_RELAY = """
import asyncio, sys
from engram.infra.postgres import PostgresDatabase
from engram.infra.resilience import CircuitBreaker, Resilience
from engram.infra.webhook import WebhookSink
from engram.notifications.relay import WebhookRelay
from engram.observability.logging import configure_logging

async def main():
    configure_logging("debug", "json")
    db = await PostgresDatabase.connect(
        sys.argv[1], resilience=Resilience(CircuitBreaker("postgres")), min_size=1, max_size=2
    )
    relay = WebhookRelay(db, WebhookSink(sys.argv[2], retries=1, initial_wait_seconds=0.05,
                                         pause_seconds=0.0), retry_seconds=0.05)
    for _ in range(6):
        await relay.send_due()
        await asyncio.sleep(0.1)

asyncio.run(main())
"""


async def test_credentials_in_the_url_are_never_logged_even_at_debug(
    database: ScratchDatabase, pools: tuple[PostgresDatabase, ...], script: Script
) -> None:
    """The webhook URL carries a user, a password and a token in its query. A relay process
    logging at debug level sends three escalations: a 503 then 204, a 301 with a location,
    a 400. Its whole output (stdout and stderr) holds neither the password, nor the token,
    nor the user."""
    first, _, _ = pools
    script.steps = [(None, 503), (None, 204), (None, 301), (None, 400)]
    script.headers = {"Location": "http://127.0.0.1:9/x"}
    for n in (16, 17, 18):
        await AdminQueue(first, webhook=lambda: None).deliver(escalation(n))
    port = script.url.split(":")[2].split("/")[0]
    url = f"http://hookuser-7q:pw-s3cr3t-88@127.0.0.1:{port}/hook?token=tok-9d1e"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", LOUD_RELAY, database.runtime_url, url],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    output = done.stdout + done.stderr
    assert 0 == done.returncode, output[-2000:]
    assert b"webhook.delivered" in output  # it did log at debug
    assert 4 == len(script.bodies)
    for secret in (b"pw-s3cr3t-88", b"tok-9d1e", b"hookuser-7q"):
        assert secret not in output


async def test_retention_deleting_a_row_mid_send_and_an_acknowledgement_while_due(
    pools: tuple[PostgresDatabase, ...], script: Script
) -> None:
    """An escalation acknowledged while due is still sent (the webhook reports that it was
    raised, whoever closed it since). An acknowledged escalation that retention deletes
    while the relay holds its request: the relay's outcome finds no row, raises nothing, and
    the relay goes on with the next row."""
    first, second, _ = pools
    held = threading.Event()
    script.steps = [(held, 204)]
    queue = AdminQueue(first, webhook=lambda: None)
    await queue.deliver(escalation(19))
    await queue.deliver(escalation(20))
    [row19, row20] = await first.fetch("SELECT id FROM escalations ORDER BY id")
    assert await queue.acknowledge(row19["id"], by="dana")
    assert await queue.acknowledge(row20["id"], by="dana")
    relay = WebhookRelay(first, slow_sink(script.url))
    sending = asyncio.create_task(relay.send_due())
    await until(lambda: len(script.bodies) == 1)
    future = datetime.now(UTC) + timedelta(days=1)
    assert "DELETE 1" == await second.execute(
        RETENTION["prune_escalations"].replace(
            "acknowledged_at < $1", "acknowledged_at < $1 AND id = $2"
        ),
        future,
        row19["id"],
    )
    held.set()
    assert await sending is None
    keys = [body["key"] for body in script.bodies]
    assert ["memory.conflict_detected:d19:v19", "memory.conflict_detected:d20:v20"] == keys
    assert (None, 0) == (await state(first))[:2]


async def test_two_thousand_due_rows_go_once_each_in_order_and_a_failing_receiver_is_paced(
    pools: tuple[PostgresDatabase, ...], script: Script
) -> None:
    """2,000 escalations queued. With the receiver answering 503, a running relay makes
    about one request per backoff (0.25 s), not one per row: at most a dozen in 2 s. Then
    the receiver answers 204: every row is sent exactly once, in the order queued except
    that the rows which failed come last (due again after their backoff), and none is left
    due."""
    first, second, _ = pools
    queue = AdminQueue(first, webhook=lambda: None)
    for n in range(2000):
        await queue.deliver(escalation(1000 + n))
    script.steps = [(None, 503)] * 40
    relay = WebhookRelay(second, slow_sink(script.url), retry_seconds=0.25, poll_seconds=0.5)
    relay.start()
    try:
        await asyncio.sleep(2.0)
        failures = len(script.bodies)
        assert 1 <= failures <= 12, failures
        script.steps.clear()
        await until(lambda: len(script.bodies) >= 2000 + failures, within=240.0)
        await asyncio.sleep(0.5)
    finally:
        await relay.close()
    failed = [body["key"] for body in script.bodies[:failures]]
    sent = [body["key"] for body in script.bodies[failures:]]
    queued = [f"memory.conflict_detected:d{n}:v{n}" for n in range(1000, 3000)]
    assert len(set(failed)) == failures
    assert sent == [key for key in queued if key not in failed] + failed
    assert 0 == await first.fetchval(
        "SELECT count(*) FROM escalations WHERE webhook_due_at IS NOT NULL "
        "OR webhook_sent_at IS NULL"
    )


async def test_three_relays_on_three_pools_send_each_of_300_rows_exactly_once(
    pools: tuple[PostgresDatabase, ...], script: Script
) -> None:
    """Three relays (one started twice, which starts one task) on pools of their own race
    for 300 due rows, the receiver answering at once: the claim's SKIP
    LOCKED and the lease let each row out exactly once, and none is left due or unsent."""
    queue = AdminQueue(pools[0], webhook=lambda: None)
    for n in range(300):
        await queue.deliver(escalation(5000 + n))
    relays = [WebhookRelay(db, slow_sink(script.url), poll_seconds=0.5) for db in pools]
    relays[0].start()
    relays[0].start()
    for relay in relays:
        relay.start()
    try:
        await until(lambda: len(script.bodies) >= 300, within=120.0)
        await asyncio.sleep(1.0)
    finally:
        for relay in relays:
            await relay.close()
    keys = [body["key"] for body in script.bodies]
    assert len(keys) == len(set(keys)) == 300
    assert 0 == await pools[1].fetchval(
        "SELECT count(*) FROM escalations WHERE webhook_due_at IS NOT NULL "
        "OR webhook_sent_at IS NULL OR webhook_attempts > 0"
    )


async def test_a_kernel_shut_down_mid_send_hands_its_row_back_before_its_pool_closes(
    database: ScratchDatabase, embedder: FastembedEmbedder, script: Script
) -> None:
    """A kernel with ``ENGRAM_WEBHOOK_URL`` escalates; its receiver holds the request; the
    kernel is closed. The close returns without waiting for the receiver, and the relay
    handed its row back before the pool closed: due at once, not sent, no attempt counted,
    for the next kernel to send."""
    held = threading.Event()
    script.steps = [(held, 204)]
    settings = EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        retry_initial_wait_seconds=0.01,
        webhook_url=script.url,
    )
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        await escalate(kernel)
        await until(lambda: len(script.bodies) == 1)
        started = time.monotonic()
    assert time.monotonic() - started < 10.0
    held.set()
    db = await quick_pool(database)
    try:
        due, attempts, sent = await state(db)
    finally:
        await db.close()
    assert (attempts, sent) == (0, None)
    assert due is not None
    assert due <= datetime.now(UTC)
