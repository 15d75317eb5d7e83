"""The knowledge-graph port (typed edges between record versions).

Phase 1 keeps edges in the ``memory_edges`` table and writes them inside the Gate's
transaction; this Protocol is the seam for a dedicated graph store later.
"""

from __future__ import annotations

from typing import Any, Protocol
from uuid import UUID

from engram.infra.db import Connection


class GraphAdapter(Protocol):
    """Creates and reads typed edges between record versions."""

    async def add_edge(
        self,
        conn: Connection,
        *,
        source: UUID,
        target: UUID,
        kind: str,
        weight: float = 1.0,
        provenance: dict[str, Any] | None = None,
    ) -> None:
        """Record an edge inside the caller's transaction."""
        ...

    async def neighbours(
        self, conn: Connection, node: UUID, *, kind: str | None = None
    ) -> list[UUID]:
        """Versions linked from ``node`` (optionally by one kind of edge)."""
        ...
