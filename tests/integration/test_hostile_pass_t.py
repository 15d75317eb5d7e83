"""Hostile pass T: the surfaces earlier passes touched least (the MCP listing's cursor and
filters, manual job runs under real faults, the operator's ``engram consolidate``).

Every test here failed on the code it was written against; what held is in
``test_hostile_pass_t_held.py``. Real embedded PostgreSQL, the real embedding model, no
mocks: a lock connection is killed with ``pg_terminate_backend``.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from engram import Kernel
from engram.autonomy.schedule import Every
from engram.autonomy.scheduler import Job, JobContext
from engram.memory.types import MemoryType, TrustLevel
from tests.conftest import ScratchDatabase
from tests.integration.scheduler_helpers import Clock, scheduler
from tests.integration.test_hostile_pass_l import _cli
from tests.integration.twin_helpers import Store, twin_a  # noqa: F401 - the fixture

START = datetime(2026, 11, 25, 2, 59, 30, tzinfo=UTC)


def _cursor(plain: str) -> str:
    """A cursor in the form ``list`` returns (base64 of "instant|version id")."""
    return base64.urlsafe_b64encode(plain.encode()).decode().rstrip("=")


async def _three_beliefs(store: Store) -> None:
    reader = await store.agent("reader", TrustLevel.STANDARD)
    for city in ("Oslo", "Lima", "Pune"):
        written = await store.tools.call(
            "remember", {"type": "belief", "content": f"The ledger replica runs in {city}."}, reader
        )
        assert not written.is_error, written.structured_content


async def test_a_list_cursor_at_an_instant_with_no_utc_form_is_refused_not_an_outage(
    twin_a: Store,  # noqa: F811 - the fixture
) -> None:
    """Low. MCP ``list`` decoded its cursor and checked only that the instant had a zone: a
    cursor naming ``0001-01-01T00:00:00+14:00`` (year 0 in UTC) or
    ``9999-12-31T23:59:59-14:00`` (year 10000) reached the driver, which could not send it,
    and the caller was told "engram is temporarily unavailable; retry later" for its own bad
    input, for ever. Such a cursor is now refused as invalid arguments, as every as-of instant
    with no UTC form is; the first and last UTC instants still page normally."""
    await _three_beliefs(twin_a)
    reader = twin_a.principals["reader"]
    for instant in ("0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"):
        cursor = _cursor(f"{instant}|{uuid.uuid4()}")
        answer = await twin_a.tools.call("list", {"cursor": cursor}, reader)
        assert answer.is_error
        error = (answer.structured_content or {})["error"]
        assert "invalid_input" == error["kind"], (instant, error)
        assert "cursor" in error["message"], error
    last = _cursor(f"9999-12-31T23:59:59.999999+00:00|{uuid.uuid4()}")
    answer = await twin_a.tools.call("list", {"cursor": last}, reader)
    assert not answer.is_error
    assert 3 == len((answer.structured_content or {})["records"])


async def test_a_type_named_twice_lists_each_record_once(
    twin_a: Store,  # noqa: F811 - the fixture
) -> None:
    """Medium. MCP ``list`` read each type's records once per time the type was named, so
    ``types: ["belief", "belief", "belief"]`` answered every record three times, filled the
    page with copies and set its cursor after them, so the next page skipped nothing but
    repeated them again; the in-process listing (``TemporalEngine.query``) did the same and
    counted each copy as a read. Each type is now read once."""
    await _three_beliefs(twin_a)
    reader = twin_a.principals["reader"]
    listed = await twin_a.tools.call("list", {"types": ["belief"] * 3, "limit": 5}, reader)
    body = listed.structured_content or {}
    ids = [record["record_id"] for record in body["records"]]
    assert 3 == len(ids) == len(set(ids)), ids
    assert body["next_cursor"] is None
    caller = reader.caller
    found = await twin_a.kernel.temporal.query(
        caller=caller, types=[MemoryType.BELIEF, MemoryType.BELIEF], count_read=False
    )
    assert 3 == len(found) == len({record.record_id for record in found})


@pytest.mark.usefixtures("schedulers")
async def test_a_manual_run_whose_lock_connection_dies_stops_before_another_kernel_claims(
    kernel: Kernel,
) -> None:
    """Medium. ``engram jobs run NAME`` takes the job's advisory lock on a connection of its
    own, but only the polling loop of ``engram serve`` or ``engram worker`` checked that the
    connection was alive: a manual run whose lock connection was killed
    (``pg_terminate_backend``) went on to its end, while another kernel, finding the lock
    free, claimed the job and ran it beside it (two consolidation passes at once, which the
    shared lock exists to prevent), and the manual run was then reported ``abandoned`` after
    doing all its work. A manual run now watches its lock connection as the loop does, and
    stops before another kernel can take the job over."""
    inside: list[str] = []
    release = asyncio.Event()
    overlapped: list[list[str]] = []

    def body_of(who: str) -> Any:
        async def body(context: JobContext) -> Mapping[str, Any]:
            del context
            inside.append(who)
            if len(inside) > 1:
                overlapped.append(list(inside))
            try:
                await release.wait()
            finally:
                inside.remove(who)
            return {}

        return body

    clock = Clock(START)
    every = Every(timedelta(hours=1))
    manual_side = scheduler(kernel, [Job("long", every, body_of("manual"), "test")], clock)
    other = scheduler(kernel, [Job("long", every, body_of("other"), "test")], clock)
    await other.tick()  # the job's first sighting: marked, not run
    manual = asyncio.create_task(manual_side.run_now("long"))
    for _ in range(200):
        if inside:
            break
        await asyncio.sleep(0.05)
    assert ["manual"] == inside
    pid = await kernel.db.fetchval(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted LIMIT 1"
    )
    assert await kernel.db.fetchval("SELECT pg_terminate_backend($1)", pid)
    for _ in range(100):  # the polling interval of these schedulers is 0.05 s
        if not inside:
            break
        await asyncio.sleep(0.05)
    clock.advance(hours=1)
    assert ["long"] == await other.tick()
    await asyncio.sleep(0.3)
    release.set()
    outcome = await asyncio.wait_for(manual, 10)
    await other.wait_idle()
    assert [] == overlapped
    assert ("abandoned", "stopped before it finished") == (
        outcome.outcome,
        outcome.detail.get("error"),
    )
    runs = {run.manual: run.outcome for run in await other.book.runs("long")}
    assert {True: "abandoned", False: "succeeded"} == runs


async def test_engram_consolidate_does_not_run_beside_a_pass_holding_the_lock(
    database: ScratchDatabase,
) -> None:
    """Low. ``engram consolidate`` ran its pass without the consolidation jobs' lock, so an
    operator's pass ran beside a scheduled one of ``engram serve`` or ``engram worker``, which
    ADR-019 says the shared lock prevents ("an operator cannot start a second pass beside a
    scheduled one"; ``engram jobs run`` does take it). It now takes the lock: while another
    session holds it the command exits 4 (busy) and writes nothing, and once it is free the
    pass runs; ``--dry-run``, which writes nothing, still runs beside a pass."""
    holder = await asyncpg.connect(database.admin_url)
    try:
        assert await holder.fetchval(
            "SELECT pg_try_advisory_lock(1701147250, hashtext('consolidation'))"
        )
        busy = await asyncio.to_thread(_cli, database, "consolidate", "--json")
        assert 4 == busy.returncode, (busy.stdout, busy.stderr[-2000:])
        assert "consolidation" in busy.stderr
        preview = await asyncio.to_thread(_cli, database, "consolidate", "--dry-run", "--json")
        assert 0 == preview.returncode, preview.stderr[-2000:]
        assert 0 == await holder.fetchval("SELECT count(*) FROM engram.consolidation_batches")
        await holder.execute("SELECT pg_advisory_unlock_all()")
        done = await asyncio.to_thread(_cli, database, "consolidate", "--json")
        assert 0 == done.returncode, done.stderr[-2000:]
    finally:
        await holder.close()
