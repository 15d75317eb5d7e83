"""Writers of one content wait for each other; others do not (engram.memory.gate.serial)."""

from __future__ import annotations

import asyncio

import pytest

from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.requests import GateRequest
from engram.memory.gate.serial import SameContent, content_key
from engram.memory.types import GateAction, GateDecisionType, MemoryRecord, MemoryType, TrustLevel

KEY = ("default", "belief", b"\x01" * 32)
OTHER = ("default", "belief", b"\x02" * 32)


async def test_writers_of_one_content_take_turns_and_others_do_not_wait() -> None:
    """The second holder of a key enters only after the first leaves; another key enters at
    once; nothing is kept once every holder has left."""
    locks, order = SameContent(), []
    first_in, release = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with locks.hold(KEY):
            order.append("first in")
            first_in.set()
            await release.wait()
            order.append("first out")

    async def second() -> None:
        await first_in.wait()
        async with locks.hold(KEY):
            order.append("second in")

    async def other() -> None:
        await first_in.wait()
        async with locks.hold(OTHER):
            order.append("other in")
        release.set()

    await asyncio.gather(first(), second(), other())
    assert ["first in", "other in", "first out", "second in"] == order
    assert 0 == len(locks)


async def test_a_cancelled_waiter_and_a_failing_holder_leave_nothing_held() -> None:
    """A holder that raises and a waiter cancelled while waiting both give the key back."""
    locks = SameContent()
    holding = asyncio.Event()

    async def holder() -> None:
        async with locks.hold(KEY):
            holding.set()
            await asyncio.sleep(0.05)
            raise RuntimeError("the write failed")

    async def waiter() -> None:
        async with locks.hold(KEY):
            pass  # pragma: no cover - cancelled before it enters

    task = asyncio.create_task(holder())
    await holding.wait()
    waiting = asyncio.create_task(waiter())
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(RuntimeError):
        await task
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert 0 == len(locks)
    async with locks.hold(None):  # no key, no lock
        assert 0 == len(locks)


def test_a_content_that_cannot_be_encoded_takes_no_lock() -> None:
    """A lone surrogate cannot be hashed: the request takes no lock and Layer 1 refuses it
    (the key was computed before Layer 1 and raised, a 500 in CI's odd-input tests)."""
    caller = caller_for_tier("a", TrustLevel.STANDARD)
    record = MemoryRecord.draft(MemoryType.BELIEF, "bad \ud800 text", source_agent="a")
    request = GateRequest(GateAction.CREATE, record, caller, GateDecisionType.EXTERNAL)
    assert content_key(request) is None
    fine = record.model_copy(update={"content": "fine text"})
    key = content_key(GateRequest(GateAction.CREATE, fine, caller, GateDecisionType.EXTERNAL))
    assert key is not None
