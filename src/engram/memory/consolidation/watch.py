"""What the consolidation triggers watch (the scheduler asks, ADR-019), and up to when each
access level's event-driven passes looked.

Every count is taken per access level, and a trigger names the levels it found due: a pass
it starts reads those levels only (:meth:`.engine.ConsolidationEngine.run`). A summary never
joins records of two levels, and every reader of a level reads all of it, so whether and
when a caller's records are consolidated depends on records it may read alone; a store-wide
count would let records above a caller's clearance start (or, by taking a shared budget,
hold back) the consolidation of its own (ADR-019's amendment).

- **pressure**: active fast-path records of a level, against ``ENGRAM_FAST_PATH_LIMIT``;
- **event**: a topic that has grown since the last event-driven pass of its level. Writes
  link a new record to its close neighbours with ``relates_to`` edges
  (:mod:`engram.memory.gate.links`); the records of one level written since the pass, joined
  to the records of that level they link to, form groups (connected components, older
  records only connecting), and a group holding at least
  ``ENGRAM_CONSOLIDATION_EVENT_THRESHOLD`` records written since the pass is a topic worth a
  pass. So is a record Layer 2 routed to consolidation (``route_to_consolidation``: repeated,
  or with four related records) since then;
- **backlog** (the readiness check): active fast-path records whose decay score fell below
  the threshold, which consolidation has not yet taken (the operator's view: every level).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID

from engram.infra.db import DatabaseAdapter
from engram.infra.sql import load_queries
from engram.memory.types import AccessLevel

SQL = load_queries("engram.memory.consolidation", "watch.sql")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The newest fresh records of one level one event check reads.
FRESH_LIMIT = 5000

#: Since when an event check counts records: one instant for every level, or one per level
#: (a level left out: since the epoch), or None (since the epoch).
Since = datetime | Mapping[AccessLevel, datetime] | None


@dataclass(frozen=True, slots=True)
class Due:
    """Why a pass should run now, and the access levels it should read (most open first)."""

    reason: str
    levels: tuple[AccessLevel, ...]


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


def ordered(levels: Iterable[AccessLevel | str]) -> tuple[AccessLevel, ...]:
    """``levels`` (names or members) without repeats, most open first."""
    chosen = {AccessLevel(level) for level in levels}
    return tuple(level for level in AccessLevel if level in chosen)


class ConsolidationWatch:
    """The counts behind the event and pressure triggers and the backlog check."""

    def __init__(
        self,
        db: DatabaseAdapter,
        *,
        event_threshold: int,
        fast_path_limit: int,
        decay_threshold: float,
        event_horizon: timedelta | None = None,
    ) -> None:
        self._db = db
        #: How far back an event check looks at most, whatever a level's mark: older records
        #: are the scheduled passes' (a level never due would otherwise have every record
        #: read again on each check).
        self.event_horizon = event_horizon
        self.event_threshold = event_threshold
        self.fast_path_limit = fast_path_limit
        self.decay_threshold = decay_threshold

    async def fast_path(self) -> dict[AccessLevel, int]:
        """Active fast-path records now, per access level (levels holding none left out)."""
        rows = await self._db.fetch(SQL["fast_path_count"])
        return {AccessLevel(row["access_level"]): int(row["n"]) for row in rows}

    async def pressure(self) -> str | None:
        """Why a pressure-driven pass should run now, or None."""
        due = self.pressure_of(await self.fast_path())
        return None if due is None else due.reason

    def pressure_of(self, fast: Mapping[AccessLevel, int]) -> Due | None:
        """The levels whose ``fast`` count of active fast-path records is over the limit."""
        over = ordered(level for level, n in fast.items() if n > self.fast_path_limit)
        if not over:
            return None
        counts = ", ".join(f"{fast[level]} at {level.value}" for level in over)
        return Due(
            f"active fast-path records over the limit of {self.fast_path_limit} per access "
            f"level: {counts}",
            over,
        )

    async def backlog(self) -> int:
        """Active fast-path records decayed below the threshold (every level)."""
        return int(await self._db.fetchval(SQL["backlog"], self.decay_threshold) or 0)

    async def event(self, since: Since) -> str | None:
        """Why an event-driven pass should run now (records since ``since``), or None."""
        due = await self.event_due(since)
        return None if due is None else due.reason

    async def event_due(
        self, since: Since, levels: Iterable[AccessLevel] | None = None
    ) -> Due | None:
        """The levels among ``levels`` (None: every level) where a topic grew, or Layer 2
        routed a record to consolidation, since ``since`` (see :data:`Since`); None when
        there is none."""
        chosen = list(AccessLevel) if levels is None else list(ordered(levels))
        marks = [_since_for(since, level) for level in chosen]
        if self.event_horizon is not None:
            earliest = datetime.now(UTC) - self.event_horizon
            marks = [max(mark, earliest) for mark in marks]
        names = [level.value for level in chosen]
        rows = await self._db.fetch(SQL["fresh_relations"], names, marks, FRESH_LIMIT)
        pairs: dict[AccessLevel, list[tuple[UUID, UUID]]] = defaultdict(list)
        for row in rows:
            pairs[AccessLevel(row["access_level"])].append((row["a"], row["b"]))
        groups = {
            level: largest_group(found, {a for a, _ in found}) for level, found in pairs.items()
        }
        grown = ordered(level for level, size in groups.items() if size >= self.event_threshold)
        # read whatever grew: a level's routed records are due even when another level's
        # topic grew (a closed level's growth would otherwise keep an open level waiting)
        routed_rows = await self._db.fetch(SQL["routed_since"], names, marks)
        routed = {AccessLevel(row["access_level"]): int(row["n"]) for row in routed_rows}
        if grown:
            size = max(groups[level] for level in grown)
            return Due(
                f"a topic of {size} related records grew since the last pass",
                ordered([*grown, *routed]),
            )
        if routed:
            total = sum(routed.values())
            return Due(
                f"Layer 2 routed {total} records to consolidation since the last pass",
                ordered(routed),
            )
        return None

    async def horizon(self) -> datetime:
        """How far a mark may move for a pass that reads after this call: the database's now,
        or the start of the oldest transaction still open if earlier. A record's ingestion
        time is its transaction's start, and it shows only at commit: a write that began
        before a pass's due time and commits after the pass read would otherwise be left
        behind a mark, never counted by the event trigger."""
        value: datetime = await self._db.fetchval(SQL["horizon"])
        return value

    async def event_marks(self, fallback: datetime | None) -> dict[AccessLevel, datetime]:
        """Up to when each level's event-driven passes looked: its mark, or ``fallback`` (the
        job's cursor, which every level shared before marks were kept), or the epoch."""
        rows = await self._db.fetch(SQL["event_marks"])
        marks = {AccessLevel(row["access_level"]): row["passed_at"] for row in rows}
        return {level: marks.get(level, fallback or _EPOCH) for level in AccessLevel}

    async def set_event_marks(self, marks: Mapping[AccessLevel, datetime]) -> None:
        """Keep ``marks`` (a mark never moves back). Every level's mark is kept once an
        event-driven pass ran, so none falls back to the job's cursor, which any level's
        pass moves."""
        levels = ordered(marks)
        if levels:
            names = [level.value for level in levels]
            await self._db.execute(SQL["set_event_marks"], names, [marks[x] for x in levels])


def _since_for(since: Since, level: AccessLevel) -> datetime:
    if since is None:
        return _EPOCH
    if isinstance(since, datetime):
        return since
    return since.get(level, _EPOCH)
