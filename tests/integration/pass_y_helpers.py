"""What hostile pass Y's tests share: an outside summariser (an OpenAI-compatible endpoint on
loopback) that can hold, drip or mangle one answer, an engine that uses it, the topics the
tests write and a hold on the audit lane every consolidation batch needs."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from uuid import UUID

import asyncpg

from engram import Kernel
from engram.infra.llm import OpenAICompatibleGenerator
from engram.memory.audit.entry import BATCH_LANE
from engram.memory.consolidation import (
    ConsolidationEngine,
    ConsolidationSettings,
    ExtractiveSummarizer,
)
from engram.memory.consolidation.summarize import CheckedSummarizer
from engram.memory.types import AccessLevel, MemoryStatus
from tests.integration.consolidation_helpers import head_of
from tests.integration.gate_helpers import lock_waiters
from tests.integration.test_hostile_pass_o import FLOOD
from tests.integration.test_triggers import episode, write


@dataclass
class Summariser:
    """What the loopback model does. Every answer is empty text (the planner then keeps the
    extractive text, so plans are those of the default summariser), except the ``special``-th
    request (1-based), which is held until ``release`` is set (``hold``), answered with a
    JSON document nested ``depth`` deep (``nested``) or with its body sent one byte every
    ``drip_seconds`` (``drip``)."""

    special: int = 0
    behaviour: str = "hold"
    depth: int = 100_000
    drip_seconds: float = 0.5
    asked: int = 0
    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    async def reached(self, within: float = 15.0) -> None:
        """Until the special request has arrived."""
        assert await asyncio.to_thread(self.arrived.wait, within), "never asked"


def _handler(state: Summariser) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            state.asked += 1
            special = state.asked == state.special
            body = json.dumps({"choices": [{"message": {"content": ""}}]}).encode()
            if special:
                state.arrived.set()
                if state.behaviour == "hold":
                    state.release.wait(30)
                elif state.behaviour == "nested":
                    body = b"[" * state.depth + b"]" * state.depth
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if special and state.behaviour == "drip":
                for n in range(len(body)):
                    self.wfile.write(body[n : n + 1])
                    self.wfile.flush()
                    time.sleep(state.drip_seconds)
                    if state.release.is_set():
                        return
                return
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            del args

    return Handler


@contextmanager
def loopback(
    handler: type[BaseHTTPRequestHandler], path: str, stop: threading.Event
) -> Iterator[str]:
    """``handler`` served on a loopback port until the block ends, yielding the URL of
    ``path`` there; ``stop`` is set first on the way out, so a handler waiting on it lets go
    before the server shuts down."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}{path}"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


@contextmanager
def summariser(state: Summariser) -> Iterator[Summariser]:
    """``state`` served on a loopback port (its ``url`` set) until the block ends."""
    with loopback(_handler(state), "/v1", state.release) as state.url:
        yield state


def llm_engine(
    kernel: Kernel,
    url: str,
    *,
    timeout: float = 10.0,
    clock: Callable[[], float] = time.monotonic,
    **settings: object,
) -> ConsolidationEngine:
    """An engine on ``kernel`` whose summariser asks the model at ``url`` first."""
    generator = OpenAICompatibleGenerator(url, model="m", timeout_seconds=timeout)
    return ConsolidationEngine(
        db=kernel.db,
        gate=kernel.gate,
        events=kernel.events,
        metrics=kernel.metrics,
        summarizer=CheckedSummarizer(generator, ExtractiveSummarizer()),
        settings=ConsolidationSettings(**settings),  # type: ignore[arg-type]
        clock=clock,
    )


async def topics(
    kernel: Kernel, count: int, level: AccessLevel = AccessLevel.AGENT, first: int = 0
) -> list[list[UUID]]:
    """``count`` unrelated topics of three episodes each at ``level``: pass O's flood, from
    its ``first`` topic."""
    written = [
        [
            await write(kernel, episode(text, 10 * t + n, access_level=level))
            for n, text in enumerate(FLOOD[t])
        ]
        for t in range(first, first + count)
    ]
    await kernel.events.settled()
    return written


async def statuses(kernel: Kernel, ids: Sequence[UUID]) -> list[MemoryStatus]:
    """The current status of each record."""
    return [(await head_of(kernel, record_id)).status for record_id in ids]


@asynccontextmanager
async def lane_held(admin_url: str) -> AsyncIterator[None]:
    """The batches' audit lane locked by a session of its own for the block (a batch that
    reaches it waits, its transaction open). Watch the waiters from another session: one
    inside a transaction reads ``pg_stat_activity`` once and never sees them arrive."""
    holder = await asyncpg.connect(admin_url)
    try:
        held = holder.transaction()
        await held.start()
        await holder.execute(
            "SELECT 1 FROM engram.audit_chain_heads WHERE lane = $1 FOR UPDATE", BATCH_LANE
        )
        yield
        await held.rollback()
    finally:
        await holder.close()


async def waiting(admin: asyncpg.Connection, count: int) -> None:
    """Until ``count`` sessions wait for a lock (``gate_helpers.lock_waiters``)."""
    await lock_waiters(admin, count)


async def lock_waiting(admin: asyncpg.Connection) -> int:
    """How many sessions of this database wait for a lock now."""
    found: int = await admin.fetchval(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE wait_event_type = 'Lock' AND datname = current_database()"
    )
    return found


@dataclass
class Hook:
    """A loopback webhook receiver speaking HTTP/1.1 (kept-alive connections). Each answer is
    ``status`` (after the ``slow``-th request, held until ``release`` is set), carrying the
    ``headers`` given (``{n}`` in a value is the request's number); what each request
    carried is kept in ``requests`` (its headers) and ``ports`` (its client's port)."""

    status: int = 204
    headers: dict[str, str] = field(default_factory=dict)
    slow: int = 0
    release: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Event = field(default_factory=threading.Event)
    requests: list[dict[str, str]] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    url: str = ""


def _hook_handler(state: Hook) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            state.requests.append({k.lower(): v for k, v in self.headers.items()})
            state.ports.append(self.client_address[1])
            number = len(state.requests)
            if number == state.slow:
                state.arrived.set()
                state.release.wait(30)
            self.send_response(state.status)
            for name, value in state.headers.items():
                self.send_header(name, value.replace("{n}", str(number)))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            del args

    return Handler


@contextmanager
def hook(state: Hook) -> Iterator[Hook]:
    """``state`` served on a loopback port (its ``url`` set) until the block ends."""
    with loopback(_hook_handler(state), "/hook", state.release) as state.url:
        yield state


@dataclass(frozen=True)
class Escalated:
    """An escalation as a sink is handed one."""

    key: str
    kind: str = "conflict_unresolvable"
    payload: dict[str, object] = field(default_factory=dict)


@contextmanager
def dropping_hook(reset: bool) -> Iterator[tuple[str, list[int]]]:
    """A receiver that answers each request 204 over HTTP/1.1 without ``Connection: close``
    (so the connection looks reusable) and then closes it at once: with a FIN, or with a
    RST when ``reset``. Yields its URL and the requests it answered (one entry each)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    answered: list[int] = []

    def one(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, rest = data.split(b"\r\n\r\n", 1)
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(rest) < length:
                rest += conn.recv(65536)
            answered.append(1)
            conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")
            if reset:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook", answered
    finally:
        listener.close()
