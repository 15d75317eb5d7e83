"""What hostile pass Y's tests share: an outside summariser (an OpenAI-compatible endpoint on
loopback) that can hold, drip or mangle one answer, an engine that uses it, the topics the
tests write and a hold on the audit lane every consolidation batch needs."""

from __future__ import annotations

import asyncio
import json
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
def summariser(state: Summariser) -> Iterator[Summariser]:
    """``state`` served on a loopback port (its ``url`` set) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state.url = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()


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
    kernel: Kernel, count: int, level: AccessLevel = AccessLevel.AGENT
) -> list[list[UUID]]:
    """``count`` unrelated topics of three episodes each at ``level`` (pass O's flood)."""
    written = [
        [
            await write(kernel, episode(text, 10 * t + n, access_level=level))
            for n, text in enumerate(FLOOD[t])
        ]
        for t in range(count)
    ]
    await kernel.events.settled()
    return written


async def statuses(kernel: Kernel, ids: Sequence[UUID]) -> list[MemoryStatus]:
    """The current status of each record."""
    return [(await head_of(kernel, record_id)).status for record_id in ids]


@asynccontextmanager
async def lane_held(admin: asyncpg.Connection) -> AsyncIterator[None]:
    """The batches' audit lane locked by ``admin`` for the block (a batch that reaches it
    waits, its transaction open); released by rolling back."""
    held = admin.transaction()
    await held.start()
    try:
        await admin.execute(
            "SELECT 1 FROM engram.audit_chain_heads WHERE lane = $1 FOR UPDATE", BATCH_LANE
        )
        yield
    finally:
        await held.rollback()


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
