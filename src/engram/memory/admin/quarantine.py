"""Quarantined records and their release.

The PII check of Layer 1 stores a record with a finding at ``access_level = sensitive`` and
the finding kinds in ``metadata.pii`` (it does not reject it). Only an admin can lift that:
:meth:`QuarantineDesk.release` moves the head to a lower access level and appends one audit row
(action ``RELEASE``, outcome ``released``) carrying the admin and the reason, in the same
transaction. The content is unchanged, so nothing is re-screened; the record keeps
``metadata.pii`` as a trace of the finding. An admin shown flagged content (``--reveal``)
leaves a ``REVEAL`` row first (:meth:`QuarantineDesk.reveal`); otherwise the admin commands
hide it (:mod:`engram.memory.admin.redaction`).

The list pages by the audit ``seq`` of the decision that wrote each quarantined version (a
cursor is that number), and a page ends at :meth:`~engram.memory.audit.log.AuditLog.settled_seq`:
a write takes its ingestion time when its transaction starts but draws its seq only when it
appends its audit row, holding its lane until it commits, so a quarantined write still
committing while a page is read comes after that page's cursor, never before it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

import structlog

from engram.errors import NotFound, Quarantine, StaleCursor, ValidationFailed, VersionConflict
from engram.infra.db import Connection, DatabaseAdapter, Row
from engram.infra.sql import load_queries
from engram.memory import store
from engram.memory.audit.entry import caller_json, new_decision_id
from engram.memory.audit.log import AuditEntry, AuditLog, canonical_json
from engram.memory.storable import text_problem
from engram.memory.temporal import restate_decay
from engram.memory.types import AccessLevel, CallerIdentity, MemoryRecord, MemoryStatus

log = structlog.get_logger("engram.memory.admin.quarantine")
SQL = load_queries("engram.memory.admin", "quarantine.sql", shared=store.FRAGMENTS)
RELEASE = "RELEASE"
REVEAL = "REVEAL"
MAX_REASON = 2000
#: Most record ids a ``REVEAL`` row lists (an export may show thousands; the count is kept).
MAX_LISTED = 1000
#: The largest cursor: an audit seq is a PostgreSQL bigint.
MAX_CURSOR = 2**63 - 1


@dataclass(frozen=True)
class QuarantinePage:
    """One page of the quarantine list and the cursor of the next (None: none follows)."""

    records: list[MemoryRecord]
    next_cursor: int | None


def parse_cursor(text: str) -> int:
    """The audit seq a cursor of the quarantine list names (its ``next_cursor``, as text).

    :class:`StaleCursor` for an ingestion time, the cursor this list gave before it paged by
    seq (following it would start at a seq no page gave); :class:`ValidationFailed` for any
    other text that is not a seq."""
    value = text.strip()
    # The length first: int() refuses a text of more than 4,300 digits with a ValueError.
    if value.isascii() and value.isdigit() and len(value) <= 19 and int(value) <= MAX_CURSOR:
        return int(value)
    try:
        datetime.fromisoformat(value)
    except ValueError:
        problem = (
            "cursor: not a cursor of the quarantine list (a whole number from 0 to "
            f"{MAX_CURSOR}, as a page gave it)"
        )
        raise ValidationFailed(errors=[problem]) from None
    stale = (
        "cursor: an ingestion time was this list's cursor before it paged by the audit seq of "
        "each record's quarantine decision, and names no place in that order: list again "
        "without a cursor"
    )
    raise StaleCursor(errors=[stale])


def is_quarantined(record: MemoryRecord) -> bool:
    """True for a live head the PII check holds at ``sensitive``."""
    return (
        record.access_level is AccessLevel.SENSITIVE
        and "pii" in record.metadata
        and record.status is not MemoryStatus.FORGOTTEN
        and record.superseded_by is None
    )


class QuarantineDesk:
    """Lists quarantined records and releases them on an admin's decision."""

    def __init__(self, db: DatabaseAdapter, audit: AuditLog) -> None:
        self._db = db
        self._audit = audit

    async def pending(self, *, after: int = 0, limit: int = 100) -> QuarantinePage:
        """Quarantined heads whose decisions come after the cursor ``after`` (an audit seq),
        in the order those decisions were appended: ``limit`` of them (more when several
        share the last one's seq), none past the settled seq."""

        # One transaction holding the lanes: a new version of a listed record (its level
        # unchanged, its decision past the settled seq) committing between the two reads
        # ended the version read as its head and was itself past the page: the record
        # vanished from a list that said nothing followed (seen under load, a conflict
        # step rewriting a quarantined record).
        async def page(conn: Connection) -> list[Row]:
            settled = await self._audit.hold_settled(conn)
            return await conn.fetch(SQL["quarantined"], after, limit, settled)

        rows = await self._db.run_in_transaction(page)  # read only: safe to run again
        more = bool(rows) and bool(rows[-1]["more"])
        return QuarantinePage(
            [store.record_from_row(row) for row in rows],
            int(rows[-1]["decided_seq"]) if more else None,
        )

    async def release(
        self,
        record_id: UUID,
        *,
        admin: CallerIdentity,
        reason: str,
        level: AccessLevel = AccessLevel.AGENT,
        request_id: str | None = None,
        expected_version: int | None = None,
    ) -> tuple[MemoryRecord, UUID]:
        """Lift the quarantine of ``record_id`` to ``level``; returns the head and decision id.

        ``expected_version``: the version the admin reviewed. When the record has moved on
        since (a new version, with other findings, quarantined again), the release is a
        :class:`VersionConflict` and nothing changes: a release publishes only what was
        read."""
        reason = reason.strip()
        problems = []
        if not reason:
            problems.append("reason: an admin release must say why")
        elif len(reason) > MAX_REASON:
            problems.append(f"reason: at most {MAX_REASON} characters")
        elif (problem := text_problem(reason)) is not None:
            problems.append(f"reason: {problem}")
        if level is AccessLevel.SENSITIVE:
            problems.append("level: a release moves the record below sensitive")
        if problems:
            raise ValidationFailed(errors=problems)
        started = time.perf_counter()
        decision_id = new_decision_id()

        async def body(conn: Connection) -> MemoryRecord:
            head = await store.head(conn, record_id, lock=True)
            if head is None:
                raise NotFound(f"no record {record_id}")
            if await self._audit.audited(conn, decision_id):
                return head  # a retry after a commit whose acknowledgement was lost
            if not is_quarantined(head):
                raise Quarantine(f"record {record_id} is not quarantined")
            if expected_version is not None and head.version != expected_version:
                raise VersionConflict(expected=expected_version, actual=head.version)
            if head.status is MemoryStatus.CONSOLIDATED:
                # Its readers would get neither it (consolidated) nor its summary (sensitive).
                raise Quarantine(
                    f"record {record_id} was consolidated: release the consolidated record "
                    "that cites it, or roll its batch back first"
                )
            row = await conn.fetchrow(SQL["release"], head.id, level.value)
            assert row is not None  # noqa: S101 - the head was locked above
            released = store.record_from_row(row)
            # Its stored score counted the reads of its readers at sensitive (ADR-009).
            score = await restate_decay(conn, record_id)
            if score is not None:
                released = released.model_copy(update={"decay_score": score})
            snapshot: dict[str, object] = {
                "action": RELEASE,
                "record_id": str(record_id),
                "level": level.value,
                "previous_level": head.access_level.value,
                "pii_kinds": head.metadata.get("pii", {}).get("kinds", []),
            }
            entry = _admin_entry(
                decision_id,
                RELEASE,
                "released",
                admin=admin,
                reason=reason,
                snapshot=snapshot,
                started=started,
                request_id=request_id,
                record=head,
            )
            await self._audit.append(conn, entry)
            return released

        released = await self._db.run_in_transaction(body)
        log.info(
            "quarantine.released",
            decision_id=str(decision_id),
            record_id=str(record_id),
            level=level.value,
            admin=admin.agent_id,
        )
        return released, decision_id

    async def flagged(self) -> set[UUID]:
        """Every record with a PII finding in any version (quarantined now or released)."""
        return {row["record_id"] for row in await self._db.fetch(SQL["flagged"])}

    async def is_flagged(self, record_id: UUID) -> bool:
        """Whether ``record_id`` has a PII finding in any version."""
        return bool(await self._db.fetchval(SQL["is_flagged"], record_id))

    async def reveal(
        self,
        *,
        admin: CallerIdentity,
        shown: str,
        reason: str,
        record_ids: Sequence[UUID] = (),
    ) -> UUID:
        """Audit that ``admin`` is shown flagged content (``shown`` says where: a listing, an
        export), before it is shown; returns the decision id of the ``REVEAL`` row."""
        reason = " ".join(reason.split())
        if not reason:
            raise ValidationFailed(errors=["reason: revealing quarantined content must say why"])
        if len(reason) > MAX_REASON:
            raise ValidationFailed(errors=[f"reason: at most {MAX_REASON} characters"])
        if (problem := text_problem(reason)) is not None:
            raise ValidationFailed(errors=[f"reason: {problem}"])
        started = time.perf_counter()
        decision_id = new_decision_id()
        ids = sorted(str(record_id) for record_id in record_ids)
        snapshot: dict[str, object] = {
            "action": REVEAL,
            "shown": shown,
            "records": ids[:MAX_LISTED],
        }
        if len(ids) > MAX_LISTED:
            snapshot["records_total"] = len(ids)

        async def body(conn: Connection) -> None:
            if await self._audit.audited(conn, decision_id):
                return  # a retry after a commit whose acknowledgement was lost
            entry = _admin_entry(
                decision_id,
                REVEAL,
                "revealed",
                admin=admin,
                reason=reason,
                snapshot=snapshot,
                started=started,
            )
            await self._audit.append(conn, entry)

        await self._db.run_in_transaction(body)
        log.info(
            "quarantine.revealed",
            decision_id=str(decision_id),
            shown=shown,
            records=len(ids),
            admin=admin.agent_id,
        )
        return decision_id


def _admin_entry(
    decision_id: UUID,
    action: str,
    outcome: str,
    *,
    admin: CallerIdentity,
    reason: str,
    snapshot: dict[str, object],
    started: float,
    request_id: str | None = None,
    record: MemoryRecord | None = None,
) -> AuditEntry:
    """The audit row of an admin's action on the quarantine (not a Gate evaluation)."""
    return AuditEntry(
        decision_id=decision_id,
        request_id=request_id or str(decision_id),
        occurred_at=datetime.now(UTC),
        action=action,
        decision="approved",
        outcome=outcome,
        decision_type="external",
        reason=reason,
        agent_id=admin.agent_id,
        caller=canonical_json(caller_json(admin)),
        record_id=None if record is None else record.record_id,
        version_id=None if record is None else record.id,
        input_snapshot=canonical_json(snapshot),
        layer1_checks="[]",
        layer2_decision=None,
        decision_source="admin",
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
    )
