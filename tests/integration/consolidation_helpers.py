"""What the consolidation tests share: the topics they write, an engine with other settings,
a read of a record's current version, and batches of one access level made to fail."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import asyncpg

from engram import Kernel
from engram.memory.consolidation import (
    ConsolidationEngine,
    ConsolidationSettings,
    ConsolidationTrigger,
    ExtractiveSummarizer,
)
from engram.memory.types import AccessLevel, MemoryRecord

DEEP = ConsolidationTrigger.SCHEDULED_DEEP
DAY = datetime(2026, 4, 2, 9, 0, tzinfo=UTC)

#: One thread of events (a merge).
INCIDENT = [
    "Paged at 02:10 for checkout-api: p99 latency above 2 s on the payment step.",
    "Rolled checkout-api back to v4.2.0 at 02:31; latency on the payment step recovered.",
    "Root cause of the checkout-api incident: the connection pool was capped at 20 in v4.3.0.",
]
#: One observation made again and again (a promotion).
LATE_ETL = [
    "The nightly orders_daily ETL finished at 06:40 again, well past its 06:00 deadline.",
    "orders_daily ETL was late again this morning and only finished at 06:55.",
    "Once more the nightly orders_daily ETL missed 06:00 and completed at 06:35.",
    "The orders_daily nightly ETL ran late again today, finishing at 06:50.",
]


def engine_with(
    kernel: Kernel, *, clock: Callable[[], float] = time.monotonic, **settings: Any
) -> ConsolidationEngine:
    """An engine on ``kernel``'s database and Gate with other settings (and clock)."""
    return ConsolidationEngine(
        db=kernel.db,
        gate=kernel.gate,
        events=kernel.events,
        metrics=kernel.metrics,
        summarizer=ExtractiveSummarizer(),
        settings=ConsolidationSettings(**settings),
        clock=clock,
    )


async def head_of(kernel: Kernel, record_id: UUID) -> MemoryRecord:
    """The current version of a record whatever its status (an admin read, no read counted)."""
    records = await kernel.admin_temporal.query(
        record_id=record_id, include_consolidated=True, include_forgotten=True
    )
    assert len(records) == 1
    return records[0]


async def fail_summaries(admin_url: str, level: AccessLevel, *, fail: bool = True) -> None:
    """Make every consolidated record of ``level`` fail to insert (``fail``), or stop doing
    so: a trigger raising in the batch's transaction, a real error the adapter does not
    retry, so each batch of that level fails whole and nothing of it is written."""
    name = f"no_{level.value}_summary"
    admin = await asyncpg.connect(admin_url)
    try:
        if not fail:
            await admin.execute(f"DROP TRIGGER {name} ON engram.memories")
            return
        await admin.execute(
            f"CREATE OR REPLACE FUNCTION engram.{name}() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN RAISE EXCEPTION 'no {level.value} summary'; END $$"
        )
        await admin.execute(
            f"CREATE TRIGGER {name} BEFORE INSERT ON engram.memories FOR EACH ROW "
            f"WHEN (NEW.consolidation_path = 'slow' AND NEW.access_level = '{level.value}') "
            f"EXECUTE FUNCTION engram.{name}()"
        )
    finally:
        await admin.close()
