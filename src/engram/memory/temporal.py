"""Reads of records over time: current versions and version chains.

Read-only by construction (it never calls a writing statement); retrieval and protocol
adapters read through it. Bi-temporal as-of queries and decay build on this module.
"""

from __future__ import annotations

from uuid import UUID

from engram.infra.db import DatabaseAdapter
from engram.memory import store
from engram.memory.types import MemoryRecord


class TemporalEngine:
    """Version lookups for one kernel."""

    def __init__(self, db: DatabaseAdapter) -> None:
        self._db = db

    async def current(self, record_id: UUID) -> MemoryRecord | None:
        """The newest version of a record (forgotten ones included: check ``status``)."""
        return await store.head(self._db, record_id)

    async def get_version_chain(self, record_id: UUID) -> list[MemoryRecord]:
        """Every version of a record, oldest first."""
        return await store.version_chain(self._db, record_id)
