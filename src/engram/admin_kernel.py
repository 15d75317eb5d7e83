"""The admin composition: what is stored, without the Gate, the model or the jobs.

The admin commands that only read or administer stored state (agents, conflicts, memories,
audit verify/checkpoint/export/state, the quarantine list) need a database pool and a few
desks over it, not the Librarian Gate with its PII screens and conflict classifier, the
embedding workers, the scheduler's catalogue or the migrations. :func:`open_admin_kernel`
wires just those, from the same classes :mod:`engram.kernel` uses, so the commands answer
in about a second (ADR-021). Nothing here writes a memory: an admin write (a release, a
consolidation, a replay with the model) opens the whole kernel.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from engram.agents.registry import AgentRegistry
from engram.config import EngramSettings
from engram.infra import migrate
from engram.infra.db import DatabaseAdapter
from engram.memory.admin.quarantine import QuarantineDesk
from engram.memory.audit.log import AuditLog
from engram.memory.audit.state import AuditState
from engram.memory.temporal.engine import TemporalEngine
from engram.notifications.dispatcher import AdminQueue
from engram.provision import check_schema, connect_database, database_urls


@dataclass
class AdminKernel:
    """The stored state of a kernel and the desks that administer it."""

    settings: EngramSettings
    db: DatabaseAdapter
    agents: AgentRegistry
    admin_queue: AdminQueue
    audit: AuditLog
    quarantine: QuarantineDesk
    #: Reads that count for no decay (an admin looking is not a use).
    admin_temporal: TemporalEngine
    audit_state: AuditState
    head_revision: str


@asynccontextmanager
async def open_admin_kernel(settings: EngramSettings) -> AsyncIterator[AdminKernel]:
    """Start (or attach to) the database and yield the admin desks over it.

    The schema must be at the code's head revision (this never migrates); the pool is small,
    since one admin command runs one query at a time.
    """
    settings = settings.model_copy(update={"db_pool_min_size": 1, "db_pool_max_size": 2})
    async with AsyncExitStack() as stack:
        runtime_url, _ = await database_urls(settings, stack)
        db = await connect_database(settings, runtime_url, stack)
        head = migrate.head_revision()
        await check_schema(db, head)
        audit = AuditLog(
            db,
            checkpoint_every=settings.audit_checkpoint_every,
            checkpoint_seconds=settings.audit_checkpoint_seconds,
        )
        stack.push_async_callback(audit.drain)  # before the pool closes: a seal may be running
        admin_temporal = TemporalEngine(db)
        yield AdminKernel(
            settings=settings,
            db=db,
            agents=AgentRegistry(db),
            admin_queue=AdminQueue(db),
            audit=audit,
            quarantine=QuarantineDesk(db, audit),
            admin_temporal=admin_temporal,
            audit_state=AuditState(db, reader=admin_temporal),
            head_revision=head,
        )
