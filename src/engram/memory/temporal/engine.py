"""Reads of records over time: bi-temporal as-of queries, version chains and decay.

Two clocks (ADR-003): *ingestion time* T, when the kernel learned a version, and *event time*
E, when it became true in the world. ``query(as_of_ingestion=T)`` answers what the kernel
believed at T; ``query(as_of_event=E)`` what was true at E as currently known; both together,
what the kernel believed at T about E. The version answering (T, E) is the newest version
known at T whose event time is at or before E (and whose validity had not ended by E), so a
correction of the past (a newer version with an earlier event time) wins wherever it applies.
Without E the event axis is not looked at: a read answers what the kernel believes, ended or
future validity alike; ``as_of_event=now`` asks what is true now. Record reads and listings
(now, as of T, as of E) follow this one rule: a listing is the record reads of its namespace.
Forgotten and consolidated records are left out unless asked for, and callers see only records
at or below their read level; within a record, only the versions they may read, numbered and
dated as :mod:`engram.memory.temporal.numbering` says.
Every read is counted for decay (written off the read path, :mod:`engram.memory.temporal.reads`),
an older version's at the higher of its level and its head's, read with it (ADR-009).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Container, Sequence
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

import structlog

from engram.errors import EngramError
from engram.infra.db import Connection, DatabaseAdapter, Row
from engram.infra.sql import load_queries
from engram.memory import store
from engram.memory.temporal.decay import relevance
from engram.memory.temporal.numbering import as_seen, chain_of, in_readers_view, sees_everything
from engram.memory.temporal.reads import ReadRecorder
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    readable_levels,
    utc_now,
)

if TYPE_CHECKING:
    from engram.observability.metrics import EngramMetrics

log = structlog.get_logger("engram.memory.temporal")
SQL = load_queries("engram.memory.temporal", "temporal.sql", shared=store.FRAGMENTS)
_NIL = UUID(int=0)
DEFAULT_LIMIT = 50
#: Heads' levels read with the older versions an as-of read returned, kept (by version id)
#: until the read is noted: a search notes its hits after resolving them. Bounded; one that
#: fell out is looked up again (``head_levels``).
HEADS_KEPT = 4096


def _distinct(types: Sequence[MemoryType] | None) -> list[MemoryType]:
    """``types`` each once, in the order given: a listing reads each type's records once, so
    a type named twice must not return (and count as read) its records twice."""
    return list(dict.fromkeys(types or ()))


def _ending_statuses(*, include_forgotten: bool, include_consolidated: bool) -> list[str]:
    ending = []
    if not include_forgotten:
        ending.append(MemoryStatus.FORGOTTEN.value)
    if not include_consolidated:
        ending.append(MemoryStatus.CONSOLIDATED.value)
    return ending


class TemporalEngine:
    """Bi-temporal reads of one kernel."""

    def __init__(
        self,
        db: DatabaseAdapter,
        *,
        reads: ReadRecorder | None = None,
        metrics: EngramMetrics | None = None,
    ) -> None:
        self._db = db
        self._reads = reads
        self._metrics = metrics
        self._heads_read: OrderedDict[UUID, AccessLevel] = OrderedDict()

    async def query(
        self,
        *,
        record_id: UUID | None = None,
        as_of_event: datetime | None = None,
        as_of_ingestion: datetime | None = None,
        include_superseded: bool = False,
        include_forgotten: bool = False,
        include_consolidated: bool = False,
        caller: CallerIdentity | None = None,
        types: Sequence[MemoryType] | None = None,
        namespace: str = "default",
        limit: int = DEFAULT_LIMIT,
        count_read: bool = True,
    ) -> list[MemoryRecord]:
        """Records (one version each, or every version with ``include_superseded``) as of
        the given instants; without ``record_id``, a listing of one namespace, newest first.
        ``count_read=False`` leaves the read out of the access statistics (internal lookups)."""
        at = as_of_ingestion or utc_now()
        ending = _ending_statuses(
            include_forgotten=include_forgotten, include_consolidated=include_consolidated
        )
        levels = readable_levels(caller)
        if record_id is not None:
            name = "as_of_history" if include_superseded else "as_of_record"
            rows = await self._db.fetch(SQL[name], record_id, at, as_of_event, ending, levels)
        else:
            rows = []
            for memory_type in _distinct(types) or list(MemoryType):
                if as_of_ingestion is None and as_of_event is None:
                    rows += await self._current(namespace, ending, levels, memory_type, limit)
                else:
                    name = "as_of_listing" if as_of_event is None else "as_of_event_listing"
                    rows += await self._db.fetch(
                        SQL[name],
                        namespace,
                        at,
                        as_of_event,
                        ending,
                        levels,
                        memory_type.value,
                        limit,
                    )
            # One query per type (each an ordered index scan); merge newest change first.
            rows.sort(key=lambda row: row["ingestion_time"], reverse=True)
            rows = rows[:limit]
        self._keep_heads(rows)
        records = await as_readable(self._db, [store.record_from_row(row) for row in rows], levels)
        if count_read:
            await self.note_reads(records)
        return records

    def _keep_heads(self, rows: Sequence[Row]) -> None:
        """Remember the head's level each older version was read with (``head_level``)."""
        for row in rows:
            if row["superseded_by"] is not None and (level := row.get("head_level")):
                self._heads_read[row["id"]] = AccessLevel(level)
        while len(self._heads_read) > HEADS_KEPT:
            self._heads_read.popitem(last=False)

    async def page(
        self,
        *,
        caller: CallerIdentity,
        namespace: str = "default",
        types: Sequence[MemoryType] | None = None,
        tags: Sequence[str] | None = None,
        after: tuple[datetime, UUID] | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> list[MemoryRecord]:
        """A page of the current records ``caller`` may read, newest change first (by
        ingestion time, then id): at most ``limit``, those carrying every one of ``tags``,
        after the (ingestion time, id) ``after`` of the previous page's last record. Forgotten
        and consolidated records are left out; a page is not counted as a read of its
        records (browsing is not use, and decay counts use)."""
        ending = _ending_statuses(include_forgotten=False, include_consolidated=False)
        levels = readable_levels(caller)
        since, last_id = after if after is not None else (None, None)
        wanted = None if tags is None else list(tags)
        rows: list[Row] = []
        for memory_type in list(MemoryType) if types is None else _distinct(types):
            rows += await self._current(
                namespace, ending, levels, memory_type, limit, tags=wanted, after=(since, last_id)
            )
        rows.sort(key=lambda row: (row["ingestion_time"], row["id"]), reverse=True)
        records = [store.record_from_row(row) for row in rows[:limit]]
        return await as_readable(self._db, records, levels)

    async def _current(
        self,
        namespace: str,
        ending: Sequence[str],
        levels: Sequence[str],
        memory_type: MemoryType,
        limit: int,
        *,
        tags: list[str] | None = None,
        after: tuple[datetime | None, UUID | None] = (None, None),
    ) -> list[Row]:
        """The current heads of one type, newest change first (one ordered index scan)."""
        since, last_id = after
        return await self._db.fetch(
            SQL["current_listing"],
            namespace,
            ending,
            levels,
            memory_type.value,
            limit,
            tags,
            since,
            last_id,
        )

    async def current(
        self, record_id: UUID, *, caller: CallerIdentity | None = None, count_read: bool = True
    ) -> MemoryRecord | None:
        """The newest version of a record, forgotten ones included (check ``status``)."""
        found = await self.query(
            record_id=record_id,
            include_forgotten=True,
            include_consolidated=True,
            caller=caller,
            count_read=count_read,
        )
        return found[0] if found else None

    async def get_version_chain(
        self, record_id: UUID, *, caller: CallerIdentity | None = None
    ) -> list[MemoryRecord]:
        """Every version of a record the caller may read, oldest first (history of forgotten
        records included), in its numbering (:mod:`~engram.memory.temporal.numbering`).
        ``record_id`` may also be the id of one of its versions (what ``evidence_links`` of a
        consolidated record cite), so a reader can walk from a summary to its sources."""
        levels = set(readable_levels(caller))
        chain = await store.version_chain(self._db, record_id)
        if not chain:
            version = await store.version_by_id(self._db, record_id)
            if version is not None and version.access_level.value not in levels:
                return []  # a version the caller may not read names nothing for it
            if version is not None:
                chain = await store.version_chain(self._db, version.record_id)
        if chain and chain[-1].access_level.value not in levels:
            return []
        visible = [version for version in chain if version.access_level.value in levels]
        if len(visible) < len(chain):
            # The reader's numbers, and superseded_by and known-until past the versions left out.
            stored = chain_of(chain, levels)
            visible = [as_seen(version, stored) for version in visible]
        visible = await hide_unreadable_evidence(self._db, visible, list(levels))
        self._note(visible[-1:])
        return visible

    async def versions(
        self, version_ids: Sequence[UUID], *, caller: CallerIdentity | None = None
    ) -> dict[UUID, MemoryRecord]:
        """The given versions by id, those the caller may not read (or whose record's head it
        may not read) left out, ``superseded_by`` pointing past hidden versions (no read
        counted)."""
        if not version_ids:
            return {}
        levels = readable_levels(caller)
        rows = await self._db.fetch(SQL["versions_by_ids"], list(version_ids), levels)
        records = await as_readable(self._db, [store.record_from_row(r) for r in rows], levels)
        return {record.id: record for record in records}

    async def note_reads(self, records: Sequence[MemoryRecord]) -> None:
        """Count one read of each record for decay (written off the read path). The heads'
        levels of older versions come with the as-of read's rows; versions read otherwise (a
        feedback's, one whose level fell out of the memo) look them up, one statement.

        A read counts for the readers who could have made it: those cleared for the version
        read and for its record's head then (an older version is read only by a reader of
        the head, ADR-009). A version's read counts at the higher of its level and its head's
        at the time of the read; when the heads cannot be looked up, at ``sensitive``."""
        if self._reads is None or not records:
            return
        older = [record for record in records if record.superseded_by is not None]
        # the head's level read with the version, in the read's own snapshot; else now
        heads = {r.record_id: h for r in older if (h := self._heads_read.pop(r.id, None))}
        unknown = [r.record_id for r in older if r.record_id not in heads]
        if unknown:
            try:
                rows = await self._db.fetch(SQL["head_levels"], unknown)
            except EngramError as exc:
                log.warning("temporal.head_levels_failed", error=type(exc).__name__)
            else:
                heads |= {row["record_id"]: AccessLevel(row["access_level"]) for row in rows}
        self._reads.note(
            (record.record_id, _higher(record.access_level, heads.get(record.record_id)))
            if record.superseded_by is not None
            else (record.record_id, record.access_level)
            for record in records
        )

    async def compute_decay(self, record_id: UUID, *, now: datetime | None = None) -> float:
        """The current relevance of a record (see :mod:`engram.memory.temporal.decay`)."""
        row = await self._db.fetchrow(SQL["decay_inputs"], record_id)
        if row is None:
            raise LookupError(f"no record {record_id}")
        memory_type = MemoryType(row["type"])
        score = _decay(row, now or utc_now())
        if self._metrics is not None:
            self._metrics.decay_score.labels(type=memory_type.value).observe(score)
        return score

    async def refresh_decay(
        self, *, now: datetime | None = None, after: UUID | None = None, limit: int = 1000
    ) -> tuple[int, int, UUID | None]:
        """Recompute ``decay_score`` of up to ``limit`` live heads after record ``after`` (in
        record-id order) and store the ones that moved; each score is observed in
        ``engram_decay_score``. Returns (read, written, the last record id or None at the end)."""
        now = now or utc_now()
        rows = await self._db.fetch(SQL["decay_page"], after or _NIL, limit)
        ids: list[UUID] = []
        scores: list[float] = []
        levels: list[str] = []
        for row in rows:
            memory_type = MemoryType(row["type"])
            score = _decay(row, now)
            if self._metrics is not None:
                self._metrics.decay_score.labels(type=memory_type.value).observe(score)
            ids.append(row["id"])
            scores.append(score)
            levels.append(row["access_level"])
        written = 0
        if ids:
            status = await self._db.execute(SQL["store_decay"], ids, scores, levels)
            written = int(status.split()[-1])
        last_id = rows[-1]["record_id"] if len(rows) == limit else None
        return len(rows), written, last_id

    async def flush_reads(self) -> None:
        """Persist the read counts gathered so far (they are also flushed every second)."""
        if self._reads is not None:
            await self._reads.flush()

    def _note(self, records: Sequence[MemoryRecord]) -> None:
        if self._reads is not None and records:
            self._reads.note((record.record_id, record.access_level) for record in records)


async def restate_decay(
    conn: Connection, record_id: UUID, *, now: datetime | None = None
) -> float | None:
    """Store and return the decay score of ``record_id``'s head as its readers' count gives
    it, inside the caller's transaction: for a head whose level changed in place (a
    quarantine release), whose stored score came from the reads of its former level's
    readers (ADR-009). None when the record has no head."""
    row = await conn.fetchrow(SQL["decay_inputs"], record_id)
    if row is None:
        return None
    score = _decay(row, now or utc_now())
    await conn.execute(SQL["store_head_decay"], record_id, score)
    return score


def _higher(level: AccessLevel, head: AccessLevel | None) -> AccessLevel:
    """The level a read of a version at ``level`` counts at, its head being at ``head``
    (unknown: ``sensitive``, counted for no reader who might not have made it)."""
    if head is None:
        return AccessLevel.SENSITIVE
    return head if head.rank > level.rank else level


def _decay(row: Row, now: datetime) -> float:
    """The relevance of the head described by a ``decay_inputs`` / ``decay_page`` row."""
    last = row["last_accessed_at"] or row["head_ingested"]
    return relevance(
        MemoryType(row["type"]),
        importance=float(row["importance"]),
        reinforcements=float(row["reinforcements"] or 0.0),
        days_since_access=(now - last).total_seconds() / 86_400,
        age_days=(now - row["first_ingested"]).total_seconds() / 86_400,
    )


async def as_readable(
    db: DatabaseAdapter, records: list[MemoryRecord], levels: Sequence[str]
) -> list[MemoryRecord]:
    """``records`` as a reader of ``levels`` sees them: in its numbering, with
    ``superseded_by`` and known-until running to the next version it may read
    (:mod:`~engram.memory.temporal.numbering`), and ``evidence_links`` naming nothing it may
    not read (a reader of every level has nothing hidden)."""
    if sees_everything(levels):
        return records
    records = await in_readers_view(db, records, levels)
    return await hide_unreadable_evidence(db, records, levels)


async def hide_unreadable_evidence(
    db: DatabaseAdapter, records: list[MemoryRecord], levels: Sequence[str]
) -> list[MemoryRecord]:
    """Leave out what names a record the reader may not read. A citation is checked against
    the citing record's level when it is written (ADR-008), but the cited record may be raised
    later (a trusted agent's UPDATE, a PII rescan): its id goes from ``evidence_links``, as
    the record is absent for the readers it is hidden from. A finding the rescan passed on
    from it (``metadata.pii`` with ``propagated_from``, kept when an admin releases the
    derived record) loses that id and the kinds found in the hidden record."""
    if len(levels) == len(AccessLevel):
        return records
    refs = {ref for record in records for ref in record.evidence_links}
    refs.update(source for record in records if (source := _inherited_from(record)))
    if not refs:
        return records
    readable = await store.resolve_evidence(db, sorted(refs), levels=levels)
    return [_without_unreadable(record, readable) for record in records]


def _inherited_from(record: MemoryRecord) -> UUID | None:
    """The record a PII finding in ``record``'s metadata was passed on from, if any."""
    finding = record.metadata.get("pii")
    source = finding.get("propagated_from") if isinstance(finding, dict) else None
    try:
        return UUID(source) if isinstance(source, str) else None
    except ValueError:
        return None


def _without_unreadable(record: MemoryRecord, readable: Container[UUID]) -> MemoryRecord:
    update: dict[str, object] = {}
    if not all(ref in readable for ref in record.evidence_links):
        update["evidence_links"] = tuple(r for r in record.evidence_links if r in readable)
    source = _inherited_from(record)
    if source is not None and source not in readable:
        finding = {
            key: value
            for key, value in record.metadata["pii"].items()
            if key not in {"propagated_from", "kinds"}
        }
        update["metadata"] = {**record.metadata, "pii": finding}
    return record.model_copy(update=update) if update else record


__all__ = [
    "DEFAULT_LIMIT",
    "TemporalEngine",
    "as_readable",
    "hide_unreadable_evidence",
]
