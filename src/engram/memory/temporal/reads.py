"""Recording of reads, off the read path.

Reads are counted in memory and flushed to ``memory_access`` in one statement every
``interval`` seconds (or sooner when many are pending). A read never waits for the flush, and a
failed flush is logged and retried with the next one; it never fails a read.

A read is counted with the access level of the version it returned, and stored for every level
at or above it (``reads.sql``): a record's decay, read at its head's level, then counts only
reads its readers could have made, not those of versions kept above them (ADR-009).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from uuid import UUID

import structlog

from engram.infra.db import DatabaseAdapter
from engram.infra.sql import load_queries
from engram.memory.temporal.decay import DAILY_CAP
from engram.memory.types import AccessLevel

log = structlog.get_logger("engram.memory.temporal.reads")
SQL = load_queries("engram.memory.temporal", "reads.sql")

#: A read waiting to be flushed: the record and the access level of the version it returned.
Read = tuple[UUID, AccessLevel]

#: Pending distinct reads (record and level) above which a flush starts at once; beyond twice
#: it, the oldest counts are dropped rather than growing memory without bound while the
#: database is down.
FLUSH_AT = 500
#: How long closing waits for a flush in progress (the database adapter retries a failed
#: statement after 1, 2 and 4 s).
CLOSE_WAIT_SECONDS = 10.0


class ReadRecorder:
    """Counts reads per record and level and persists them in the background."""

    def __init__(self, db: DatabaseAdapter, *, interval: float = 1.0) -> None:
        self._db = db
        self._interval = interval
        self._pending: Counter[Read] = Counter()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._flushing = False

    def note(self, reads: Iterable[Read]) -> None:
        """Count one read of each (record, level of the version read); never blocks, never
        raises."""
        self._pending.update(reads)
        if len(self._pending) > 2 * FLUSH_AT:
            for read, _ in self._pending.most_common()[2 * FLUSH_AT :]:
                del self._pending[read]
        if self._task is None or self._task.done():
            delay = 0.0 if len(self._pending) >= FLUSH_AT else self._interval
            self._task = asyncio.get_running_loop().create_task(self._flush_later(delay))

    async def _flush_later(self, delay: float) -> None:
        if delay and not self._closed:
            await asyncio.sleep(delay)
        await self.flush()

    async def flush(self) -> int:
        """Write pending counts now; returns how many (record, level) counts were written."""
        if not self._pending:
            return 0
        batch, self._pending = self._pending, Counter()
        reads = list(batch)
        ids = [record_id for record_id, _ in reads]
        levels = [level.value for _, level in reads]
        counts = [batch[read] for read in reads]
        self._flushing = True
        try:
            await self._db.execute(SQL["record_reads"], ids, levels, counts, DAILY_CAP)
        except Exception as exc:  # noqa: BLE001 - a failed flush must not fail anyone's read
            self._pending.update(batch)
            log.warning("reads.flush_failed", error=type(exc).__name__, records=len(ids))
            return 0
        except BaseException:
            # Cancelled (a shutdown that could not wait): the counts go back to be written
            # by the next flush; if the statement had committed, they count twice, which a
            # read count survives better than losing them.
            self._pending.update(batch)
            raise
        finally:
            self._flushing = False
        return len(ids)

    async def close(self, *, timeout_seconds: float = CLOSE_WAIT_SECONDS) -> None:
        """Let a flush in progress finish (up to ``timeout_seconds``, its retries included),
        cancel one still waiting for its interval, then flush what is pending (again up to
        ``timeout_seconds``: a shutdown does not hang on a held lock; the counts left are
        logged as abandoned)."""
        self._closed = True
        task = self._task
        if task is not None and not task.done():
            if self._flushing:
                await asyncio.wait({task}, timeout=timeout_seconds)
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        try:
            async with asyncio.timeout(timeout_seconds):
                await self.flush()
        except TimeoutError:
            log.warning("reads.flush_abandoned", records=len(self._pending))
