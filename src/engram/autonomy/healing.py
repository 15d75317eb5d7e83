"""Self-healing jobs. Each repair is a write, so each passes the Gate as ``self_healing``.

- :func:`reembed_missing` embeds records stored in degraded mode (no embedding);
- :class:`PiiRescan` reads live records with the current PII detector when another version
  screened them (§5.1's compensating control). A finding makes the record ``sensitive`` (an
  audited self-healing UPDATE keeping its content and status) and the same change goes to
  every record ``derived_from`` one of its versions carrying personal data, consolidated
  summaries included, however deep; a record already held as sensitive for PII passes the
  change on to its descendants the same way. A
  record an admin released (an audited RELEASE) goes back only for a kind of finding the
  release did not cover. What a caller wrote in ``metadata`` decides none of this. A clean
  record is only marked as read by the new version.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import structlog

from engram.errors import EngramError
from engram.infra.db import DatabaseAdapter
from engram.infra.sql import load_queries
from engram.memory import store
from engram.memory.gate import pii
from engram.memory.gate.checks import PII, screened_text
from engram.memory.gate.librarian import LibrarianGate
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    WriteOutcome,
)
from engram.observability.metrics import EngramMetrics

log = structlog.get_logger("engram.autonomy.healing")

#: Undoes the consolidation items that consumed a record (``ConsolidationEngine.release``).
Release = Callable[[UUID], Awaitable[list[UUID]]]
SQL = load_queries("engram.autonomy.sql", "healing.sql", shared=store.FRAGMENTS)

SELF_HEALING = CallerIdentity.system("self-healing")


@dataclass(frozen=True, slots=True)
class ReembedReport:
    """What one re-embedding pass did."""

    candidates: int
    repaired: int
    still_degraded: int


async def reembed_missing(
    gate: LibrarianGate, db: DatabaseAdapter, *, batch: int = 100
) -> ReembedReport:
    """Embed active records that were stored in degraded mode (without an embedding).

    Each record is re-proposed unchanged as a self-healing UPDATE of its current version; the
    Gate re-screens it, finds the content unchanged (a NOOP) and fills in the embedding.
    """
    heads = await store.unembedded_heads(db, limit=batch)
    repaired = degraded = 0
    for head in heads:
        result = await gate.evaluate(_update(head, head))
        if result.outcome is WriteOutcome.REINFORCED and not result.degraded:
            repaired += 1
        else:
            degraded += 1
    report = ReembedReport(len(heads), repaired, degraded)
    log.info("self_healing.reembed", candidates=report.candidates, repaired=repaired)
    return report


def _update(head: MemoryRecord, proposal: MemoryRecord) -> GateRequest:
    """A self-healing UPDATE of ``head`` to ``proposal``, keeping the head's status."""
    return GateRequest(
        GateAction.UPDATE,
        proposal,
        SELF_HEALING,
        GateDecisionType.SELF_HEALING,
        expected_version=head.version,
        status=head.status,
    )


@dataclass(frozen=True, slots=True)
class Screener:
    """A PII detector as the rescan uses it: its version, its metric label, and the kinds it
    finds in a text."""

    version: str
    label: str
    kinds: Callable[[str], Sequence[str]]


def current_screener() -> Screener:
    """The detector the Gate screens with."""
    return Screener(
        pii.DETECTOR_VERSION,
        pii.DETECTOR,
        lambda text: sorted({finding.kind.value for finding in pii.scan(text)}),
    )


@dataclass
class RescanReport:
    """What one rescan pass did."""

    scanned: int = 0
    flagged: int = 0
    propagated: int = 0
    refused: int = 0
    flagged_ids: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "flagged": self.flagged,
            "propagated": self.propagated,
            "refused": self.refused,
        }


class PiiRescan:
    """Rescans records screened by another detector version (see the module docstring)."""

    def __init__(
        self,
        gate: LibrarianGate,
        db: DatabaseAdapter,
        metrics: EngramMetrics,
        *,
        screener: Screener | None = None,
        batch: int = 200,
        release: Release | None = None,
    ) -> None:
        self._gate = gate
        self._db = db
        self._metrics = metrics
        self._screener = screener or current_screener()
        self._batch = batch
        self._release = release

    async def run(self, *, max_batches: int = 50) -> RescanReport:
        """Rescan up to ``max_batches`` batches of records (the next run goes on)."""
        rescan = _Pass(self._gate, self._db, self._metrics, self._screener, self._release)
        for _ in range(max_batches):
            rows = await self._db.fetch(
                SQL["unscreened_heads"], self._screener.version, self._batch
            )
            if not rows:
                break
            heads = [store.record_from_row(row) for row in rows]
            released = {
                row["record_id"]
                for row in await self._db.fetch(
                    SQL["released_records"], [head.record_id for head in heads]
                )
            }
            for head in heads:
                await rescan.read(head, released=head.record_id in released)
            # Marked read even when a flag was refused: the refusal is audited and counted,
            # and a record the Gate will not change must not stall every later pass. The
            # versions this pass wrote were read by this detector too.
            await self._db.execute(
                SQL["mark_screened"], rescan.take_read(heads), self._screener.version
            )
        log.info(
            "self_healing.pii_rescan", detector=self._screener.version, **rescan.report.summary()
        )
        return rescan.report


#: Times a derived record that keeps moving is raised to sensitive before it counts refused.
PROPAGATION_ATTEMPTS = 3


class _Pass:
    """The state of one rescan run: its report and the versions it changed or wrote."""

    def __init__(
        self,
        gate: LibrarianGate,
        db: DatabaseAdapter,
        metrics: EngramMetrics,
        screener: Screener,
        release: Release | None = None,
    ) -> None:
        self._gate = gate
        self._db = db
        self._metrics = metrics
        self._screener = screener
        self._release = release
        self.report = RescanReport()
        self._changed: set[UUID] = set()
        self._written: list[UUID] = []
        self._unread: set[UUID] = set()

    def take_read(self, heads: Sequence[MemoryRecord]) -> list[UUID]:
        """The versions of a batch to mark read: those read and those written, but a flag
        whose summaries could not be undone (a later run tries again)."""
        read = [head.id for head in heads] + self._written
        self._written = []
        return [version for version in read if version not in self._unread]

    async def read(self, head: MemoryRecord, *, released: bool) -> None:
        """Screen one head: flag what a caller may still read; for a record already held as
        sensitive for PII, make sure what derives from it is too."""
        if head.id in self._changed:
            return  # made sensitive earlier in this pass (propagation)
        self.report.scanned += 1
        previous = head.metadata.get("pii")
        if head.access_level is AccessLevel.SENSITIVE:
            if isinstance(previous, dict):
                await self._propagate(head, previous)
                if previous.get("found_by") == "rescan" and "propagated_from" not in previous:
                    # a run that stopped after the flag (a crash, a failed release) left the
                    # summaries of this source raised over its clean sources: undo them now
                    await self._unconsolidate(head)
            return
        kinds = list(self._screener.kinds(screened_text(head)))
        if released and isinstance(previous, dict):
            # An admin read it and released it for what was found then; only a new kind of
            # finding puts it back in quarantine.
            seen = set(previous.get("kinds") or ())
            kinds = [kind for kind in kinds if kind not in seen]
        if kinds:
            await self._flag(head, kinds)

    async def _flag(self, head: MemoryRecord, kinds: list[str]) -> None:
        finding = {"kinds": kinds, "detector": self._screener.version, "found_by": "rescan"}
        result = await self._sensitive(head, finding)
        if result is None:
            return
        if not _applied(result):
            self.report.refused += 1
            log.warning("self_healing.pii_flag_refused", record_id=str(head.record_id))
            return
        self.report.flagged += 1
        self.report.flagged_ids.append(str(head.record_id))
        if not _gate_flagged(result):  # the Gate's own screening counted it otherwise
            self._metrics.pii_flags.labels(detector=self._screener.label).inc()
        await self._propagate(head, finding)
        await self._unconsolidate(head)

    async def _unconsolidate(self, source: MemoryRecord) -> None:
        """A summary of the flagged source was raised with it (above), so the facts of its
        other sources would be readable nowhere at their own level (they are consolidated
        into a summary their readers may no longer read). Undo the items that consumed the
        source: the summary is forgotten (at ``sensitive``, so its history stays hidden
        from them), and every source is active again, the flagged one at ``sensitive``; the
        next pass consolidates the clean ones without it (ADR-018)."""
        if self._release is None or source.status is not MemoryStatus.CONSOLIDATED:
            return
        try:
            await self._release(source.record_id)
        except EngramError as exc:  # left unread: the next run reads it and tries again
            self.report.refused += 1
            log.warning(
                "self_healing.pii_release_failed",
                record_id=str(source.record_id),
                error=type(exc).__name__,
            )
            current = await store.head(self._db, source.record_id)
            if current is not None:
                self._unread.add(current.id)
                self._changed.add(current.id)

    async def _propagate(self, source: MemoryRecord, finding: dict[str, Any]) -> None:
        """Make every live record derived from ``source`` sensitive too. A derived record
        that moves on while it is raised is raised again as it is now: its new version was
        screened for its own text, not for what it inherits, and ``source`` is marked read
        after this pass, so no later pass would come back to it."""
        inherited = {**finding, "propagated_from": str(source.record_id)}
        carrying = None if "propagated_from" in finding else await self._carrying(source)
        rows = await self._db.fetch(SQL["derived_heads"], source.record_id, carrying)
        released = (
            {
                row["record_id"]
                for row in await self._db.fetch(
                    SQL["released_records"], [row["record_id"] for row in rows]
                )
            }
            if rows
            else set()
        )
        for row in rows:
            derived: MemoryRecord | None = store.record_from_row(row)
            if derived is not None and row["record_id"] in released and _covered(derived, finding):
                continue  # an admin released it knowing these kinds (as read() treats it)
            for _ in range(PROPAGATION_ATTEMPTS):
                if derived is None or derived.status is MemoryStatus.FORGOTTEN:
                    break
                if derived.access_level is AccessLevel.SENSITIVE:
                    break
                result = await self._sensitive(derived, inherited)
                if result is not None and result.decision is not GateDecision.CONFLICT:
                    if _applied(result):
                        self.report.propagated += 1
                    else:
                        self.report.refused += 1
                    break
                derived = await store.head(self._db, derived.record_id)
            else:
                self.report.refused += 1
                log.warning("self_healing.pii_propagation_failed", record_id=str(row["record_id"]))

    async def _carrying(self, source: MemoryRecord) -> list[UUID]:
        """The versions of ``source``'s record that carry personal data: held at
        ``sensitive`` for a finding of their own, or where this detector finds some. A record
        derived from another version (one that its readers could read, with nothing found in
        it) inherits nothing: raising it would take it from its readers for text they never
        had (hostile pass AK). A finding inherited from an ancestor taints every version."""
        chain = await store.version_chain(self._db, source.record_id)
        return [
            version.id
            for version in chain
            if _own_finding(version) or self._screener.kinds(screened_text(version))
        ]

    async def _sensitive(self, head: MemoryRecord, finding: dict[str, Any]) -> GateResult | None:
        """Raise ``head`` to sensitive through the Gate; None when it moved on since it was
        read (its new version was screened when it was written)."""
        current = await store.head(self._db, head.record_id)
        if current is None or current.id != head.id:
            return None
        # The copy keeps the head's event time (the fact did not change) and its ingestion
        # time, which the store ignores: a version is stamped with its own transaction's time
        # and closes the head at that instant (store.insert_version; test_rescan_timeline).
        proposal = head.model_copy(
            update={
                "access_level": AccessLevel.SENSITIVE,
                "metadata": {**head.metadata, "pii": finding},
            }
        )
        result = await self._gate.evaluate(_update(head, proposal))
        self._changed.add(head.id)
        if result.modified_record is not None and _applied(result):
            # The Gate stores a self-healing change unread (screened_with NULL): a later run
            # reads it again, and propagates, unless this one finishes (mark_screened, run()).
            written = result.modified_record.id
            self._written.append(written)
            self._changed.add(written)
        return result


def _own_finding(version: MemoryRecord) -> bool:
    """Whether ``version`` is held at ``sensitive`` for personal data found in it (not
    passed on from another record)."""
    finding = version.metadata.get("pii")
    return (
        version.access_level is AccessLevel.SENSITIVE
        and isinstance(finding, dict)
        and "propagated_from" not in finding
    )


def _covered(record: MemoryRecord, finding: dict[str, Any]) -> bool:
    """Whether every kind of ``finding`` is among the kinds ``record`` was held for when an
    admin released it (its ``metadata.pii``)."""
    held = record.metadata.get("pii")
    kinds = set(held.get("kinds") or ()) if isinstance(held, dict) else set()
    return set(finding.get("kinds") or ()) <= kinds


def _applied(result: GateResult) -> bool:
    return result.decision is GateDecision.APPROVED and result.outcome is WriteOutcome.UPDATED


def _gate_flagged(result: GateResult) -> bool:
    return any(c.name == PII and c.data.get("quarantined") for c in result.layer1_checks)
