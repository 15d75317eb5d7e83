"""Delivery of escalations (conflicts a person must decide) to sinks.

The dispatcher subscribes to ``memory.conflict_detected`` on the event bus (delivered after
commit from the outbox, so an escalation is never lost with a crash) and hands each one to
every sink: the log and the admin queue (a table the CLI lists). With a webhook configured,
the admin queue's row is also marked due for it, and the webhook relay
(:mod:`engram.notifications.relay`) sends it outside the outbox, so a slow receiver holds no
event (migration 0021). A sink that fails is logged and does not stop the others. When one
failed for an infrastructure reason (the admin queue's database unreachable, a privilege
missing), the failure is raised once every sink had its turn, so the outbox delivers the
event again: an escalation is never marked delivered without its row in the admin queue.
Delivery is therefore at least once for every sink: the admin queue keeps one row per
escalation (its key), a webhook's body carries the same ``key``, and the log may show the
event again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

import structlog

from engram.errors import InfrastructureError
from engram.infra.db import DatabaseAdapter, Row
from engram.infra.events import Event
from engram.infra.sql import load_queries

log = structlog.get_logger("engram.notifications")

ESCALATED_EVENTS = ("memory.conflict_detected",)

SQL = load_queries("engram.notifications", "escalations.sql")


@dataclass(frozen=True, slots=True)
class Escalation:
    """Something a person must decide; carries identifiers, never memory content."""

    kind: str
    record_id: UUID
    payload: dict[str, Any]

    @property
    def key(self) -> str:
        """Identity of the escalation, so a redelivered event queues once."""
        decision = self.payload.get("decision_id")
        return f"{self.kind}:{decision}:{self.payload.get('existing_version_id')}"


class NotificationSink(Protocol):
    """Somewhere escalations go."""

    @property
    def name(self) -> str:
        """Short name for logs."""
        ...

    async def deliver(self, escalation: Escalation) -> None:
        """Deliver one escalation (raise if it could not be delivered)."""
        ...


class LogSink:
    """Writes escalations to the structured log (identifiers only)."""

    name = "log"

    async def deliver(self, escalation: Escalation) -> None:
        log.warning(
            "notification.escalated",
            kind=escalation.kind,
            record_id=str(escalation.record_id),
            classification=escalation.payload.get("classification"),
            existing_record_id=escalation.payload.get("existing_record_id"),
        )


class AdminQueue:
    """The admin queue: escalations stored until a person acknowledges them."""

    name = "admin_queue"

    def __init__(self, db: DatabaseAdapter, *, webhook: Callable[[], None] | None = None) -> None:
        self._db = db
        #: With a webhook configured: rows are queued due for it, and this wakes its relay.
        self._webhook = webhook

    async def deliver(self, escalation: Escalation) -> None:
        await self._db.execute(
            SQL["queue"],
            escalation.kind,
            escalation.record_id,
            escalation.key,
            escalation.payload,
            self._webhook is not None,
        )
        if self._webhook is not None:
            self._webhook()

    async def pending(self, *, limit: int = 100) -> list[Row]:
        """Open escalations, oldest first."""
        return await self._db.fetch(SQL["open"], limit)

    async def acknowledge(self, escalation_id: int, *, by: str) -> bool:
        """Close one escalation; False if it was unknown or already closed.

        The statement names the instant of this acknowledgement, so the adapter's retry after
        a commit whose answer was lost recognises its own closing and answers True."""
        at = datetime.now(UTC)
        return await self._db.fetchrow(SQL["acknowledge"], escalation_id, by, at) is not None


class NotificationDispatcher:
    """Fans escalations out to its sinks."""

    def __init__(self, sinks: Sequence[NotificationSink]) -> None:
        self.sinks = list(sinks)

    async def handle(self, event: Event) -> None:
        """Event-bus subscriber for the escalated event kinds; raises the first
        infrastructure failure of a sink after every sink was tried (see the module)."""
        if event.name not in ESCALATED_EVENTS:
            return
        escalation = Escalation(event.name, event.aggregate_id, dict(event.payload))
        again: InfrastructureError | None = None
        for sink in self.sinks:
            try:
                await sink.deliver(escalation)
            except InfrastructureError as exc:
                log.error("notification.sink_failed", sink=sink.name, error=type(exc).__name__)
                again = again or exc
            except Exception as exc:  # noqa: BLE001 - one failing sink must not silence the rest
                log.error("notification.sink_failed", sink=sink.name, error=type(exc).__name__)
        if again is not None:
            raise again
