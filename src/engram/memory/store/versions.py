"""Reads and writes of version rows, used by the Gate inside its transactions.

All statements live in ``sql/versions.sql``. Nothing here decides anything: the Gate calls
these after its checks, within one transaction per evaluation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from engram.errors import AlreadyExists, EngramError, UniqueViolation, VersionConflict
from engram.infra.db import Connection, Row
from engram.infra.sql import exact_scan, load_fragments, load_queries
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    ConsolidationPath,
    EdgeKind,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    Neighbour,
    TrustLevel,
    readable_levels,
    weighed_levels,
)

#: Constraints that refuse a second writer of one record's next version (or second head).
_NEXT_VERSION_TAKEN = frozenset({"memories_record_version_key", "memories_one_head_idx"})

SQL = load_queries("engram.memory.store", "versions.sql")
#: The neighbour look-ups measuring every head their filter passes (no index, no early stop).
EXACT = {name: exact_scan(SQL[name]) for name in ("candidates", "own_candidates")}
#: The column list of a version row, for the other packages' statements that read versions.
FRAGMENTS = load_fragments("engram.memory.store", "versions.sql")


_TYPES = {member.value: member for member in MemoryType}
_LEVELS = {member.value: member for member in AccessLevel}
_ORIGINS = {member.value: member for member in GateDecisionType}
_STATUSES = {member.value: member for member in MemoryStatus}
_PATHS = {member.value: member for member in ConsolidationPath}
_FIELDS = frozenset(MemoryRecord.model_fields)


def _trusted(values: dict[str, Any]) -> MemoryRecord:
    """A record from values the database already holds valid (written through the Gate).

    Like ``model_construct`` without its per-field default handling, which dominated reads of
    long version chains; every field is given, so nothing is left to fill in.
    """
    record = MemoryRecord.__new__(MemoryRecord)
    object.__setattr__(record, "__dict__", values)
    object.__setattr__(record, "__pydantic_fields_set__", set(_FIELDS))
    object.__setattr__(record, "__pydantic_extra__", None)
    object.__setattr__(record, "__pydantic_private__", None)
    return record


def _aware(value: datetime | None) -> datetime | None:
    """An instant as the envelope holds it: PostgreSQL's ``infinity`` / ``-infinity`` (which
    no write makes, but a row may hold) come back from the driver without a zone; they are
    the last and first UTC instants."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def record_from_row(row: Row) -> MemoryRecord:
    """Build the envelope from a row selected with the ``record_columns`` fragment."""
    metadata = row["metadata"]
    return _trusted(
        {
            "id": row["id"],
            "record_id": row["record_id"],
            "type": _TYPES[row["type"]],
            "content": row["content"],
            "metadata": json.loads(metadata) if isinstance(metadata, str) else dict(metadata),
            "version": row["version"],
            "superseded_by": row["superseded_by"],
            "source_agent": row["source_agent"],
            "source_confidence": row["source_confidence"],
            "evidence_links": tuple(row["evidence_links"] or ()),
            "event_time": _aware(row["event_time"]),
            "event_time_end": _aware(row["event_time_end"]),
            "ingestion_time": _aware(row["ingestion_time"]),
            "ingestion_time_end": _aware(row["ingestion_time_end"]),
            "access_level": _LEVELS[row["access_level"]],
            "classification": row["classification"],
            "gate_decision_id": row["gate_decision_id"],
            "gate_decision_type": _ORIGINS[row["gate_decision_type"]],
            "namespace": row["namespace"],
            "expected_version": row["expected_version"],
            "status": _STATUSES[row["status"]],
            "created_at": _aware(row["created_at"]),
            "updated_at": _aware(row["updated_at"]),
            "decay_score": row["decay_score"],
            "consolidation_path": _PATHS[row["consolidation_path"]],
        }
    )


def _neighbour(row: Row) -> Neighbour:
    return Neighbour(record_from_row(row), float(row["similarity"]), int(row["repetitions"]))


#: Times a locking read of a record's head is made again when the head it waited for was
#: closed by the writer it waited for.
HEAD_LOCK_ATTEMPTS = 3


async def head(conn: Connection, record_id: UUID, *, lock: bool = False) -> MemoryRecord | None:
    """The current version of a record (locked for the transaction when ``lock``).

    A locking read that waited for another writer of the record finds nothing when that
    writer closed the head it waited for: the version the writer made began after the
    read's snapshot. A new statement sees it, so the head is looked up and locked again (a
    few times, as writers may follow one another); only a record with no head is None."""
    row = await conn.fetchrow(SQL["head_for_update" if lock else "head"], record_id)
    for _ in range(HEAD_LOCK_ATTEMPTS if lock and row is None else 0):
        if await conn.fetchval(SQL["has_head"], record_id) is None:
            break
        row = await conn.fetchrow(SQL["head_for_update"], record_id)
        if row is not None:
            break
    return None if row is None else record_from_row(row)


async def exact_duplicate(
    conn: Connection,
    *,
    namespace: str,
    memory_type: MemoryType,
    content_hash: bytes,
    levels: Sequence[str],
) -> Neighbour | None:
    """An active head of the same type and namespace with the same normalised content, at
    one of the access ``levels`` (those the writer may read)."""
    row = await conn.fetchrow(
        SQL["exact_duplicate"], namespace, memory_type.value, content_hash, list(levels)
    )
    return None if row is None else _neighbour(row)


async def candidates(
    conn: Connection,
    *,
    embedding: Sequence[float] | None,
    namespace: str,
    memory_type: MemoryType,
    content_hash: bytes,
    levels: Sequence[str],
    limit: int = 8,
    own_levels: Sequence[str] | None = None,
) -> tuple[Neighbour | None, list[Neighbour]]:
    """The exact duplicate (if any) and the nearest active heads of one type and namespace,
    among those at the access ``levels`` the writer may read (the others are absent for it),
    nearest first: up to ``limit`` at the ``own_levels`` (those of ``levels`` the proposal's
    readers may read; every one of ``levels`` when None), and up to ``limit`` more at the
    rest of ``levels``. Records of the rest never take the places of the first: when they
    left fewer than ``limit`` of the own levels among the nearest, those are looked up apart.
    The exact duplicate is looked for at the own levels alone: one above them is no duplicate
    of the proposal (ADR-008), and as the oldest of the content it would hide the one at them.

    Without an embedding (degraded mode) only the exact duplicate can be found.
    """
    mine = set(levels if own_levels is None else own_levels)
    exact_levels = [level for level in levels if level in mine]
    if embedding is None:
        exact = await exact_duplicate(
            conn,
            namespace=namespace,
            memory_type=memory_type,
            content_hash=content_hash,
            levels=exact_levels,
        )
        return exact, []
    vector = list(embedding)
    params = (vector, namespace, memory_type.value, content_hash, limit, list(levels))
    rows = await conn.fetch(SQL["candidates"], *params, exact_levels)
    if sum(1 for row in rows if not row["exact"]) < limit + 8:
        # the index scan stops after hnsw.max_scan_tuples versions, those the writer may not
        # read included: fewer than asked may mean hidden ones used it up (search.py too)
        rows = await conn.fetch(EXACT["candidates"], *params, exact_levels)
    exact = next((_neighbour(row) for row in rows if row["exact"]), None)
    nearest = [_neighbour(row) for row in rows if not row["exact"]]
    own = [n for n in nearest if n.record.access_level.value in mine][:limit]
    above = [n for n in nearest if n.record.access_level.value not in mine][:limit]
    if above and len(own) < limit:
        own_params = (vector, namespace, memory_type.value, limit, sorted(mine))
        rows = await conn.fetch(SQL["own_candidates"], *own_params)
        if len(rows) < limit:
            rows = await conn.fetch(EXACT["own_candidates"], *own_params)
        own = [_neighbour(row) for row in rows]
    return exact, sorted([*own, *above], key=lambda n: (-n.similarity, n.record.id))


async def stored_embedding(conn: Connection, version_id: UUID, *, model: str) -> list[float] | None:
    """The embedding ``model`` made for one version (None if it has none by that model)."""
    value = await conn.fetchval(SQL["stored_embedding"], version_id, model)
    if value is None:
        return None
    # the driver's vector type converts to a list; a plain sequence is taken as it is
    values = value.to_list() if hasattr(value, "to_list") else value
    return [float(x) for x in values]


async def resolve_evidence(
    conn: Connection, refs: Sequence[UUID], *, levels: Sequence[str]
) -> Mapping[UUID, UUID]:
    """Map each cited id to the version it names: a record id to the record's head, any
    other version id to that version; ids of records whose head is not at one of the access
    ``levels`` the writer may read are left out (absent for it)."""
    if not refs:
        return {}
    rows = await conn.fetch(SQL["resolve_evidence"], list(refs), list(levels))
    return {row["ref"]: row["version_id"] for row in rows}


async def cite(
    conn: Connection, record: MemoryRecord, caller: CallerIdentity
) -> tuple[Mapping[UUID, UUID], list[str], list[str]]:
    """Resolve ``record``'s ``evidence_links`` as ``caller`` writes it: the versions the ids
    name among records it may cite (``weighed_levels``); the ids naming nothing the caller
    may read (``missing``); and those naming a record the caller may read but the record may
    not cite (``above`` its own level, ADR-008)."""
    refs = list(record.evidence_links)
    if not refs:
        return {}, [], []
    evidence = await resolve_evidence(
        conn, refs, levels=weighed_levels(caller, record.access_level)
    )
    above: list[str] = []
    if len(evidence) < len(refs):  # absent, or above the citing record's level?
        known = await resolve_evidence(conn, refs, levels=readable_levels(caller))
        above = [str(r) for r in refs if r in known and r not in evidence]
    missing = [str(r) for r in refs if r not in evidence and str(r) not in above]
    return evidence, missing, above


def version_row(
    record: MemoryRecord,
    *,
    decision_id: UUID,
    decision_type: GateDecisionType,
    content_hash: bytes,
    importance: float,
    embedding: Sequence[float] | None,
    embedding_model: str | None,
    not_before: datetime | None = None,
    screened_with: str | None = None,
) -> tuple[Any, ...]:
    """The parameters ``$1``-``$25`` of ``insert_version`` (which the Gate's one-statement
    write, ``create_at_once``, takes in the same places)."""
    return (
        record.id,
        record.record_id,
        record.version,
        record.type.value,
        record.content,
        record.metadata,
        record.source_agent,
        record.source_confidence,
        list(record.evidence_links),
        record.event_time,
        not_before,
        record.access_level.value,
        record.classification,
        decision_id,
        decision_type.value,
        record.expected_version,
        record.namespace,
        record.consolidation_path.value,
        importance,
        content_hash,
        None if embedding is None else list(embedding),
        embedding_model if embedding is not None else None,
        record.status.value,
        record.event_time_end,
        screened_with,
    )


def insert_refused(exc: UniqueViolation, record: MemoryRecord) -> EngramError | None:
    """What a unique violation of a version insert means: another writer took this version
    number (or the head) first, or a version with this id exists; None when the violated
    constraint is not the version row's."""
    if exc.constraint in _NEXT_VERSION_TAKEN:
        return VersionConflict(expected=record.expected_version, actual=None)
    if exc.constraint == "memories_pkey":
        return AlreadyExists(f"record {record.id} already exists")
    return None


async def insert_version(
    conn: Connection,
    record: MemoryRecord,
    *,
    decision_id: UUID,
    decision_type: GateDecisionType,
    content_hash: bytes,
    importance: float,
    embedding: Sequence[float] | None,
    embedding_model: str | None,
    not_before: datetime | None = None,
    screened_with: str | None = None,
) -> MemoryRecord:
    """Insert one version row and return it as stored; its ingestion time is the
    transaction's time (never earlier than ``not_before``, the previous version's).

    Raises :class:`~engram.errors.VersionConflict` when another writer took this version
    number (or the head) first, and :class:`~engram.errors.AlreadyExists` when a version with
    this id exists."""
    args = version_row(
        record,
        decision_id=decision_id,
        decision_type=decision_type,
        content_hash=content_hash,
        importance=importance,
        embedding=embedding,
        embedding_model=embedding_model,
        not_before=not_before,
        screened_with=screened_with,
    )
    try:
        row = await conn.fetchrow(SQL["insert_version"], *args)
    except UniqueViolation as exc:
        refused = insert_refused(exc, record)
        if refused is not None:
            raise refused from exc
        raise
    if row is None:  # pragma: no cover - INSERT ... RETURNING always returns the row
        raise RuntimeError("insert_version returned no row")
    return record_from_row(row)


async def close_head(conn: Connection, version_id: UUID, successor_id: UUID) -> bool:
    """Mark a head superseded by ``successor_id`` and end its ingestion interval."""
    return await conn.fetchrow(SQL["close_head"], version_id, successor_id) is not None


async def forget_head(conn: Connection, version_id: UUID) -> bool:
    """End both intervals of a head and mark it forgotten."""
    return await conn.fetchrow(SQL["forget_head"], version_id) is not None


async def reinforce(
    conn: Connection,
    version_id: UUID,
    *,
    embedding: Sequence[float] | None,
    embedding_model: str | None,
) -> int:
    """Count one more repetition of a record (and fill a missing embedding)."""
    value = await conn.fetchval(
        SQL["reinforce"],
        version_id,
        None if embedding is None else list(embedding),
        embedding_model if embedding is not None else None,
    )
    return int(value)


async def fill_embedding(
    conn: Connection, version_id: UUID, *, embedding: Sequence[float], embedding_model: str
) -> bool:
    """Store the embedding a degraded write lacked; False if it already has one."""
    row = await conn.fetchrow(SQL["fill_embedding"], version_id, list(embedding), embedding_model)
    return row is not None


async def unembedded_heads(conn: Connection, *, limit: int) -> list[MemoryRecord]:
    """Active heads stored without an embedding (degraded mode), the most open access
    level first, then oldest first (a record waits for none its readers may not read)."""
    return [record_from_row(row) for row in await conn.fetch(SQL["unembedded_heads"], limit)]


async def add_edge(
    conn: Connection,
    *,
    source: UUID,
    target: UUID,
    kind: EdgeKind,
    decision_id: UUID,
    weight: float = 1.0,
    provenance: Mapping[str, Any] | None = None,
) -> None:
    """Link two versions inside the caller's transaction (idempotent)."""
    await conn.execute(
        SQL["insert_edge"], source, target, kind.value, weight, dict(provenance or {}), decision_id
    )


@dataclass(frozen=True, slots=True)
class NewEdge:
    """An edge a new version gets (from it to ``target``)."""

    target: UUID
    kind: EdgeKind
    weight: float = 1.0
    provenance: Mapping[str, Any] = field(default_factory=dict)


def edge_arrays(edges: Sequence[NewEdge]) -> tuple[list[UUID], list[str], list[float], list[str]]:
    """Targets, kinds, weights (clamped to [0, 1]) and provenance (JSON text) of ``edges``:
    the array parameters of ``insert_edges`` (and of the Gate's one-statement write)."""
    return (
        [edge.target for edge in edges],
        [edge.kind.value for edge in edges],
        [min(1.0, max(0.0, edge.weight)) for edge in edges],
        [json.dumps(dict(edge.provenance), sort_keys=True) for edge in edges],
    )


async def add_edges(
    conn: Connection, *, source: UUID, edges: Sequence[NewEdge], decision_id: UUID
) -> None:
    """Link ``source`` to each edge's target in one statement (idempotent; an edge to
    ``source`` itself is skipped)."""
    if edges:
        await conn.execute(SQL["insert_edges"], source, *edge_arrays(edges), decision_id)


async def standing(conn: Connection, record_id: UUID) -> TrustLevel:
    """The tier of the agent whose write gave the record its current content (trusted when
    an internal origin, such as consolidation, wrote it)."""
    value = await conn.fetchval(SQL["record_standing"], record_id)
    return TrustLevel.TRUSTED if value is None else TrustLevel(value)


async def content_version(conn: Connection, record_id: UUID) -> MemoryRecord | None:
    """The version that gave ``record_id`` its current content (its writer, its origin and
    its metadata as written then: a later change of metadata or level alone is not it)."""
    row = await conn.fetchrow(SQL["content_version"], record_id)
    return None if row is None else record_from_row(row)


async def count_heads(conn: Connection) -> list[tuple[str, str, int]]:
    """Live (head, not forgotten) records by type and consolidation path."""
    rows = await conn.fetch(SQL["count_heads"])
    return [(row["type"], row["consolidation_path"], int(row["n"])) for row in rows]


async def version_by_id(conn: Connection, version_id: UUID) -> MemoryRecord | None:
    """One version by its own id."""
    row = await conn.fetchrow(SQL["version_by_id"], version_id)
    return None if row is None else record_from_row(row)


@dataclass(frozen=True, slots=True)
class Summary:
    """A live consolidated record made from some record: its head, the version consolidation
    made (the one citing the sources) and how many records that version was made from."""

    head: MemoryRecord
    made_id: UUID
    sources: int


async def summaries_of(conn: Connection, record_id: UUID) -> list[Summary]:
    """The consolidated records made from any version of ``record_id`` whose heads are not
    forgotten (normally one while the record is ``consolidated``)."""
    rows = await conn.fetch(SQL["summaries_of"], record_id)
    return [Summary(record_from_row(row), row["made_id"], int(row["sources"])) for row in rows]


async def version_chain(conn: Connection, record_id: UUID) -> list[MemoryRecord]:
    """Every version of a record, oldest first."""
    return [record_from_row(row) for row in await conn.fetch(SQL["version_chain"], record_id)]
