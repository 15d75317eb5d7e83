"""A record's history as a caller may read it (ADR-009, amended 2026-11-27).

Versions are stored with one number sequence per record, counting every version whatever its
access level. A caller sees only the versions it may read, so it is shown those alone,
numbered 1, 2, 3... by their order (its *reader's numbers*), each known from its own ingestion
until the next version it may read was written (or, when none follows, until the first later
version was: the record left its view), and superseded by that next version. A version last
changed when a hidden one closed it shows that end as its ``updated_at`` too. A caller cleared
for every level sees the stored numbers and intervals unchanged.

The number a caller gives a version it may not read (one it wrote above its own read level)
is one more than the readable versions before it. The store, the audit log and the Gate's
optimistic concurrency keep the stored numbers; callers' numbers exist only in answers and in
the ``expected_version`` a caller sends, which the Gate reads in the caller's numbering.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from engram.infra.db import DatabaseAdapter
from engram.infra.sql import load_queries
from engram.memory.types import AccessLevel, MemoryRecord

SQL = load_queries("engram.memory.temporal", "numbering.sql")


@dataclass(frozen=True, slots=True)
class StoredVersion:
    """What a reader's numbering needs of one stored version."""

    id: UUID
    version: int
    ingestion_time: datetime
    readable: bool


def sees_everything(levels: Sequence[str]) -> bool:
    """True for a reader of every access level (its numbers are the stored ones)."""
    return len(levels) == len(AccessLevel)


def as_seen(record: MemoryRecord, chain: Sequence[StoredVersion]) -> MemoryRecord:
    """``record`` (a version of the record whose versions are ``chain``, in stored order) with
    its number, successor and known-until instant as a reader of ``chain``'s readable versions
    sees them."""
    shown = 1 + sum(1 for v in chain if v.readable and v.version < record.version)
    later = [v for v in chain if v.version > record.version]
    following = next((v for v in later if v.readable), None)
    update: dict[str, Any] = {}
    if shown != record.version:
        update["version"] = shown
    if record.superseded_by is not None:
        successor = None if following is None else following.id
        if successor != record.superseded_by:
            update["superseded_by"] = successor
    if record.ingestion_time_end is not None and later:
        end = (following or later[0]).ingestion_time
        if end != record.ingestion_time_end:
            update["ingestion_time_end"] = end
            if record.updated_at == record.ingestion_time_end:
                # Last changed when a version it may not read closed it: as the reader sees
                # it, when its interval ended (the stored instant is the hidden version's).
                update["updated_at"] = end
    return record.model_copy(update=update) if update else record


def chain_of(versions: Sequence[MemoryRecord], levels: Container[str]) -> list[StoredVersion]:
    """The stored versions of one record (all of them, in order) as numbering reads them."""
    return [
        StoredVersion(v.id, v.version, v.ingestion_time, v.access_level.value in levels)
        for v in versions
    ]


async def in_readers_view(
    db: DatabaseAdapter, records: list[MemoryRecord], levels: Sequence[str]
) -> list[MemoryRecord]:
    """``records`` with the numbers, successors and known-until instants a reader of
    ``levels`` is shown, in one query for all of them. A first version that is its record's
    head has neither a version before it nor after it, so only records with another version
    are looked up; a reader of every level has nothing hidden."""
    if sees_everything(levels):
        return records
    wanted = sorted({r.record_id for r in records if r.version > 1 or r.superseded_by is not None})
    if not wanted:
        return records
    rows = await db.fetch(SQL["reader_versions"], wanted, list(levels))
    chains: dict[UUID, list[StoredVersion]] = {}
    for row in rows:
        chains.setdefault(row["record_id"], []).append(
            StoredVersion(row["id"], row["version"], row["ingestion_time"], row["readable"])
        )
    return [
        as_seen(record, chains[record.record_id]) if record.record_id in chains else record
        for record in records
    ]


async def reader_number(
    db: DatabaseAdapter, record_id: UUID, version: int, levels: Sequence[str]
) -> int:
    """The number a reader of ``levels`` gives stored ``version`` of ``record_id``."""
    if version == 1 or sees_everything(levels):
        return version
    return int(await db.fetchval(SQL["reader_number"], record_id, version, list(levels)))


async def numbered_for(
    db: DatabaseAdapter, record: MemoryRecord | None, levels: Sequence[str]
) -> MemoryRecord | None:
    """``record`` carrying the number a reader of ``levels`` gives it (the Gate screens an
    expected version against its head so)."""
    if record is None:
        return None
    number = await reader_number(db, record.record_id, record.version, levels)
    return record if number == record.version else record.model_copy(update={"version": number})


__all__ = [
    "StoredVersion",
    "as_seen",
    "chain_of",
    "in_readers_view",
    "numbered_for",
    "reader_number",
    "sees_everything",
]
