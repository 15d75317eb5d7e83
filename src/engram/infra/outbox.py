"""Transactional outbox: events are inserted in the transaction of the change they describe
and delivered after commit to in-process subscribers and to ``NOTIFY engram_events``.

A crash between commit and delivery loses nothing: undelivered rows stay in ``outbox`` and
the next drain (at the next commit, or at start-up) delivers them. A drain that fails on its
own (its connection lost, the database down) is tried again 1, 2, 4 ... s later (at most
``MAX_RETRY_WAIT_SECONDS``), with or without new commits. Delivery is at least once.
A subscriber that fails for an infrastructure reason (the database or a dependency down)
leaves its event pending until its own retry time (``ENGRAM_OUTBOX_RETRY_SECONDS`` doubled
per attempt, at most ``MAX_RETRY_WAIT_SECONDS``): drains started by other commits skip it
until then, and a timer starts a drain when it is due, so it is retried with or without
write traffic. After ``ENGRAM_OUTBOX_MAX_ATTEMPTS`` deliveries (ten: about eight minutes of
failures) it is logged as abandoned, at error level, counted in
``engram_outbox_abandoned_total``, and counts as delivered; a subscriber whose work must not
be lost keeps its own way back to it (the release of a consolidation source is finished by
the scheduled passes' sweep, ADR-018). Any other failure is logged and the event counts as
delivered (one subscriber must not block the rest). Payloads carry identifiers, never memory
content.

An event no subscriber of the process waits for needs no delivery but its notice: a change may
then announce it in its own transaction and write it delivered
(:meth:`OutboxEventBus.announcing_channel`; the Gate's one-statement write does, for a new
record without conflicts). PostgreSQL sends a NOTIFY only when its transaction commits, so
listeners hear of exactly the committed changes, as from a delivery.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from engram.errors import InfrastructureError
from engram.infra.db import Connection, DatabaseAdapter
from engram.infra.events import Event, Subscriber
from engram.infra.sql import load_queries

log = structlog.get_logger("engram.infra.outbox")

CHANNEL = "engram_events"
SQL = load_queries("engram.infra", "outbox.sql")

#: Deliveries of one event before a subscriber's infrastructure failure is given up on (the
#: default of ``ENGRAM_OUTBOX_MAX_ATTEMPTS``).
MAX_ATTEMPTS = 10
#: Wait before the first retry of a deferred event; doubled per attempt (1, 2, 4, ... s; the
#: default of ``ENGRAM_OUTBOX_RETRY_SECONDS``).
RETRY_SECONDS = 1.0
#: Longest wait between two attempts (a bound: with ten attempts the longest is 256 s).
MAX_RETRY_WAIT_SECONDS = 300.0
#: Doublings of a failed drain's wait counted at most (2 ** 1024 is past every float).
MAX_DOUBLINGS = 1000


class OutboxEventBus:
    """The :class:`~engram.infra.events.EventBus` backed by the ``outbox`` table."""

    def __init__(
        self,
        db: DatabaseAdapter,
        *,
        batch: int = 200,
        delay_seconds: float = 0.05,
        max_attempts: int = MAX_ATTEMPTS,
        retry_seconds: float = RETRY_SECONDS,
        on_abandoned: Callable[[str], None] | None = None,
    ) -> None:
        """``on_abandoned`` is called with an event's name when its delivery is given up on
        (the kernel counts it in ``engram_outbox_abandoned_total``)."""
        self._db = db
        self._batch = batch
        self._delay = delay_seconds
        self._max_attempts = max_attempts
        self._retry_seconds = retry_seconds
        self._on_abandoned = on_abandoned
        self._subscribers: dict[str, list[Subscriber]] = defaultdict(list)
        self._drain_task: asyncio.Task[None] | None = None
        self._again = False
        #: When a deferred event is due (loop time) and the timer that will drain then.
        self._retry_at: float | None = None
        self._retry: asyncio.TimerHandle | None = None
        #: Set when a retry fires: the drain then looks for the next deferred event's time
        #: (an earlier retry may have replaced the timer of a later one).
        self._rearm = False
        #: Drains in a row that failed on their own (the database, not a subscriber): each
        #: failure sets a retry, 1, 2, 4 ... s later, so nothing waits for the next commit.
        self._drain_failures = 0
        self._closed = False

    async def publish(self, conn: Connection, event: Event) -> None:
        decision = event.payload.get("decision_id")
        await conn.execute(
            SQL["insert_event"],
            event.name,
            event.aggregate_id,
            event.payload,
            None if decision is None else decision,
        )

    def subscribe(self, name: str, subscriber: Subscriber) -> None:
        self._subscribers[name].append(subscriber)

    def announcing_channel(self, names: Sequence[str]) -> str | None:
        if self._subscribers.get("*") or any(self._subscribers.get(n) for n in names):
            return None
        return CHANNEL

    def committed(self) -> None:
        """Schedule delivery of what the last commit added (non-blocking)."""
        if self._closed:
            return
        if self._drain_task is not None and not self._drain_task.done():
            self._again = True
            return
        self._drain_task = asyncio.get_running_loop().create_task(self._drain_loop())

    async def resume(self) -> None:
        """At start-up: deliver what a previous run left in the table, and set the timer for
        the events it deferred that are not due yet."""
        await self._arm_next()
        self.committed()

    async def _arm_next(self) -> None:
        """Set the timer for the earliest deferred event still waiting, if any."""
        wait = await self._db.fetchval(SQL["next_retry"])
        if wait is not None:
            self._retry_after(wait.total_seconds())

    async def _drain_loop(self) -> None:
        # A short pause lets the events of concurrent commits go out in one batch.
        await asyncio.sleep(self._delay)
        while True:
            self._again = False
            try:
                while await self.drain() == self._batch:
                    pass
                if self._rearm:
                    self._rearm = False
                    await self._arm_next()
            except Exception as exc:  # noqa: BLE001 - delivery is retried (timer or commit)
                self._drain_failures += 1
                # The exponent is bounded: past 1,024 failures in a row (85 hours at the
                # defaults) 2 ** n is no longer a float, and the loop would die of it.
                doubled = 2.0 ** min(self._drain_failures - 1, MAX_DOUBLINGS)
                wait = min(self._retry_seconds * doubled, MAX_RETRY_WAIT_SECONDS)
                log.warning("outbox.drain_failed", error=type(exc).__name__, retry_in_seconds=wait)
                # Events this drain held (and those committed meanwhile) are still pending:
                # without a timer they would wait for a commit that may never come.
                self._retry_after(wait)
                return
            self._drain_failures = 0
            if not self._again:
                return

    async def drain(self) -> int:
        """Deliver up to one batch of due events; returns how many were delivered."""
        abandoned: list[str] = []  # counted once the transaction that gives them up commits
        async with self._db.transaction() as conn:
            rows = await conn.fetch(SQL["pending_events"], self._batch)
            if not rows:
                return 0
            notices, done, again = [], [], []
            for row in rows:
                event = Event(row["event_type"], row["aggregate_id"], json.loads(row["payload"]))
                if await self._deliver(event):
                    done.append(row["id"])
                elif row["attempts"] + 1 >= self._max_attempts:
                    log.error(
                        "outbox.delivery_abandoned",
                        event_name=event.name,
                        outbox_id=row["id"],
                        attempts=row["attempts"] + 1,
                    )
                    abandoned.append(event.name)
                    done.append(row["id"])
                else:
                    again.append(row["id"])
                    continue
                notices.append(_notice(row["id"], event))
            if done:
                await conn.execute(SQL["mark_delivered"], done, CHANNEL, notices)
            if again:
                waits = await conn.fetch(
                    SQL["count_attempt"], again, self._retry_seconds, MAX_RETRY_WAIT_SECONDS
                )
                self._retry_after(min(row["wait"].total_seconds() for row in waits))
                log.warning("outbox.delivery_deferred", events=len(again))
        if self._on_abandoned is not None:
            for name in abandoned:
                self._on_abandoned(name)
        return len(done)

    def _retry_after(self, seconds: float) -> None:
        """Start a drain in ``seconds`` (sooner if one is already set for earlier)."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + max(0.0, seconds)
        if self._retry is not None and self._retry_at is not None and self._retry_at <= due:
            return
        if self._retry is not None:
            self._retry.cancel()
        self._retry_at = due
        self._retry = loop.call_at(due, self._retry_due)

    def _retry_due(self) -> None:
        self._retry = self._retry_at = None
        self._rearm = True
        self.committed()

    async def _deliver(self, event: Event) -> bool:
        """Call every subscriber; False when one failed for an infrastructure reason (the
        event should be delivered again)."""
        delivered = True
        for subscriber in [*self._subscribers.get(event.name, []), *self._subscribers["*"]]:
            try:
                await subscriber(event)
            except InfrastructureError as exc:
                log.warning("outbox.subscriber_failed", event_name=event.name, error=repr(exc))
                delivered = False
            except Exception as exc:  # noqa: BLE001 - one subscriber must not block the rest
                log.warning("outbox.subscriber_failed", event_name=event.name, error=repr(exc))
        return delivered

    async def settled(self, *, timeout_seconds: float = 30.0) -> None:
        """Wait until every event committed so far, and every event their delivery led to,
        has been delivered."""
        async with asyncio.timeout(timeout_seconds):
            while True:
                task = self._drain_task
                if task is not None and not task.done():
                    await asyncio.gather(task, return_exceptions=True)
                    continue
                if await self.drain() == 0 and (
                    self._drain_task is None or self._drain_task.done()
                ):
                    return

    async def close(self) -> None:
        """Wait for a delivery in progress to finish, then stop: no drain starts and no retry
        fires after this; a retry not yet due is left for the next start (:meth:`resume`)."""
        self._closed = True
        if self._drain_task is not None:
            await asyncio.gather(self._drain_task, return_exceptions=True)
        if self._retry is not None:
            self._retry.cancel()
            self._retry = self._retry_at = None


def _notice(outbox_id: int, event: Event) -> str:
    payload: dict[str, Any] = {
        "id": outbox_id,
        "event": event.name,
        "aggregate_id": str(event.aggregate_id),
    }
    return json.dumps(payload)
