"""Hostile pass N: probes that hold. Real embedded PostgreSQL and the real embedding model,
no mocks."""

from __future__ import annotations

from typing import Any

import pytest

from engram import Kernel
from engram.memory.types import AccessLevel, CallerIdentity
from tests.integration.consolidation_helpers import engine_with
from tests.integration.gate_helpers import BOSS, INTERN, WRITER
from tests.integration.pass_n_helpers import checks, jobs_over, reads
from tests.integration.test_triggers import TOPIC, UNRELATED, episode, write
from tests.integration.twin_helpers import Store, differences, twin_a, twin_b

__all__ = ["twin_a", "twin_b"]
pytestmark = pytest.mark.usefixtures("schedulers")


async def _pressure_and_events(
    kernel: Kernel, *, hidden: tuple[AccessLevel, ...], reader: CallerIdentity
) -> list[Any]:
    """Fast-path limit three, event threshold three: the writer's three related episodes
    and one unrelated; in store B the trusted agent's topics at the user, system and
    sensitive levels, each over the limit too. The event and pressure jobs run over four
    checks; the restricted reader (agent level) and the writer then read."""
    mine = [
        await write(kernel, episode(t, n, caller=WRITER), WRITER) for n, t in enumerate(TOPIC[:3])
    ]
    mine.append(await write(kernel, episode(UNRELATED[0], 9, caller=WRITER), WRITER))
    if hidden:
        for level in hidden:
            for n, text in enumerate(TOPIC + UNRELATED[1:]):
                copy = f"{text} Noted at {level.value} level."
                await write(kernel, episode(copy, 30 + n, access_level=level), BOSS)
    await kernel.events.settled()
    engine = engine_with(kernel, event_threshold=3, fast_path_limit=3)
    names = ("consolidation_event", "consolidation_pressure")
    await checks(kernel, jobs_over(kernel, engine, *names), 4)
    return await reads(kernel, reader, mine if reader is WRITER else [], "orders_daily ETL late")


@pytest.mark.parametrize(
    ("hidden", "reader"),
    [
        ((AccessLevel.SYSTEM, AccessLevel.SENSITIVE), WRITER),
        ((AccessLevel.USER, AccessLevel.SYSTEM, AccessLevel.SENSITIVE), INTERN),
    ],
    ids=["writer", "intern"],
)
async def test_event_and_pressure_jobs_over_several_checks_answer_alike(
    twin_a: Store, twin_b: Store, hidden: tuple[AccessLevel, ...], reader: CallerIdentity
) -> None:
    """Driven by the scheduler over four checks, the event and pressure jobs consolidate the
    writer's records the same way whether or not the levels above the reader's clearance
    are due at the same checks; the reader (the writer itself, or a restricted agent)
    reads the same."""
    a = await _pressure_and_events(twin_a.kernel, hidden=(), reader=reader)
    b = await _pressure_and_events(twin_b.kernel, hidden=hidden, reader=reader)
    if reader is WRITER:
        assert ["consolidated"] * 3 == [status for status, _ in a[:3]]
    assert [] == differences([a], [b])
