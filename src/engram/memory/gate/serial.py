"""Writers of the same content, one at a time.

The Gate looks for an exact duplicate (same namespace, type and normalised content) before it
writes, outside the write's transaction. Two writers of one content at once would each find
none and each store a record; one after the other, the second is a NOOP that reinforces the
first. :class:`SameContent` makes them one after the other within a kernel process: a CREATE
holds the lock of its content's key from its duplicate look-up to its commit. Writers of
different content never wait for each other. Kernels in several processes on one database
are not serialised by it (ADR-008).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from engram.memory.fingerprint import content_hash
from engram.memory.gate.requests import GateRequest
from engram.memory.types import GateAction, GateDecisionType

Key = tuple[str, str, bytes]


def content_key(request: GateRequest) -> Key | None:
    """A CREATE's duplicate key (what its exact-duplicate look-up asks); None for anything
    else, and for consolidation, whose writes look for no duplicate."""
    record = request.record
    if request.action is not GateAction.CREATE or (
        request.decision_type is GateDecisionType.CONSOLIDATION
    ):
        return None
    try:
        return (record.namespace, record.type.value, content_hash(record.content))
    except UnicodeEncodeError:
        return None  # a lone surrogate: Layer 1 refuses it, and nothing is written to wait for


class SameContent:
    """One lock per content key, kept only while someone holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[Key, tuple[asyncio.Lock, int]] = {}

    def __len__(self) -> int:
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, key: Key | None) -> AsyncIterator[None]:
        """Wait for the writers of ``key`` before this one; release on exit (or cancel). No
        key, no wait."""
        if key is None:
            yield
            return
        lock, users = self._locks.get(key) or (asyncio.Lock(), 0)
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
