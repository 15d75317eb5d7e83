"""The event port: events are written to the outbox inside the change's transaction and
delivered to subscribers after commit, so no acknowledged change loses its event."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from engram.infra.db import Connection


@dataclass(frozen=True, slots=True)
class Event:
    """One domain event, e.g. ``memory.created``."""

    name: str
    aggregate_id: UUID
    payload: dict[str, Any]


#: Called with each delivered event; what it returns is ignored.
Subscriber = Callable[[Event], Awaitable[object]]


class EventBus(Protocol):
    """Transactional outbox plus in-process delivery.

    An event is a row of the schema's ``outbox`` table (``event_type``, ``aggregate_id``,
    ``payload``, ``decision_id``) written in the change's own transaction; the Gate's
    one-statement write inserts that row itself (``engram/memory/gate/write.sql``).
    """

    async def publish(self, conn: Connection, event: Event) -> None:
        """Write the event to the outbox within the caller's open transaction."""
        ...

    def subscribe(self, name: str, subscriber: Subscriber) -> None:
        """Call ``subscriber`` for each delivered event of that name (``*`` for all)."""
        ...

    def committed(self) -> None:
        """Tell the bus a transaction that published events has committed (deliver them)."""
        ...

    def announcing_channel(self, names: Sequence[str]) -> str | None:
        """The NOTIFY channel on which a change may announce its events named ``names`` in
        its own transaction, writing their outbox rows delivered, when no subscriber of this
        process waits for any of them: nothing is then left to deliver after the commit.
        None when one does (the events go through the outbox's delivery)."""
        ...
