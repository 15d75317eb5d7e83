"""The state of memory rebuilt from the audit log alone, and its comparison with the store.

Every change of a record's liveness is a Gate decision with one audit row: ``created`` and
``updated`` make a version the live one of its record, ``forgotten`` ends the record. Replaying
those rows up to an instant T (``occurred_at <= T``, in ``seq`` order, which is commit order
for any one record) gives the live version of every record at T, whatever the origin of the
decision (external, consolidation, self-healing). ``reinforced`` and ``released`` rows change
no liveness. :meth:`AuditState.compare` sets this against
:meth:`~engram.memory.temporal.engine.TemporalEngine.query` ``(as_of_ingestion=T)`` over every
namespace, type and access level; any difference means the log and the versions disagree.

"Live" means not forgotten: consolidated and challenged records count (the comparison reads
with ``include_consolidated``). The write path stamps ``occurred_at`` of a write with the
ingestion instant of the version it wrote (the end of it, for FORGET), so both sides use one
clock (ADR-014).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from engram.infra.db import DatabaseAdapter
from engram.infra.sql import load_queries
from engram.memory import store
from engram.memory.temporal.engine import TemporalEngine

SQL = load_queries("engram.memory.audit", "state.sql", shared=store.FRAGMENTS)
#: A LIMIT larger than any table: the state listing must not be cut short.
NO_LIMIT = 2**62
PAGE = 2000


@dataclass(frozen=True, slots=True)
class LiveRecord:
    """The live version of one record at an instant."""

    record_id: UUID
    version_id: UUID
    namespace: str | None
    type: str | None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "record_id": str(self.record_id),
            "version_id": str(self.version_id),
            "namespace": self.namespace,
            "type": self.type,
        }


@dataclass(frozen=True, slots=True)
class StateDifference:
    """A record on which the audit log and the store disagree."""

    record_id: UUID
    problem: str
    from_log: LiveRecord | None
    from_store: LiveRecord | None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "record_id": str(self.record_id),
            "problem": self.problem,
            "from_log": None if self.from_log is None else self.from_log.to_json(),
            "from_store": None if self.from_store is None else self.from_store.to_json(),
        }


@dataclass(frozen=True, slots=True)
class StateReport:
    """The comparison at one instant."""

    as_of: datetime
    live_in_log: int
    live_in_store: int
    differences: tuple[StateDifference, ...]

    @property
    def ok(self) -> bool:
        """True when the log and the store agree."""
        return not self.differences

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "as_of": self.as_of.isoformat(),
            "ok": self.ok,
            "live_in_log": self.live_in_log,
            "live_in_store": self.live_in_store,
            "differences": [d.to_json() for d in self.differences],
        }


def compare_states(
    from_log: Mapping[UUID, LiveRecord], from_store: Mapping[UUID, LiveRecord]
) -> list[StateDifference]:
    """Every record live on one side only, or live in different versions."""
    found = []
    for record_id in sorted(from_log.keys() | from_store.keys()):
        logged, stored = from_log.get(record_id), from_store.get(record_id)
        if stored is None:
            problem = "live according to the audit log, absent from the store"
        elif logged is None:
            problem = "live in the store, but the audit log never made it live (or ended it)"
        elif logged.version_id != stored.version_id:
            problem = "the audit log and the store name different live versions"
        else:
            continue
        found.append(StateDifference(record_id, problem, logged, stored))
    return found


class AuditState:
    """Rebuilds live records from the log, reads them from the store, and compares.

    ``reader`` must be a temporal engine that counts no reads (an admin check is not a use of
    the records; decay must not see it).
    """

    def __init__(self, db: DatabaseAdapter, *, reader: TemporalEngine) -> None:
        self._db = db
        self._reader = reader

    async def from_log(self, as_of: datetime) -> dict[UUID, LiveRecord]:
        """The live version of each record at ``as_of``, from the audit log alone."""
        live: dict[UUID, LiveRecord] = {}
        after = 0
        while True:
            page = await self._db.fetch(SQL["liveness_page"], after, as_of, PAGE)
            if not page:
                return live
            for row in page:
                record_id = row["record_id"]
                if record_id is None:
                    continue
                if row["outcome"] == "forgotten":
                    live.pop(record_id, None)
                elif row["version_id"] is not None:
                    live[record_id] = LiveRecord(
                        record_id, row["version_id"], row["namespace"], row["type"]
                    )
            after = int(page[-1]["seq"])

    async def from_store(
        self, as_of: datetime, *, namespaces: Iterable[str] = ()
    ) -> dict[UUID, LiveRecord]:
        """The live version of each record at ``as_of`` as the temporal reads answer it, over
        every namespace (those known at ``as_of`` plus ``namespaces``), type and level."""
        known = {row["namespace"] for row in await self._db.fetch(SQL["namespaces_as_of"], as_of)}
        live: dict[UUID, LiveRecord] = {}
        for namespace in sorted(known | set(namespaces)):
            records = await self._reader.query(
                as_of_ingestion=as_of,
                include_consolidated=True,
                caller=None,
                namespace=namespace,
                limit=NO_LIMIT,
            )
            for record in records:
                live[record.record_id] = LiveRecord(
                    record.record_id, record.id, record.namespace, record.type.value
                )
        return live

    async def compare(self, as_of: datetime) -> StateReport:
        """Rebuild the state at ``as_of`` from the log and compare it with the store."""
        logged = await self.from_log(as_of)
        namespaces = {r.namespace for r in logged.values() if r.namespace is not None}
        stored = await self.from_store(as_of, namespaces=namespaces)
        return StateReport(
            as_of=as_of,
            live_in_log=len(logged),
            live_in_store=len(stored),
            differences=tuple(compare_states(logged, stored)),
        )
