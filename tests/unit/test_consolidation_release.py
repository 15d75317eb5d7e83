"""How a release that could not finish reaches the outbox: contention is redelivered, a
refusal is not."""

from __future__ import annotations

import uuid
from typing import Any, cast

import pytest

from engram.errors import ConsolidationConflict, InfrastructureError
from engram.infra.events import Event
from engram.memory.consolidation.reversal import BatchDesk, StillMoving


class _Desk(BatchDesk):
    def __init__(self, error: Exception) -> None:
        super().__init__(cast(Any, None), cast(Any, None))
        self.error = error
        self.asked: list[uuid.UUID] = []

    async def release(
        self, record_id: uuid.UUID, *, changed_in: int | None = None, by_agent: bool = False
    ) -> list[uuid.UUID]:
        del changed_in
        assert by_agent  # an agent's forget or change starts these releases
        self.asked.append(record_id)
        raise self.error


def _forgotten(record_id: uuid.UUID) -> Event:
    payload = {"record_id": str(record_id), "decision_type": "agent_write"}
    return Event("memory.forgotten", record_id, payload)


async def test_summaries_that_kept_moving_make_the_outbox_deliver_the_event_again() -> None:
    """A release that lost every attempt to moving summaries raises an infrastructure error,
    the kind the outbox delivers again later; it was a business error, and the event was dropped."""
    record_id = uuid.uuid4()
    desk = _Desk(StillMoving("kept moving"))
    with pytest.raises(InfrastructureError, match="kept moving"):  # the outbox retries these
        await desk.on_source_changed(_forgotten(record_id))
    assert desk.asked == [record_id]


async def test_a_release_the_gate_refused_is_not_delivered_again() -> None:
    """A refusal is an answer, not contention: it is not turned into a retryable error."""
    desk = _Desk(ConsolidationConflict("the Gate refused the release"))
    with pytest.raises(ConsolidationConflict) as raised:
        await desk.on_source_changed(_forgotten(uuid.uuid4()))
    assert not isinstance(raised.value, InfrastructureError)


async def test_consolidations_own_status_changes_release_nothing() -> None:
    """Consolidation's own status changes are not changes of content: release is not asked."""
    desk = _Desk(StillMoving("never asked"))
    event = _forgotten(uuid.uuid4())
    event.payload["decision_type"] = "consolidation"
    await desk.on_source_changed(event)
    assert desk.asked == []
