"""Hostile pass S: crash consistency, races and resource exhaustion as a hostile operator
environment produces them (slow clients holding sockets, lost acknowledgements of admin
commands, a tampered audit table under replay, kernels migrating one database at once).

Every test here failed on the code it was written against; what held is in
``test_hostile_pass_s_held.py``. Real embedded PostgreSQL, the real embedding model, real
``engram serve`` and migration processes, no mocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path

import asyncpg
import httpx
import psutil
import pytest

from engram import Kernel
from engram.errors import WebhookUnavailable
from engram.infra import migrate
from engram.infra.embedded_server import EmbeddedPostgres
from engram.infra.webhook import WebhookSink
from engram.memory.types import TrustLevel
from engram.notifications.dispatcher import Escalation
from tests.conftest import ScratchDatabase
from tests.e2e.conftest import TOKEN, Served, close, start_serve
from tests.e2e.test_serve import ENGRAM, _env, _free_port, _postgres_for
from tests.integration.gate_helpers import STANDARD, belief, create, escalate
from tests.integration.lost_ack import with_lost_ack

CALLER = replace(STANDARD, writes_per_minute=1_000_000, trust_level=TrustLevel.TRUSTED)

# --- slow clients ----------------------------------------------------------------------------

#: The request deadline the server under test runs with (ENGRAM_HTTP_REQUEST_TIMEOUT_SECONDS).
DEADLINE = 2.0


@pytest.fixture
def guarded_serve(tmp_path: Path, model_dir: Path) -> Iterator[Served]:
    """`engram serve` with a short request deadline, ready."""
    env = _env(
        tmp_path / "engram-data",
        model_dir,
        ENGRAM_PORT=str(_free_port()),
        ENGRAM_SCHEDULER="false",
        ENGRAM_HTTP_REQUEST_TIMEOUT_SECONDS=str(DEADLINE),
    )
    server = start_serve(env)
    try:
        assert httpx.get(f"{server.base}/readyz", timeout=5).status_code == 200, server.output()
        yield server
    finally:
        close(server)


def _held_for(sock: socket.socket, started: float, limit: float) -> tuple[float, bytes]:
    """How long after ``started`` the server kept ``sock`` open (reading until it closes,
    ``limit`` seconds at most), and what it sent meanwhile."""
    got = b""
    sock.settimeout(0.5)
    while time.monotonic() - started < limit:
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            continue
        except ConnectionResetError:
            break
        if not chunk:
            break
        got += chunk
    return time.monotonic() - started, got


def test_a_client_that_never_finishes_its_request_is_cut_off(guarded_serve: Served) -> None:
    """High. uvicorn sets no deadline on a request being received: a connection that sends
    nothing, stops in the middle of its headers, or trickles a body declared by Content-Length
    was held open for as long as the client liked, so a few thousand of them (one socket each,
    no token needed for the first three) use up the server's file descriptors, and every
    other client, and the kernel's own new database connections, are refused. Each is now
    closed within the request deadline, answered 408 when a request had begun, and the
    server still answers."""
    host, port = guarded_serve.base.removeprefix("http://").split(":")
    token = TOKEN.search(guarded_serve.output())
    assert token is not None, guarded_serve.output()
    openers = {
        "nothing": b"",
        "half a request line": b"GET /healthz HT",
        "headers without their end": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n",
        "a body that never arrives": (
            b"POST /v1/memories HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + token.group(0).encode() + b"\r\n"
            b'Content-Length: 500\r\n\r\n{"type": "belief", '
        ),
    }
    sockets = {name: socket.create_connection((host, int(port))) for name in openers}
    try:
        for name, opener in openers.items():
            if opener:
                sockets[name].sendall(opener)
        started = time.monotonic()
        held = {name: _held_for(sock, started, DEADLINE + 8) for name, sock in sockets.items()}
    finally:
        for sock in sockets.values():
            sock.close()
    assert dict.fromkeys(openers, True) == {
        name: seconds < DEADLINE + 5 for name, (seconds, _) in held.items()
    }, held
    for name in ("half a request line", "headers without their end", "a body that never arrives"):
        assert held[name][1].startswith(b"HTTP/1.1 408 "), (name, held[name][1][:300])
    assert httpx.get(f"{guarded_serve.base}/healthz", timeout=5).status_code == 200


def test_a_client_sending_slowly_but_within_the_deadline_is_served(guarded_serve: Served) -> None:
    """The deadline counts from a request's first byte and ends with its last: a request
    sent in pieces within it is answered normally, and a keep-alive connection's next
    request gets a deadline of its own."""
    host, port = guarded_serve.base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        for _ in range(2):
            for piece in (b"GET /healthz HTTP/1.1\r\n", b"Host: x\r\n", b"\r\n"):
                sock.sendall(piece)
                time.sleep(DEADLINE / 5)
            sock.settimeout(DEADLINE + 5)
            answer = sock.recv(4096)
            assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]


def test_a_request_the_server_cannot_parse_is_a_problem_document(guarded_serve: Served) -> None:
    """Low. A request line that is not HTTP, or headers larger than the parser buffers (sent
    faster than it reads), were answered by uvicorn with a plain-text 400 ("Invalid HTTP
    request received."), the one refusal of the server that was not a problem document.
    Both are now a 400 ``bad-request`` problem."""
    host, port = guarded_serve.base.removeprefix("http://").split(":")
    sent = {
        "not HTTP": b"HELLO THERE\r\n\r\n",
        "a header of a megabyte": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "
        + b"a" * 2**20
        + b"\r\n\r\n",
    }
    answers: dict[str, bytes] = {}
    for name, data in sent.items():
        with socket.create_connection((host, int(port))) as sock:
            with contextlib.suppress(ConnectionError):
                sock.sendall(data)
            answers[name] = _held_for(sock, time.monotonic(), DEADLINE + 8)[1]
    for name, answer in answers.items():
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 "), (name, answer[:300])
        assert b"content-type: application/problem+json" in head.lower(), (name, head)
        problem = json.loads(body)
        assert ("urn:engram:problem:bad-request", 400) == (problem["type"], problem["status"])


# --- an escalation closed whose acknowledgement is lost ---------------------------------------


async def test_an_escalation_closed_whose_commit_acknowledgement_is_lost_is_reported_closed(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Medium. `engram conflicts ack 12` closes the escalation; the connection is terminated
    before the kernel hears that the UPDATE committed, and the adapter runs the statement
    again. The retry found the escalation already closed and the command answered "no open
    escalation 12" (exit 3) for the escalation it had itself just closed. The retry now
    recognises its own acknowledgement; another admin's ack of a closed one is still refused."""
    record_id = uuid.uuid4()
    await escalate(kernel, record_id)
    (row,) = await kernel.admin_queue.pending()
    closed = await with_lost_ack(
        database.admin_url,
        kernel.admin_queue.acknowledge(row["id"], by="dana"),
        "UPDATE escalations",
    )
    assert closed is True
    assert [] == await kernel.admin_queue.pending()
    assert await kernel.admin_queue.acknowledge(row["id"], by="dana") is False
    admin = await asyncpg.connect(database.admin_url)
    try:
        who = await admin.fetchval(
            "SELECT acknowledged_by FROM engram.escalations WHERE id = $1", row["id"]
        )
    finally:
        await admin.close()
    assert who == "dana"


# --- replay over a tampered audit table -------------------------------------------------------


async def test_replay_over_rows_of_the_wrong_shape_skips_them_and_replays_the_rest(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Medium. The database's owner (or anyone on the embedded server's socket) edits audit
    rows, triggers off: Layer 1's checks turned into an object or a list of numbers, Layer 2's
    advice into a list or an object without its keys, the caller into a number. `engram audit
    replay` (and the advisor's evaluation, which replays the log) ended in a traceback
    (AttributeError, TypeError, KeyError) for the whole log. Each such row is now skipped
    with its reason, as unreadable input is, and every other row replays as before."""
    for n in range(7):
        text = f"Rack {n} of the Lisbon hall hosts build runner {n * 7}."
        made = await kernel.gate.evaluate(create(belief(text), CALLER))
        assert made.record_id is not None, made.reason
    admin = await asyncpg.connect(database.admin_url)
    try:
        seqs = [
            int(r["seq"])
            for r in await admin.fetch(
                "SELECT seq FROM engram.librarian_audit ORDER BY seq LIMIT 7"
            )
        ]
        edits = {
            seqs[1]: 'layer1_checks = \'{"name": "schema"}\'::json',
            seqs[2]: "layer1_checks = '[1, 2]'::json",
            seqs[3]: "layer2_decision = '[]'::json",
            seqs[4]: "layer2_decision = '{\"action\": 7}'::json",
            seqs[5]: "caller = '5'::json",
        }
        await admin.execute("ALTER TABLE engram.librarian_audit DISABLE TRIGGER USER")
        for seq, assignment in edits.items():
            await admin.execute(
                f"UPDATE engram.librarian_audit SET {assignment} WHERE seq = $1",
                seq,
            )
        await admin.execute("ALTER TABLE engram.librarian_audit ENABLE TRIGGER USER")
    finally:
        await admin.close()
    report = await kernel.replay.replay()
    assert sorted(edits) == sorted(d.seq for d in report.skipped)
    assert all(d.skipped for d in report.skipped)
    assert [] == [d.to_json() for d in report.changed]
    assert 7 == len(report.decisions)
    assert report.to_json()["skipped"] == len(edits)


# --- two kernels migrating one database at once -----------------------------------------------

_UPGRADE = "import sys; from engram.infra import migrate; migrate.upgrade(sys.argv[1])"


async def upgrading(url: str, *, stderr: int) -> asyncio.subprocess.Process:
    """A process of its own migrating the database at ``url`` to head, as a starting kernel
    does (``stderr``: where its errors go, ``asyncio.subprocess.PIPE`` to read them)."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", _UPGRADE, url, stdout=asyncio.subprocess.DEVNULL, stderr=stderr
    )


async def test_kernels_migrating_one_database_at_once_all_start(
    pg_server: EmbeddedPostgres, empty_database: ScratchDatabase
) -> None:
    """Medium. docs/operations.md: any number of `serve` and `worker` processes may share one
    database, and each migrates on start. Started together on an empty (or older) database,
    they ran the same revisions side by side: all but one failed with a duplicate key in
    PostgreSQL's catalog (MigrationError, the process exits) and had to be restarted. The
    migrations now wait for each other; every process reaches head, once."""
    url = pg_server.admin_url(empty_database.name)
    runs = [await upgrading(url, stderr=asyncio.subprocess.PIPE) for _ in range(3)]
    outcomes = []
    for run in runs:
        _, err = await asyncio.wait_for(run.communicate(), timeout=180)
        outcomes.append((run.returncode, err.decode(errors="replace").splitlines()[-1:]))
    assert [0, 0, 0] == [code for code, _ in outcomes], outcomes
    admin = await asyncpg.connect(url)
    try:
        versions = await admin.fetch("SELECT version_num FROM public.alembic_version")
    finally:
        await admin.close()
    assert [migrate.head_revision()] == [row["version_num"] for row in versions]


async def test_kernels_creating_the_database_at_once_all_go_on(pg_server: EmbeddedPostgres) -> None:
    """Medium. Kernels started together on a new embedded data dir each create the database
    `engram` unless it exists: all saw it missing, one created it, and the others' CREATE
    DATABASE failed with asyncpg's UniqueViolationError, which no layer translates (the
    process ended with a traceback, `Application startup failed`). A database created
    meanwhile by another is now one that exists."""
    name = f"c_{uuid.uuid4().hex[:16]}"
    try:
        created = await asyncio.gather(
            *(migrate.ensure_database(pg_server.admin_url(), name) for _ in range(4)),
            return_exceptions=True,
        )
        assert [False, False, False, True] == sorted(created, key=repr), created
    finally:
        admin = await asyncpg.connect(pg_server.admin_url())
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


def test_commands_started_together_on_a_new_data_dir_all_reach_head(
    tmp_path: Path, model_dir: Path
) -> None:
    """Medium. Three `engram --init migrate` at once on a data dir that does not exist yet
    (kernels started together on a new host go the same way): as well as the database
    creation and migration races above, a process narrowing the data dir to 0700 while
    another ran initdb as the server's system user (engram run as root) made initdb fail
    ("could not access directory"). Every process now exits 0 at the head revision, and the
    last one out stops the embedded server."""
    env = _env(tmp_path / "engram-data", model_dir)
    runs = [
        subprocess.Popen(  # noqa: S603 - our own CLI
            [*ENGRAM, "--init", "migrate"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for _ in range(3)
    ]
    outputs = [run.communicate(timeout=180)[0].decode(errors="replace") for run in runs]
    assert [0, 0, 0] == [run.returncode for run in runs], [o[-600:] for o in outputs]
    head = migrate.head_revision()
    assert all(f"schema at revision {head}" in output for output in outputs), outputs
    assert [] == _postgres_for(tmp_path / "engram-data" / "pg")


# --- a webhook receiver that answers slowly, or without end -----------------------------------


class Receiver:
    """A real HTTP server on loopback that reads a request and answers it with ``answer``
    (an async function given the stream's writer)."""

    def __init__(self, answer: Callable[[asyncio.StreamWriter], Awaitable[None]]) -> None:
        self.answer = answer
        self.requests = 0
        self.server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            self.requests += 1
            await self.answer(writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/hook"

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()


async def _trickled_head(writer: asyncio.StreamWriter) -> None:
    """A status line and headers one byte every half second, never ending."""
    for byte in itertools.cycle(b"HTTP/1.1 200 OK\r\nX-Slow: "):
        writer.write(bytes([byte]))
        await writer.drain()
        await asyncio.sleep(0.5)


async def _endless_body(writer: asyncio.StreamWriter) -> None:
    """A 200 whose chunked body never ends, sent as fast as the client reads it."""
    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)
    while True:
        writer.write(chunk)
        await writer.drain()


def _escalation() -> Escalation:
    return Escalation(
        "memory.conflict_detected",
        uuid.uuid4(),
        {"decision_id": str(uuid.uuid4()), "classification": "unresolvable"},
    )


async def test_a_webhook_that_trickles_its_answer_fails_within_its_timeout() -> None:
    """High. The outbox delivers an escalation inside its transaction (the batch's rows
    locked, a pooled connection held). httpx's timeout bounds each read, not the request: a
    receiver sending its answer a byte every half second kept the POST, and with it the
    drain, waiting for ever, so no later event of that kernel was delivered again. Each
    attempt is now bounded as a whole; the escalation is deferred as for a webhook that is
    down."""
    async with Receiver(_trickled_head) as url:
        sink = WebhookSink(url, retries=1, initial_wait_seconds=0.1, timeout_seconds=1.0)
        started = time.monotonic()
        with pytest.raises(WebhookUnavailable):
            await asyncio.wait_for(sink.deliver(_escalation()), timeout=20)
        assert time.monotonic() - started < 5


async def test_a_webhook_answering_without_end_is_not_read_into_memory() -> None:
    """High. The sink read the receiver's whole answer into memory before looking at its
    status: a receiver (or anything the URL reaches) streaming a body without end grew the
    kernel's memory until the answer ended, which it never does. The status alone decides
    now; the body is not read."""
    async with Receiver(_endless_body) as url:
        sink = WebhookSink(url, retries=0, timeout_seconds=5.0)
        before = psutil.Process().memory_info().rss
        await asyncio.wait_for(sink.deliver(_escalation()), timeout=20)
        grown = psutil.Process().memory_info().rss - before
    assert grown < 64 * 2**20
