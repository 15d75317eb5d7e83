"""What the consolidation triggers watch (reads only; the scheduler asks, ADR-019).

- **pressure**: active fast-path records, against ``ENGRAM_FAST_PATH_LIMIT``;
- **event**: a topic that has grown since the last event-driven pass. Writes link a new record
  to its close neighbours with ``relates_to`` edges (:mod:`engram.memory.gate.links`); the
  records written since the pass, joined to the records they link to, form groups (connected
  components, older records only connecting), and a group holding at least
  ``ENGRAM_CONSOLIDATION_EVENT_THRESHOLD`` records written since the pass is a topic worth a
  pass. So is a record Layer 2 routed to consolidation
  (``route_to_consolidation``: repeated, or with four related records) since then;
- **backlog** (the readiness check): active fast-path records whose decay score fell below
  the threshold, which consolidation has not yet taken.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from uuid import UUID

from engram.infra.db import DatabaseAdapter
from engram.infra.sql import load_queries

SQL = load_queries("engram.memory.consolidation", "watch.sql")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The newest fresh records one event check reads.
FRESH_LIMIT = 5000


def largest_group(pairs: list[tuple[UUID, UUID]], counted: set[UUID] | None = None) -> int:
    """The size of the largest connected component of the graph whose edges are ``pairs``,
    counting only the nodes in ``counted`` (every node when None)."""
    parent: dict[UUID, UUID] = {}

    def find(node: UUID) -> UUID:
        parent.setdefault(node, node)
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for a, b in pairs:
        root_a, root_b = find(a), find(b)
        if root_a != root_b:
            parent[root_a] = root_b
    sizes = Counter(find(node) for node in list(parent) if counted is None or node in counted)
    return max(sizes.values(), default=0)


class ConsolidationWatch:
    """The counts behind the event and pressure triggers and the backlog check."""

    def __init__(
        self,
        db: DatabaseAdapter,
        *,
        event_threshold: int,
        fast_path_limit: int,
        decay_threshold: float,
    ) -> None:
        self._db = db
        self.event_threshold = event_threshold
        self.fast_path_limit = fast_path_limit
        self.decay_threshold = decay_threshold

    async def fast_path(self) -> int:
        """Active fast-path records now."""
        return int(await self._db.fetchval(SQL["fast_path_count"]) or 0)

    async def pressure(self) -> str | None:
        """Why a pressure-driven pass should run now, or None."""
        return self.pressure_of(await self.fast_path())

    def pressure_of(self, fast: int) -> str | None:
        """Why ``fast`` active fast-path records call for a pressure-driven pass, or None."""
        if fast > self.fast_path_limit:
            return f"{fast} active fast-path records, limit {self.fast_path_limit}"
        return None

    async def backlog(self) -> int:
        """Active fast-path records decayed below the threshold."""
        return int(await self._db.fetchval(SQL["backlog"], self.decay_threshold) or 0)

    async def event(self, since: datetime | None) -> str | None:
        """Why an event-driven pass should run now (records since ``since``), or None."""
        since = since or _EPOCH
        rows = await self._db.fetch(SQL["fresh_relations"], since, FRESH_LIMIT)
        # Older records connect the new ones into a topic; only the new ones are counted.
        fresh = {row["a"] for row in rows}
        group = largest_group([(row["a"], row["b"]) for row in rows], fresh)
        if group >= self.event_threshold:
            return f"a topic of {group} related records grew since the last pass"
        routed = int(await self._db.fetchval(SQL["routed_since"], since) or 0)
        if routed:
            return f"Layer 2 routed {routed} records to consolidation since the last pass"
        return None
