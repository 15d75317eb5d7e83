"""The audit log: one hash-chained row per Gate decision, sealed checkpoints, and verification.

Rows are chained in 16 lanes (``lane = decision_id mod 16``; lane 15 is kept for the decisions
of consolidation's batches, see ``entry.BATCH_LANE``). Appending locks only the lane's
head row, so concurrent evaluations seldom wait for each other; the append draws the row's
``seq`` while it holds the lane, so within a lane seq order is chain order and commit order.
Each row's hash covers the previous row's hash of its lane, the row's ``seq`` and every stored
field (:mod:`engram.memory.audit.entry`): moving a row to another place in the global order
breaks its hash even when the chains of all lanes still link.

Checkpoints (:mod:`engram.memory.audit.checkpoint`) are sealed every ``checkpoint_every``
appends, every ``checkpoint_seconds`` of appending, and on demand (``engram audit
checkpoint``, ``engram audit export``): each commits to every lane's head, to the order of
the rows sealed since the previous checkpoint and to that checkpoint's hash.
:meth:`AuditLog.verify` checks the checkpoints' own chain, then walks all rows in ``seq``
order and names the first one whose hash or link does not hold or that contradicts the
checkpoint sealing it, then checks each lane's tip against ``audit_chain_heads`` and the
given anchors.

What this catches, for an attacker with the owner role who can rewrite rows, heads and
checkpoints and recompute every hash (nothing here is keyed): any edit, removal, insertion
or reordering of rows that a checkpoint sealed, unless the attacker also rewrites every
checkpoint from there on; and even then, anything before a checkpoint kept outside the
database (an anchor) and given back to :meth:`AuditLog.verify`. What it does not catch:
rows after the newest checkpoint (or anchor) rewritten together with their lane heads,
rows forged at the end of the log with fresh seqs, and a tail cut back to the newest
checkpoint together with the checkpoints after it, unless an anchor is newer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import structlog

from engram.errors import DuplicateRequest, EngramError, UniqueViolation
from engram.infra.db import Connection, DatabaseAdapter, Row
from engram.infra.sql import load_queries
from engram.memory.audit.checkpoint import (
    LANES,
    Anchor,
    Checkpoint,
    Coverage,
    Finding,
    OrderDigest,
    VerifyReport,
    check_chain,
    checkpoint_from_row,
    genesis_hash,
    seal_checkpoint,
)
from engram.memory.audit.entry import (
    BATCH_LANE,
    HASH_VERSION,
    AuditEntry,
    canonical_json,
    entry_from_row,
    row_json,
)

__all__ = [
    "HASH_VERSION",
    "LANES",
    "SQL",
    "AuditEntry",
    "AuditLog",
    "VerifyReport",
    "canonical_json",
    "entry_from_row",
    "genesis_hash",
    "row_json",
]

log = structlog.get_logger("engram.memory.audit.log")

SQL = load_queries("engram.memory.audit", "audit.sql")


def duplicate_request(exc: UniqueViolation, entry: AuditEntry) -> DuplicateRequest | None:
    """The :class:`~engram.errors.DuplicateRequest` a unique violation of an append means
    (the agent used the request id before), or None when it means something else."""
    if exc.constraint == "librarian_audit_agent_request_key" and entry.request_id:
        return DuplicateRequest(agent_id=entry.agent_id, request_id=entry.request_id)
    return None


class AuditLog:
    """Appends chained entries, seals checkpoints and verifies both.

    With ``checkpoint_every`` (appends) or ``checkpoint_seconds`` set, an append that lands
    on a multiple of ``checkpoint_every`` in ``seq``, or comes that long after this process
    last sealed, starts a seal in the background (after the append's own commit, which the
    seal waits for). Sealers in several processes need no coordination beyond the database.
    """

    def __init__(
        self, db: DatabaseAdapter, *, checkpoint_every: int = 0, checkpoint_seconds: float = 0.0
    ) -> None:
        self._db = db
        self._every = checkpoint_every
        self._seconds = checkpoint_seconds
        self._seal_lock = asyncio.Lock()
        self._sealing: asyncio.Task[Checkpoint | None] | None = None
        self._last_seal = time.monotonic()

    async def append(self, conn: Connection, entry: AuditEntry) -> int:
        """Chain and insert ``entry`` inside the caller's transaction; returns its ``seq``.

        Call it last in the transaction: the lane stays locked until commit. Raises
        :class:`~engram.errors.DuplicateRequest` when the agent already used the request id.
        """
        try:
            value = await conn.fetchval(
                SQL["append_entry"],
                entry.decision_id,
                entry.request_id,
                entry.occurred_at,
                entry.action,
                entry.decision,
                entry.outcome,
                entry.decision_type,
                entry.reason,
                entry.agent_id,
                entry.caller,
                entry.record_id,
                entry.version_id,
                entry.input_snapshot,
                entry.layer1_checks,
                entry.layer2_decision,
                entry.decision_source,
                entry.duration_ms,
                entry.lane,
                entry.payload(),
            )
        except UniqueViolation as exc:
            duplicate = duplicate_request(exc, entry)
            if duplicate is not None:
                raise duplicate from exc
            raise
        seq = int(value)
        self.appended(seq)
        return seq

    def appended(self, seq: int) -> None:
        """Note that row ``seq`` was appended (by :meth:`append`, or by a statement that
        appends it together with the change it records): a seal may be due."""
        if self._seal_due(seq):
            self._last_seal = time.monotonic()
            self._sealing = asyncio.get_running_loop().create_task(self._seal_quietly())

    def _seal_due(self, seq: int) -> bool:
        if self._sealing is not None and not self._sealing.done():
            return False
        if self._every > 0 and seq % self._every == 0:
            return True
        return self._seconds > 0 and time.monotonic() - self._last_seal >= self._seconds

    async def _seal_quietly(self) -> Checkpoint | None:
        try:
            return await self.seal()
        except EngramError as exc:
            log.warning("audit.seal_failed", error=str(exc))
            return None

    async def drain(self) -> None:
        """Wait for a background seal still running (the kernel does before its pool closes)."""
        if self._sealing is not None:
            await self._sealing

    async def seal(self) -> Checkpoint | None:
        """Seal a checkpoint of every lane's head now and return it; when no row was appended
        since the newest checkpoint (or another process sealed the same moment first), return
        the newest one instead; ``None`` while the log is empty.

        The heads are read once no append holds a lane, in a short transaction; the rows they
        cover are then read for the order digest without holding anything.
        """
        async with self._seal_lock:
            async with self._db.transaction() as conn:
                # The previous checkpoint first: its heads are then no newer than ours.
                latest = await conn.fetchrow(SQL["latest_checkpoint"])
                held = await conn.fetch(SQL["hold_lane_heads"], BATCH_LANE)
                heads = sorted(held, key=lambda head: int(head["lane"]))
            previous = None if latest is None else checkpoint_from_row(latest)
            lane_seqs = [int(head["last_seq"] or 0) for head in heads]
            lane_hashes = [bytes(head["last_hash"]) for head in heads]
            if max(lane_seqs) == 0:
                return None
            if previous is not None and previous.lane_seqs == tuple(lane_seqs):
                return previous
            if previous is not None and any(
                now < then for now, then in zip(lane_seqs, previous.lane_seqs, strict=True)
            ):
                # Only a head moved back by hand does this (a tail cut): never seal over it.
                log.warning("audit.heads_behind_checkpoint", checkpoint=previous.id)
                return previous
            lower = 0 if previous is None else previous.through_seq
            order = await self._order_digest(lower, max(lane_seqs))
            checkpoint = seal_checkpoint(
                previous=previous,
                sealed_at=datetime.now(UTC),
                lane_seqs=lane_seqs,
                lane_hashes=lane_hashes,
                order=order,
            )
            try:
                await self._db.execute(
                    SQL["insert_checkpoint"],
                    checkpoint.id,
                    checkpoint.sealed_at,
                    checkpoint.through_seq,
                    checkpoint.rows_sealed,
                    list(checkpoint.lane_seqs),
                    list(checkpoint.lane_hashes),
                    checkpoint.order_digest,
                    checkpoint.prev_hash,
                    checkpoint.checkpoint_hash,
                )
            except UniqueViolation:
                return await self.latest_checkpoint()  # another process sealed it first
            self._last_seal = time.monotonic()
            log.info(
                "audit.sealed",
                checkpoint=checkpoint.id,
                through_seq=checkpoint.through_seq,
                rows=checkpoint.rows_sealed,
            )
            return checkpoint

    async def _order_digest(self, after: int, through: int, *, batch: int = 5000) -> OrderDigest:
        order = OrderDigest()
        while True:
            page = await self._db.fetch(SQL["order_page"], after, through, batch)
            for row in page:
                order.add(int(row["seq"]), bytes(row["row_hash"]))
            if len(page) < batch:
                return order
            after = int(page[-1]["seq"])

    async def latest_checkpoint(self) -> Checkpoint | None:
        """The newest sealed checkpoint, if any."""
        row = await self._db.fetchrow(SQL["latest_checkpoint"])
        return None if row is None else checkpoint_from_row(row)

    async def checkpoints(self) -> list[Checkpoint]:
        """Every sealed checkpoint, oldest first."""
        return [checkpoint_from_row(row) for row in await self._db.fetch(SQL["checkpoints"])]

    async def by_request(self, agent_id: str, request_id: str) -> AuditEntry | None:
        """The entry written for one agent's request id, if any (idempotent retries look
        here; another agent's use of the same id is not seen)."""
        row = await self._db.fetchrow(SQL["by_request"], agent_id, request_id)
        return None if row is None else entry_from_row(row)

    async def audited(self, conn: Connection, decision_id: UUID) -> bool:
        """True when ``decision_id`` is in the log, as seen inside the caller's transaction."""
        return bool(await conn.fetchval(SQL["audited"], decision_id))

    async def lane_heads(self) -> list[dict[str, Any]]:
        """Each lane's last row and hash: the values to anchor outside the database."""
        rows = await self._db.fetch(SQL["lane_heads"])
        return [
            {
                "lane": int(row["lane"]),
                "last_seq": row["last_seq"],
                "last_hash": bytes(row["last_hash"]).hex(),
            }
            for row in rows
        ]

    async def by_decision(self, decision_id: UUID) -> AuditEntry | None:
        """The entry of one decision."""
        row = await self._db.fetchrow(SQL["by_decision"], decision_id)
        return None if row is None else entry_from_row(row)

    async def count(self, *, since: datetime | None = None, until: datetime | None = None) -> int:
        """Number of entries (``since`` inclusive, ``until`` exclusive, on ``occurred_at``)."""
        if since is None and until is None:
            return int(await self._db.fetchval(SQL["count_entries"]))
        return int(await self._db.fetchval(SQL["count_window"], since, until))

    async def search(
        self,
        *,
        after_seq: int = 0,
        since: datetime | None = None,
        until: datetime | None = None,
        agent_id: str | None = None,
        decision: str | None = None,
        action: str | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """Entries matching the filters (as :func:`row_json`), in ``seq`` order after
        ``after_seq`` (a cursor). ``since`` is inclusive and ``until`` exclusive, on
        ``occurred_at``."""
        settled = await self.settled_seq()
        args = (after_seq, since, until, decision, action, limit, settled)
        if agent_id is None:
            rows = await self._db.fetch(SQL["search"], *args)
        else:
            rows = await self._db.fetch(SQL["search_agent"], *args, agent_id)
        return [row_json(row) for row in rows]

    async def settled_seq(self) -> int:
        """The largest seq no row below can still appear under, read as :meth:`seal` reads the
        heads (an append draws its seq once it holds its lane, and holds it until it commits):
        a page by ``seq`` ends there, so a row committing after a later one is not skipped."""
        async with self._db.transaction() as conn:
            return await self.hold_settled(conn)

    async def hold_settled(self, conn: Connection) -> int:
        """:meth:`settled_seq` in the caller's transaction, whose lanes stay held until it
        ends: no audited change can commit before then, so the transaction's later reads
        see every audited write up to that seq and none past it."""
        held = await conn.fetch(SQL["hold_lane_heads"], BATCH_LANE)
        return max((int(head["last_seq"] or 0) for head in held), default=0)

    async def verify(
        self,
        *,
        batch: int = 2000,
        progress: Callable[[int], None] | None = None,
        anchors: Sequence[Anchor] = (),
    ) -> VerifyReport:
        """Recompute every hash and link, check every row against the checkpoints that seal
        it and every checkpoint against ``anchors``; name the first thing that fails.
        ``progress`` is told how many rows have been checked so far, once per ``batch``."""
        # One snapshot for the walk: in snapshots of their own, a row committed after the last
        # page, or a lower seq committed after a higher one's page, looked cut off (TAMPERED).
        async with self._db.transaction() as conn:
            await conn.execute(SQL["one_snapshot"])
            checkpoints = [checkpoint_from_row(row) for row in await conn.fetch(SQL["checkpoints"])]
            walk = _Walk(Coverage(checkpoints), anchors)
            finding = check_chain(checkpoints)
            if finding is None:
                async for row in _pages(conn, batch):
                    finding = walk.row(row)
                    if finding is not None:
                        break
                    if progress is not None and walk.checked % batch == 0:
                        progress(walk.checked)
                else:
                    finding = walk.finish(await conn.fetch(SQL["lane_heads"]), checkpoints)
        report = VerifyReport(
            ok=finding is None,
            rows_checked=walk.checked,
            checkpoints_checked=len(checkpoints),
            sealed_through_seq=walk.coverage.sealed_through,
            legacy_rows=walk.legacy_rows,
            anchors_checked=len(anchors),
        )
        if finding is None:
            return report
        return replace(
            report,
            first_bad_seq=finding.seq,
            first_bad_decision_id=walk.decision_at(finding.seq),
            problem=finding.problem,
            checkpoint=finding.checkpoint,
        )


async def _pages(conn: Connection, batch: int) -> AsyncIterator[Row]:
    """Every row ``conn`` sees, in ``seq`` order, fetched ``batch`` at a time."""
    last = 0
    while True:
        page = await conn.fetch(SQL["page_after"], last, batch)
        if not page:
            return
        for row in page:
            yield row
        last = int(page[-1]["seq"])


class _Walk:
    """The state of one verification pass over the rows in ``seq`` order."""

    def __init__(self, coverage: Coverage, anchors: Sequence[Anchor]) -> None:
        self.coverage = coverage
        self.anchors = anchors
        self.checked = 0
        self.legacy_rows = 0
        self._expected = {lane: genesis_hash(lane) for lane in range(LANES)}
        self._tips: dict[int, tuple[int, bytes]] = {}
        self._format = 1
        self._current: tuple[int, UUID] | None = None
        self._anchored = {
            head.seq: (head.lane, head.row_hash, anchor.source)
            for anchor in anchors
            for head in anchor.lane_heads
            if head.seq is not None
        }

    def decision_at(self, seq: int | None) -> UUID | None:
        """The decision id of the row at ``seq`` if it is the last row the walk met."""
        if self._current is None or seq != self._current[0]:
            return None
        return self._current[1]

    def row(self, row: Row) -> Finding | None:
        """Check the next row."""
        self.checked += 1
        seq, lane = int(row["seq"]), int(row["lane"])
        prev_hash, row_hash = bytes(row["prev_hash"]), bytes(row["row_hash"])
        version = int(row["hash_version"])
        self._current = (seq, row["decision_id"])
        if version == 1:
            self.legacy_rows += 1
        problem = None
        if lane not in self._expected:
            problem = f"lane {lane} does not exist"
        elif version not in {1, HASH_VERSION}:
            problem = f"is in hash format {version}, which does not exist"
        elif version < self._format:
            problem = "is in hash format 1 after rows in format 2 (its hash was recomputed "
            problem += "without its seq)"
        elif prev_hash != self._expected[lane]:
            problem = "does not link to the previous row of its lane (a row was removed, "
            problem += "inserted or reordered before it)"
        elif entry_from_row(row).digest(prev_hash, seq=seq, version=version) != row_hash:
            problem = "its content or position does not match its hash (the row was edited "
            problem += "or moved)"
        else:
            problem = self._anchor_problem(seq, lane, row_hash)
        if problem is not None:
            return Finding(problem, seq=seq)
        self._format = version
        self._expected[lane] = row_hash
        self._tips[lane] = (seq, row_hash)
        return self.coverage.add(seq, lane, row_hash)

    def _anchor_problem(self, seq: int, lane: int, row_hash: bytes) -> str | None:
        anchored = self._anchored.pop(seq, None)
        if anchored is None or anchored[:2] == (lane, row_hash):
            return None
        return f"is not the row anchored in {anchored[2]} as the head of lane {anchored[0]}"

    def finish(self, heads: Sequence[Row], checkpoints: Sequence[Checkpoint]) -> Finding | None:
        """After the last row: the checkpoints not yet closed, the lane heads, the anchors."""
        finding = self.coverage.finish()
        if finding is not None:
            return finding
        for head in heads:
            lane = int(head["lane"])
            tip = self._tips.get(lane)
            stored = (head["last_seq"], bytes(head["last_hash"]))
            if tip is None and stored[0] is None and stored[1] == genesis_hash(lane):
                continue
            if tip is None or (tip[0], tip[1]) != stored:
                return Finding(
                    f"lane {lane} ends before its recorded head (rows cut off its end)",
                    seq=None if tip is None else tip[0],
                )
        return self._anchors_finding(checkpoints)

    def _anchors_finding(self, checkpoints: Sequence[Checkpoint]) -> Finding | None:
        if self._anchored:  # anchored rows the walk never met
            seq, (lane, _, source) = min(self._anchored.items())
            return Finding(
                f"the row anchored in {source} as the head of lane {lane} is gone (rows were "
                "cut off or the lane rewritten)",
                seq=seq,
            )
        stored = {checkpoint.id: checkpoint for checkpoint in checkpoints}
        for anchor in self.anchors:
            wanted = anchor.checkpoint
            if wanted is None:
                continue
            if wanted.id not in stored:
                return Finding(
                    f"checkpoint {wanted.id}, anchored in {anchor.source}, is gone (the log was "
                    "cut back and its checkpoints removed)",
                    checkpoint=wanted.id,
                )
            if stored[wanted.id].checkpoint_hash != wanted.checkpoint_hash:
                return Finding(
                    f"checkpoint {wanted.id} does not match its anchor in {anchor.source} "
                    "(the log and its checkpoints were rewritten)",
                    checkpoint=wanted.id,
                )
        return None
