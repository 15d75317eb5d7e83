"""A COMMIT that succeeded but whose acknowledgement never reached the kernel, made with
real faults: every synchronous commit waits for a standby that does not exist (the server
setting ``synchronous_standby_names``, as on a cluster with a synchronous standby), the
statement to cut is terminated while it waits (``pg_terminate_backend``: "the transaction has
already committed locally"), and the setting is reset so that the retry's commit goes
through. Other statements caught waiting are released with ``pg_cancel_backend``, which
answers them as committed. The setting is the whole server's: it is set and reset within one
test, on the test session's private cluster (tests run one at a time)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

import asyncpg

T = TypeVar("T")

#: What pg_stat_activity shows of the Gate's one-statement writes (the first kilobyte: the
#: comment naming their parameters), to cut their acknowledgement instead of a COMMIT's.
CREATE_AT_ONCE = "as store's insert_version"
UPDATE_AT_ONCE = "as create_at_once, the version being the next"

_WAITING = (
    "SELECT pid, query FROM pg_stat_activity WHERE usename = 'engram_runtime' "
    "AND datname = current_database() AND wait_event = 'SyncRep'"
)


async def _standby(admin: asyncpg.Connection, names: str | None) -> None:
    if names is None:
        await admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
    else:
        await admin.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
    await admin.execute("SELECT pg_reload_conf()")
    # The checkpointer publishes whether commits wait for a standby when it has read the
    # file again; a commit before that does not wait.
    await asyncio.sleep(0.3)


async def with_lost_ack(admin_url: str, call: Awaitable[T], statement: str) -> T:
    """Run ``call`` with the acknowledgement of its first commit whose statement holds
    ``statement`` (``COMMIT`` for a transaction) cut; returns what ``call`` returns."""
    admin = await asyncpg.connect(admin_url)
    try:
        await _standby(admin, "engram_absent_standby")
        task = asyncio.ensure_future(call)
        cut = False
        seen: list[str] = []
        try:
            for _ in range(1000):
                for row in await admin.fetch(_WAITING):
                    seen.append(" ".join(row["query"].split())[:80])
                    if not cut and statement.upper() in row["query"].upper():
                        await admin.execute("SELECT pg_terminate_backend($1)", row["pid"])
                        cut = True
                    else:
                        await admin.execute("SELECT pg_cancel_backend($1)", row["pid"])
                if cut or task.done():
                    break
                await asyncio.sleep(0.01)
        finally:
            await _standby(admin, None)
        for _ in range(100):  # waiters left from before the reset are released
            for row in await admin.fetch(_WAITING):
                await admin.execute("SELECT pg_cancel_backend($1)", row["pid"])
            if task.done():
                break
            await asyncio.sleep(0.02)
        assert cut, f"no {statement} waited for its acknowledgement; seen: {seen}"
        return await task
    finally:
        await admin.close()
