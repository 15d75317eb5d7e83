"""A private, migrated PostgreSQL for one benchmark run, shared by the benchmark scripts."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import uvloop

from engram.config import EngramSettings
from engram.infra import migrate
from engram.infra.embedded_server import EmbeddedPostgres
from engram.memory.types import AccessLevel, CallerIdentity, TrustLevel
from engram.observability.logging import configure_logging

DATABASE = "engram_bench"


@asynccontextmanager
async def scratch_server(prefix: str) -> AsyncIterator[EmbeddedPostgres]:
    """An embedded server in a temporary directory with ``DATABASE`` migrated to head; the
    server is stopped and the directory removed on exit (``server.pgdata`` is its data)."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        server = EmbeddedPostgres(Path(tmp) / "pg")
        await asyncio.to_thread(server.start)
        try:
            await migrate.ensure_database(server.admin_url(), DATABASE)
            await asyncio.to_thread(migrate.upgrade, server.admin_url(DATABASE))
            yield server
        finally:
            await asyncio.to_thread(server.stop)


def runtime_settings(server: EmbeddedPostgres, **extra: Any) -> EngramSettings:
    """Settings of a kernel on ``DATABASE`` as the runtime role (already migrated)."""
    return EngramSettings(
        database_url=server.url(user="engram_runtime", database=DATABASE),
        migrate_on_start=False,
        **extra,
    )


def report(measurement: Coroutine[Any, Any, dict[str, Any]]) -> None:
    """Run a benchmark's measurement and print its one JSON object; stdout carries nothing
    else (logs go out as JSON, warnings only)."""
    configure_logging("warning", "json")
    print(json.dumps(uvloop.run(measurement), indent=2))


def bulk_writer(agent_id: str) -> CallerIdentity:
    """A trusted writer without a rate limit, for seeding a benchmark's data in one go (the
    rate limit is not what such a benchmark measures)."""
    return CallerIdentity(
        agent_id=agent_id,
        trust_level=TrustLevel.TRUSTED,
        max_write_level=AccessLevel.SYSTEM,
        max_read_level=AccessLevel.SENSITIVE,
        writes_per_minute=1e9,
    )
