"""The webhook relay: escalations are POSTed from the admin queue's table, outside the outbox.

The outbox delivers its events one after another inside a transaction, so nothing slow may
run there. An escalation reaches the webhook in two steps instead (migration 0021): the
outbox's delivery queues the admin queue's row and marks it due for the webhook, which takes
a millisecond; this relay, a task of its own, takes the due rows and sends them. A receiver
that answers slowly delays only the webhook calls behind it, never an event of the outbox.

Delivery is at least once, as before: a row is taken, one at a time, for a lease (long
enough for one send with all the sink's retries), and a relay killed mid-send leaves it to
be taken again when the lease ends; the body's ``key`` lets the receiver drop a repeat. A
send that fails for an infrastructure reason (the receiver unreachable, 5xx or 429 after
the sink's own retries) is due again after 1, 2, 4 ... s (at most ``MAX_WAIT_SECONDS``), and
the relay takes no other row until then: an unreachable receiver costs one send a wait, not
one per waiting row. After ``MAX_ATTEMPTS`` failures, or at once when the receiver refuses
the body (a 4xx, or a redirect, which is not followed), the row is given up:
``webhook.abandoned`` at error level; the escalation stays in the admin queue. The relay's
events name the error's type and the receiver's ``status`` (when it answered), never the URL.

The relay looks for due rows when the dispatcher queued one (:meth:`WebhookRelay.wake`), when
the earliest waiting row falls due, and at least every ``poll_seconds`` (rows queued by
another kernel on the same database). A row that is due but that another session holds
locked (the claim skips it) is looked at again after ``BUSY_SECONDS``, not at once.

A claim is named by its lease's end. A relay whose lease ran out mid-send (a receiver slower
than the lease) may find the row taken by another relay since: its failure is then not
counted (``webhook.lease_lost``) and its release at shutdown hands nothing back, so the other
relay's send is neither undone nor repeated alongside it. A success is recorded whoever holds
the row: the receiver has the body.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from typing import Protocol

import structlog

from engram.errors import InfrastructureError
from engram.infra.db import DatabaseAdapter, Row
from engram.infra.webhook import answered_status as _status
from engram.notifications.dispatcher import SQL, Escalation, NotificationSink

log = structlog.get_logger("engram.notifications.relay")

#: Failed sends of one escalation before it is given up (about eight minutes of failures).
MAX_ATTEMPTS = 10
#: Wait after the first failed send; doubled per failure.
RETRY_SECONDS = 1.0
#: Longest wait between two sends of one escalation.
MAX_WAIT_SECONDS = 300.0
#: Wait before looking again at a row that is due but locked by another session.
BUSY_SECONDS = 1.0


class ClosableSink(NotificationSink, Protocol):
    """A sink holding a resource (a ``WebhookSink``'s HTTP client) until it is closed."""

    async def aclose(self) -> None:
        """Release what the sink holds."""
        ...


class WebhookRelay:
    """Sends the escalations due for the webhook through ``sink`` (a ``WebhookSink``), which
    it closes when it is closed."""

    def __init__(
        self,
        db: DatabaseAdapter,
        sink: ClosableSink,
        *,
        lease_seconds: float = 120.0,
        poll_seconds: float = 30.0,
        retry_seconds: float = RETRY_SECONDS,
        max_wait_seconds: float = MAX_WAIT_SECONDS,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self._db = db
        self._sink = sink
        self._lease = lease_seconds
        self._poll = poll_seconds
        self._retry = retry_seconds
        self._max_wait = max_wait_seconds
        self._max_attempts = max_attempts
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: The row being sent and its claim's lease: handed back when the relay stops mid-send.
        self._held: tuple[int, datetime] | None = None
        #: Set by a round that ended on a failing receiver: the next waits its backoff.
        self._failing = False
        self._closed = False

    def start(self) -> None:
        """Start sending (idempotent); nothing once closed (a readiness check that finds the
        schema current may ask while the kernel closes)."""
        if self._closed:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def wake(self) -> None:
        """A row was queued: look for due rows now."""
        self._woken.set()

    async def close(self) -> None:
        """Stop for good; rows taken and not sent are due again at once, for the next relay."""
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        held, self._held = self._held, None
        if held is not None:
            with contextlib.suppress(Exception):
                await self._db.execute(SQL["webhook_release"], *held)
        await self._sink.aclose()

    async def _run(self) -> None:
        failures = 0
        while True:
            self._woken.clear()
            self._failing = False
            try:
                wait = await self.send_due()
                failures = 0
            except Exception as exc:  # noqa: BLE001 - the database: look again later
                failures += 1
                wait = self._backoff(failures)
                self._failing = True
                log.warning("webhook.relay_failed", error=type(exc).__name__, retry_in=wait)
            if self._failing:  # the receiver or the database: its wait, whatever is queued
                await asyncio.sleep(wait or 0.0)
                continue
            if wait is not None and wait <= 0:  # due, yet the claim skipped it: locked
                wait = BUSY_SECONDS
            timeout = self._poll if wait is None else min(wait, self._poll)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), timeout)

    async def send_due(self) -> float | None:
        """Send what is due now, one row at a time; returns the seconds until the relay should
        look again (None: no row is waiting)."""
        while (row := await self._db.fetchrow(SQL["webhook_claim"], self._lease)) is not None:
            self._held = (row["id"], row["lease"])
            escalation = Escalation(row["kind"], row["record_id"], dict(row["payload"]))
            try:
                await self._sink.deliver(escalation)
            except InfrastructureError as exc:
                attempts = row["webhook_attempts"] + 1
                backoff = await self._failed(row, exc, give_up=attempts >= self._max_attempts)
                if backoff is not None:
                    self._failing = True  # the receiver is failing: no other row until then
                    return backoff
                continue
            except Exception as exc:  # noqa: BLE001 - refused (a 4xx): trying again won't help
                await self._failed(row, exc, give_up=True)
                continue
            await self._db.execute(SQL["webhook_sent"], row["id"])
            self._held = None
        wait: float | None = await self._db.fetchval(SQL["webhook_next"])
        return wait

    async def _failed(self, row: Row, exc: Exception, *, give_up: bool) -> float | None:
        """Count a failed send; returns the wait before the row's next one (None: given up)."""
        attempts: int | None = await self._db.fetchval(
            SQL["webhook_failed"], row["id"], self._retry, self._max_wait, give_up, row["lease"]
        )
        self._held = None
        if attempts is None:  # another relay took the row since (or it was sent): its state
            log.warning(
                "webhook.lease_lost",
                escalation_id=row["id"],
                error=type(exc).__name__,
                status=_status(exc),
            )
            # Still, the receiver failed: wait as this failure would have had this relay wait.
            return None if give_up else self._backoff(row["webhook_attempts"] + 1)
        if give_up:
            log.error(
                "webhook.abandoned",
                escalation_id=row["id"],
                kind=row["kind"],
                attempts=attempts,
                error=type(exc).__name__,
                status=_status(exc),
            )
            return None
        wait = self._backoff(attempts)
        log.warning(
            "webhook.deferred",
            escalation_id=row["id"],
            attempts=attempts,
            error=type(exc).__name__,
            status=_status(exc),
            retry_in=wait,
        )
        return wait

    def _backoff(self, attempts: int) -> float:
        """The wait after a row's ``attempts``-th failed send."""
        return float(min(self._retry * 2 ** (attempts - 1), self._max_wait))
