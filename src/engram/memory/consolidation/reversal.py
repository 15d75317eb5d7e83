"""Consolidation batches looked up and undone: listing, rollback, and release.

A batch is undone item by item, each item one group of Gate requests (ADR-018): the
consolidated record is forgotten (its history stays) and each source whose head is still
the version the batch made goes back to ``active`` (``challenged`` when a resolution
challenged the record compressed from it alone in its place); a source an agent changed
since is left as it is. :meth:`BatchDesk.rollback` undoes a whole batch in one transaction;
:meth:`BatchDesk.release` undoes the items that consumed one record, when an agent forgot or
changed it, so that what the agent took back does not live on in a summary; it runs from the
change's outbox event, and :meth:`BatchDesk.sweep` (run by the scheduled passes) finishes the
releases whose events did not.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from uuid import UUID

import structlog

from engram.errors import (
    ConsolidationConflict,
    InfrastructureError,
    NotFound,
    TransientDatabaseError,
)
from engram.infra.db import Connection, DatabaseAdapter, Row
from engram.infra.events import Event
from engram.infra.sql import load_queries
from engram.memory import store
from engram.memory.consolidation.actions import most_closed
from engram.memory.consolidation.model import BatchReport, RollbackReport, SweepReport
from engram.memory.consolidation.undo import CONSOLIDATOR, batch_from_row, item_requests
from engram.memory.gate.groups import GroupOutcome, Skip
from engram.memory.gate.librarian import LibrarianGate
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
)

log = structlog.get_logger("engram.memory.consolidation")

SQL = load_queries("engram.memory.consolidation", "batches.sql")
#: Times a release is tried when a record moves under it.
RELEASE_ATTEMPTS = 3
#: Sources one sweep releases at most; the rest wait for the next scheduled pass.
SWEEP_LIMIT = 500
#: Releases failing for an infrastructure reason in a row that end a sweep.
SWEEP_FAILURES_IN_A_ROW = 3


_NOT_CHANGES = frozenset(
    {GateDecisionType.CONSOLIDATION.value, GateDecisionType.SELF_HEALING.value}
)


class BatchDesk:
    """Committed batches: list, show, roll back, release."""

    def __init__(self, db: DatabaseAdapter, gate: LibrarianGate) -> None:
        self._db = db
        self._gate = gate

    async def batches(self, *, limit: int = 50) -> list[BatchReport]:
        """The most recent committed batches, newest first."""
        rows = await self._db.fetch(SQL["batches"], limit)
        return [batch_from_row(row) for row in rows]

    async def batch(self, batch_id: UUID) -> BatchReport:
        """One committed batch; :class:`~engram.errors.NotFound` when there is none."""
        return batch_from_row(await self._row(batch_id))

    async def _row(self, batch_id: UUID) -> Row:
        row = await self._db.fetchrow(SQL["batch"], batch_id)
        if row is None:
            raise NotFound(f"no consolidation batch {batch_id}")
        return row

    async def release(
        self, record_id: UUID, *, changed_in: int | None = None, by_agent: bool = False
    ) -> list[UUID]:
        """Undo the items that consumed ``record_id`` once it was forgotten or changed: their
        consolidated records are forgotten and their other sources restored to ``active``
        (the next pass consolidates them again, without what was taken back), so a fact an
        agent forgot or corrected does not live on in a summary. Returns the records
        forgotten. Runs for every ``memory.forgotten`` and ``memory.updated`` event
        (:meth:`on_source_changed`).

        ``changed_in``: the version the change made. A batch that consumed a later version
        (a pass after the change, already without what was taken back) is left alone: an
        event delivered again after that pass must not undo it.

        ``by_agent``: an agent's forget or change asked for it. A consolidated record an
        agent has written since (a correction) is then that agent's claim, and is left
        standing with its sources, as a rollback leaves it without ``force``: forgetting
        it would take back what the other agent was told was stored. (A PII finding still
        undoes it: its other sources' facts must stay readable at their level.)"""
        refused: list[GroupOutcome] = []
        for attempt in range(1, RELEASE_ATTEMPTS + 1):
            rows = await self._db.fetch(SQL["batches_with_item"], [{"sources": [str(record_id)]}])
            groups: list[list[GateRequest]] = []
            retired: list[UUID] = []
            for row in rows:
                own = set(row["decision_ids"])
                if changed_in is not None and await self._consumed_since(
                    record_id, row["decision_ids"], changed_in
                ):
                    continue
                for item in batch_from_row(row).items:
                    if record_id not in item.sources:
                        continue
                    summary = await store.head(self._db, item.record_id)
                    if summary is None or summary.status is MemoryStatus.FORGOTTEN:
                        continue
                    if by_agent and await self._db.fetchval(
                        SQL["written_by_an_agent"], item.record_id
                    ):
                        log.warning(
                            "consolidation.release_left",
                            source=str(record_id),
                            record_id=str(item.record_id),
                        )
                        continue
                    heads = {s: await store.head(self._db, s) for s in item.sources}
                    summary = await self._closed_as_its_sources(summary, heads)
                    key = "consolidation-release"
                    heads = await self._not_consumed_since(heads, own)
                    group, _ = item_requests(item, summary, heads, own, key)
                    groups.append(group)
                    retired.append(item.record_id)
            if not groups:
                return []
            outcomes = await self._gate.evaluate_groups(groups)
            if all(outcome.written for outcome in outcomes):
                log.info("consolidation.released", source=str(record_id), retired=len(retired))
                await self._gate.refresh_record_gauge()
                return retired
            refused = [o for o in outcomes if not o.written and o.skipped != Skip.SOURCE_CHANGED]
            log.info("consolidation.release_retried", source=str(record_id), attempt=attempt)
        if refused:  # refused on the last plan too (a record forgotten meanwhile reads as one)
            raise ConsolidationConflict(
                f"record {record_id}: the Gate refused the release ({refused[0].detail})"
            )
        raise StillMoving(f"record {record_id}: its summaries kept moving; not released yet")

    async def _consumed_since(
        self, record_id: UUID, decisions: Sequence[UUID], changed_in: int
    ) -> bool:
        """Whether the batch whose decisions are ``decisions`` consumed ``record_id`` after
        the change that made its version ``changed_in`` (the batch's own version of it is
        newer)."""
        made = await self._db.fetchval(SQL["batch_version_of"], record_id, list(decisions))
        return made is not None and made > changed_in

    async def _closed_as_its_sources(
        self, summary: MemoryRecord, heads: dict[UUID, MemoryRecord | None]
    ) -> MemoryRecord:
        """``summary`` raised to its most closed source's level when an agent raised a source
        above it since the batch. Forgotten at its own level, its history would give the
        raised source's facts to readers for whom that source is now absent at every instant
        (the PII rescan raises a summary the same way before it is forgotten; ADR-018)."""
        sources = [head for head in heads.values() if head is not None]
        level = most_closed([summary, *sources]).access_level
        if level is summary.access_level:
            return summary
        raised = summary.model_copy(update={"id": uuid.uuid4(), "access_level": level})
        result = await self._gate.evaluate(
            GateRequest(
                GateAction.UPDATE,
                raised,
                CONSOLIDATOR,
                GateDecisionType.CONSOLIDATION,
                expected_version=summary.version,
                status=summary.status,
            )
        )
        if result.modified_record is None or result.record_id != summary.record_id:
            log.warning(
                "consolidation.summary_not_raised",
                record_id=str(summary.record_id),
                reason=result.reason,
            )
        return await store.head(self._db, summary.record_id) or summary

    async def _not_consumed_since(
        self, heads: dict[UUID, MemoryRecord | None], own: set[UUID]
    ) -> dict[UUID, MemoryRecord | None]:
        """``heads`` without the sources another batch consumed since this one (a release or
        a rollback gave them back, and a later pass took them again): they belong to that
        batch's live summary, and restoring them would state each fact twice."""
        kept = dict(heads)
        for source, head in heads.items():
            if (
                head is not None
                and head.status is MemoryStatus.CONSOLIDATED
                and head.gate_decision_id not in own
            ):
                last = await self._db.fetchval(SQL["last_consolidation_decision"], source)
                if last is not None and last not in own:
                    kept[source] = None
        return kept

    async def on_source_changed(self, event: Event) -> None:
        """Outbox subscriber: release what consumed a record an agent forgot or changed
        (consolidation's own status changes are not changes of content, and neither are
        self-healing repairs: a re-embedding, or a PII finding raising the access level)."""
        if event.payload.get("decision_type") in _NOT_CHANGES:
            return
        version = event.payload.get("version")
        record_id = UUID(event.payload["record_id"])
        try:
            await self.release(
                record_id,
                changed_in=version if isinstance(version, int) else None,
                by_agent=True,
            )
            await self.restore_below(record_id)
        except StillMoving as exc:  # contention passes: the outbox delivers the event again
            raise TransientDatabaseError(str(exc)) from exc

    async def restore_below(self, record_id: UUID) -> list[UUID]:
        """Give back the sources of the consolidated record ``record_id`` that their readers
        may no longer read it through: an agent raised the record above a source's level
        (ADR-018, amended 2026-11-29, hostile pass AK). Such a source, still consumed by the
        batch, goes back to ``active`` at its own level; the record stands as the agent wrote
        it. Returns the sources restored (none when the record is not raised above any)."""
        summary = await store.head(self._db, record_id)
        if summary is None or summary.status is MemoryStatus.FORGOTTEN:
            return []
        rows = await self._db.fetch(SQL["batches_with_item"], [{"record_id": str(record_id)}])
        groups: list[list[GateRequest]] = []
        restored: list[UUID] = []
        for row in rows:
            own = set(row["decision_ids"])
            for item in batch_from_row(row).items:
                if item.record_id != record_id:
                    continue
                heads = await self._not_consumed_since(
                    {s: await store.head(self._db, s) for s in item.sources}, own
                )
                below: dict[UUID, MemoryRecord | None] = {
                    s: head
                    for s, head in heads.items()
                    if head is not None and not head.access_level.allows(summary.access_level)
                }
                group, back = item_requests(item, None, below, own, "consolidation-restore")
                if group:
                    groups.append(group)
                    restored += back
        if not groups:
            return []
        outcomes = await self._gate.evaluate_groups(groups)
        if not all(outcome.written for outcome in outcomes):
            # a source moved meanwhile: the event is delivered again and plans afresh
            raise StillMoving(f"record {record_id}: its sources moved; not restored yet")
        log.info("consolidation.restored_below", record_id=str(record_id), sources=len(restored))
        await self._gate.refresh_record_gauge()
        return restored

    async def sweep(self, *, limit: int = SWEEP_LIMIT) -> SweepReport:
        """Finish the releases whose events did not (ADR-018, amended 2026-11-29, fifth): a
        source an agent forgot or changed after a batch consumed it, while the summary the
        batch made still stands, is released as its event would have released it (the same
        ``changed_in``, ``by_agent``; a summary an agent wrote since is not looked for). The
        outbox gives an event up after ``ENGRAM_OUTBOX_MAX_ATTEMPTS`` failed deliveries, and
        a refused release counts as delivered; a source whose event it still holds is left
        to it. Idempotent: a release that finds its summaries forgotten already (by the
        event, a concurrent sweep or a rollback) does nothing.

        A release that fails (the Gate refused it, its summaries kept moving, the database
        refused the write, or anything else went wrong with it, such as a batch row it
        cannot read) is logged and counted as failed, and the sweep goes on with the next
        source: one summary that cannot be released must not hold back the
        others, nor the pass after the sweep. After ``SWEEP_FAILURES_IN_A_ROW``
        infrastructure failures in a row the sweep stops (the database is likely down); the
        next pass's sweep tries again. The look-up's own failure is raised.

        The sweep also finishes the give-backs of :meth:`restore_below` whose events did not
        (an agent raised a consolidated record above a source still consumed), counted as
        releases."""
        rows = await self._db.fetch(SQL["unreleased_sources"], limit)
        jobs: list[tuple[UUID, Callable[[], Awaitable[list[UUID]]]]] = [
            (
                row["source_id"],
                partial(
                    self.release, row["source_id"], changed_in=row["changed_in"], by_agent=True
                ),
            )
            for row in rows
        ]
        # and the give-backs below a raised summary its event did not finish (pass AK)
        raised = await self._db.fetch(SQL["summaries_above_their_sources"], limit)
        jobs += [
            (row["record_id"], partial(self.restore_below, row["record_id"])) for row in raised
        ]
        released = failed = down = 0
        for record_id, job in jobs:
            try:
                retired = await job()
            except Exception as exc:  # noqa: BLE001 - one release must not stop the sweep
                failed += 1
                down = down + 1 if isinstance(exc, InfrastructureError) else 0
                log.error(
                    "consolidation.release_sweep_failed",
                    source=str(record_id),
                    error=type(exc).__name__,
                )
                if down >= SWEEP_FAILURES_IN_A_ROW:
                    break
                continue
            down = 0
            if retired:
                released += 1
                log.warning(
                    "consolidation.release_swept", source=str(record_id), retired=len(retired)
                )
        return SweepReport(found=len(jobs), released=released, failed=failed)

    async def rollback(self, batch_id: UUID, *, force: bool = False) -> RollbackReport:
        """Forget the batch's consolidated records and restore its sources to ``active``, in
        one transaction through the Gate. A source that changed since the batch (an agent
        wrote a new version) is left as it is. A consolidated record an agent changed since
        is not forgotten without ``force`` (its history keeps the change either way).
        Raises :class:`~engram.errors.NotFound` for an unknown batch and
        :class:`~engram.errors.ConsolidationConflict` for one rolled back already, or one
        with a changed record (without ``force``); then nothing changed.

        A record that moves while the rollback runs (most often: an agent's change of a
        source, whose event makes :meth:`release` take the same summary back at the same
        time) makes the attempt write nothing; the rollback is then planned again from the
        new heads, up to ``RELEASE_ATTEMPTS`` times, and reports what it did itself.
        """
        for attempt in range(1, RELEASE_ATTEMPTS + 1):
            try:
                report = await self._rollback_once(batch_id, force=force)
            except _MovedOn:
                log.info("consolidation.rollback_retried", batch_id=str(batch_id), attempt=attempt)
                continue
            log.info(
                "consolidation.rolled_back",
                batch_id=str(batch_id),
                retired=len(report.retired),
                restored=len(report.restored),
                untouched=len(report.untouched),
            )
            await self._gate.refresh_record_gauge()
            return report
        raise ConsolidationConflict(
            f"batch {batch_id}: its records kept moving during the rollback; nothing changed"
        )

    async def _rollback_once(self, batch_id: UUID, *, force: bool) -> RollbackReport:
        """One planned attempt of :meth:`rollback` (raises :class:`_MovedOn` when a record
        moved between the plan and the transaction)."""
        row = await self._row(batch_id)
        batch = batch_from_row(row)
        if batch.rolled_back_at is not None:
            raise ConsolidationConflict(f"batch {batch_id} was rolled back already")
        own = set(row["decision_ids"])
        groups: list[list[GateRequest]] = []
        retired: list[UUID] = []
        restored: list[UUID] = []
        untouched: list[UUID] = []
        key = f"consolidation-rollback:{batch_id}"
        for item in batch.items:
            summary = await store.head(self._db, item.record_id)
            standing = summary is not None and summary.status is not MemoryStatus.FORGOTTEN
            changed = standing and summary is not None and summary.gate_decision_id not in own
            if changed and not force and summary is not None:
                raise ConsolidationConflict(
                    f"record {item.record_id} of batch {batch_id} was changed since "
                    f"(version {summary.version}); roll back with force to forget it anyway"
                )
            heads = {source: await store.head(self._db, source) for source in item.sources}
            heads = await self._not_consumed_since(heads, own)
            group, back = item_requests(item, summary, heads, own, key)
            retired += [item.record_id] if standing else []
            restored += back
            untouched += [source for source in item.sources if source not in back]
            if group:
                groups.append(group)

        # chosen once: the mark's retry after a lost COMMIT acknowledgement knows it by it
        at = datetime.now(UTC)

        async def finish(conn: Connection, outcomes: Sequence[GroupOutcome]) -> None:
            refused = [
                (group, o)
                for group, o in zip(groups, outcomes, strict=True)
                if not o.written and o.skipped != Skip.SOURCE_CHANGED
            ]
            for group, _ in refused:
                if await _moved_since(conn, group):  # refused for the plan, not the request
                    raise _MovedOn(f"batch {batch_id}: a record moved on during the rollback")
            if refused:  # the Gate said no: planning again would hear the same answer
                refused_outcome = refused[0][1]
                raise ConsolidationConflict(
                    f"batch {batch_id}: the Gate refused the rollback ({refused_outcome.detail}); "
                    "nothing changed"
                )
            if not all(outcome.written for outcome in outcomes):
                raise _MovedOn(f"batch {batch_id}: a record moved on during the rollback")
            decisions = [r.decision_id for o in outcomes for r in o.results]
            if await conn.fetchval(SQL["mark_rolled_back"], batch_id, decisions, at) is None:
                raise ConsolidationConflict(f"batch {batch_id} was rolled back already")

        await self._gate.evaluate_groups(groups, finish=finish)
        return RollbackReport(batch_id, tuple(retired), tuple(restored), tuple(untouched))


class StillMoving(ConsolidationConflict):
    """A release's summaries moved under it on every attempt; it may be tried again later."""


class _MovedOn(ConsolidationConflict):
    """A record of the batch moved between a rollback's plan and its transaction."""


async def _moved_since(conn: Connection, group: Sequence[GateRequest]) -> bool:
    """Whether a record ``group`` changes is no longer the live version it was planned
    against. A FORGET is in place (the version stays), so a record an agent or a release
    forgot meanwhile is refused by the Gate's schema check rather than as a conflict."""
    for request in group:
        head = await store.head(conn, request.record.record_id)
        if (
            head is None
            or head.status is MemoryStatus.FORGOTTEN
            or head.version != request.expected_version
        ):
            return True
    return False
