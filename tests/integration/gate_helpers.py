"""Builders shared by the Gate's integration tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import asyncpg

from engram import Kernel
from engram.infra.events import Event
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    CallerIdentity,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    TrustLevel,
)

EXTERNAL = GateDecisionType.EXTERNAL
WHEN = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)

STANDARD = caller_for_tier("agent-standard", TrustLevel.STANDARD)
TRUSTED = caller_for_tier("agent-trusted", TrustLevel.TRUSTED)
RESTRICTED = caller_for_tier("agent-restricted", TrustLevel.RESTRICTED)
READ_ONLY = caller_for_tier("agent-reader", TrustLevel.READ_ONLY)
SYSTEM = CallerIdentity.system("tests")

# Callers whose rate limit never takes part (for tests about access, races and resolutions).
FAST = 100_000
WRITER = replace(STANDARD, writes_per_minute=FAST)
OTHER = replace(STANDARD, agent_id="agent-standard-2", writes_per_minute=FAST)
BOSS = replace(TRUSTED, writes_per_minute=FAST)
INTERN = replace(RESTRICTED, writes_per_minute=FAST)


def belief(content: str, **fields: Any) -> MemoryRecord:
    """A belief proposal by the standard agent."""
    fields.setdefault("source_agent", "agent-standard")
    return MemoryRecord.draft(MemoryType.BELIEF, content, **fields)


def create(
    record: MemoryRecord,
    caller: CallerIdentity = STANDARD,
    origin: GateDecisionType = EXTERNAL,
    **extra: Any,
) -> GateRequest:
    """A CREATE request."""
    return GateRequest(GateAction.CREATE, record, caller, origin, **extra)


def update(
    record_id: UUID,
    content: str,
    expected_version: int | None,
    caller: CallerIdentity = STANDARD,
    origin: GateDecisionType = EXTERNAL,
    *,
    memory_type: MemoryType = MemoryType.BELIEF,
    **fields: Any,
) -> GateRequest:
    """An UPDATE request proposing new content for ``record_id``."""
    fields.setdefault("source_agent", caller.agent_id)
    proposal = MemoryRecord.draft(memory_type, content, record_id=record_id, **fields)
    return GateRequest(GateAction.UPDATE, proposal, caller, origin, expected_version)


_LOCK_HEAD = (
    "SELECT 1 FROM engram.memories WHERE record_id = $1 AND superseded_by IS NULL FOR NO KEY UPDATE"
)


@dataclass
class HeldHead:
    """A record's head locked by an outside session (``admin``), and a second session
    (``watch``) to observe the waiters from: pg_stat_activity is read once per transaction,
    so the session holding the lock cannot see them arrive."""

    admin: asyncpg.Connection
    watch: asyncpg.Connection
    held: Any

    async def release(self) -> None:
        """End the transaction holding the lock (once)."""
        if self.held is not None:
            await self.held.rollback()
            self.held = None


@asynccontextmanager
async def holding_head(admin_url: str, record_id: UUID) -> AsyncIterator[HeldHead]:
    """Lock ``record_id``'s head as a writer would (FOR NO KEY UPDATE) from a session of its
    own until :meth:`HeldHead.release` or the end of the block."""
    admin = await asyncpg.connect(admin_url)
    watch = await asyncpg.connect(admin_url)
    try:
        held = admin.transaction()
        await held.start()
        await admin.execute(_LOCK_HEAD, record_id)
        lock = HeldHead(admin, watch, held)
        yield lock
        await lock.release()
    finally:
        await admin.close()
        await watch.close()


async def lock_waiters(admin: asyncpg.Connection, count: int, *, seconds: float = 10.0) -> None:
    """Until ``count`` sessions of this database wait for a lock (at most ``seconds``)."""
    for _ in range(int(seconds * 100)):
        waiting = await admin.fetchval(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        if waiting >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {count} sessions waited for a lock")


async def escalate(kernel: Kernel, record_id: UUID) -> None:
    """Queue an escalation as the outbox delivers one: an unresolvable conflict of a new
    decision about ``record_id``, handed to the kernel's notification dispatcher."""
    await kernel.notifications.handle(
        Event(
            name="memory.conflict_detected",
            aggregate_id=record_id,
            payload={"decision_id": str(uuid4()), "classification": "unresolvable"},
        )
    )
