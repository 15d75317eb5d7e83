"""Writers of one content wait for each other; others do not (engram.memory.gate.serial)."""

from __future__ import annotations

import asyncio

import pytest

from engram.memory.gate.serial import SameContent

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
