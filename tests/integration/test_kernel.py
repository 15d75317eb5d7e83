"""open_kernel: embedded default, external URL, migrations on start, readiness."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import asyncpg
import psutil

from engram import open_kernel
from engram.config import EngramSettings
from engram.infra import migrate
from engram.infra.events import Event
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.observability.health import CheckOutcome
from tests.conftest import ScratchDatabase


def _postgres_serving(pgdata: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["name", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if process.info["name"] == "postgres" and str(pgdata.resolve()) in " ".join(cmdline):
            found.append(process)
    return found


def _by_name(outcomes: list[CheckOutcome]) -> dict[str, bool]:
    return {outcome.name: outcome.ok for outcome in outcomes}


async def test_external_database_at_head_is_ready(
    database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """With a URL the kernel uses that server, and reports ready when the schema is at head."""
    settings = EngramSettings(database_url=database.runtime_url, migrate_on_start=False)
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        assert not kernel.embedded
        assert kernel.head_revision == await kernel.schema_revision()
        assert dict.fromkeys(
            (
                "database",
                "migrations",
                "embedding_model",
                "gate",
                "audit_log",
                "consolidation_backlog",
            ),
            True,
        ) == _by_name(await kernel.health.run())
        assert "engram_runtime" == await kernel.db.fetchval("SELECT current_user")


async def test_unmigrated_database_is_not_ready(
    empty_database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """Without a migration URL nothing is migrated, and readiness names the missing schema."""
    settings = EngramSettings(database_url=empty_database.runtime_url)
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        outcomes = {outcome.name: outcome for outcome in await kernel.health.run()}
    assert outcomes["database"].ok
    assert not outcomes["migrations"].ok
    assert outcomes["embedding_model"].ok


async def test_migration_url_migrates_on_start(
    empty_database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """Given the migration URL, the kernel brings an empty database to head before serving."""
    settings = EngramSettings(
        database_url=empty_database.runtime_url,
        migration_database_url=empty_database.admin_url,
    )
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        assert kernel.head_revision == await kernel.schema_revision()
        assert all(_by_name(await kernel.health.run()).values())


async def test_embedded_default_starts_migrates_stops_and_keeps_data(
    tmp_path: Path, embedder: FastembedEmbedder
) -> None:
    """No URL: a private server in the data dir, stopped on exit; a second start reuses it."""
    # No reuse of a check's outcome, so that asking again probes again.
    settings = EngramSettings(
        database_url=None, data_dir=tmp_path / "data", readiness_cache_seconds=0
    )
    pgdata = settings.pgdata_dir
    agent = uuid.uuid4()
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        assert kernel.embedded
        assert _postgres_serving(pgdata)
        checks = _by_name(await kernel.health.run())
        for _ in range(3):  # the Gate probe's 200 ms budget can pass on a loaded 2-core machine
            if checks["gate"]:
                break
            checks = _by_name(await kernel.health.run())
        assert all(checks.values()), checks
        await kernel.db.execute(
            "INSERT INTO agents (id, name, token_hash, token_prefix, trust_level) "
            "VALUES ($1, 'keeper', $2, 'eng_keep', 'trusted')",
            agent,
            b"\x09" * 32,
        )
    assert [] == _postgres_serving(pgdata)
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        assert agent == await kernel.db.fetchval("SELECT id FROM agents WHERE name = 'keeper'")
        assert kernel.timings.migrations < 5
    assert [] == _postgres_serving(pgdata)


async def test_a_kernel_opened_behind_head_starts_its_deliveries_once_migrated(
    empty_database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """A kernel opened on a schema behind head (``ENGRAM_MIGRATE_ON_START=false``) starts no
    delivery: neither the outbox's events of a previous run nor the webhook relay. Once
    ``engram migrate`` had run, it became ready but still delivered none of them until a
    restart (hostile pass AI); the first readiness check that finds the schema current now
    starts them."""
    await asyncio.to_thread(migrate.upgrade, empty_database.admin_url, "0022")
    admin = await asyncpg.connect(empty_database.admin_url)
    try:  # an event a previous run committed and never delivered
        left = await admin.fetchval(
            "INSERT INTO engram.outbox (event_type, aggregate_id, payload)"
            " VALUES ('memory.created', gen_random_uuid(), '{}') RETURNING aggregate_id"
        )
    finally:
        await admin.close()
    delivered: list[Event] = []

    async def collect(event: Event) -> None:
        delivered.append(event)

    settings = EngramSettings(
        database_url=empty_database.runtime_url,
        migrate_on_start=False,
        webhook_url="http://127.0.0.1:9/hooks/engram",
    )
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        kernel.events.subscribe("memory.created", collect)
        assert not _by_name(await kernel.health.run())["migrations"]
        await asyncio.sleep(0.3)
        assert [] == delivered
        relay = kernel.webhook_relay
        assert relay is not None
        assert relay._task is None

        await asyncio.to_thread(migrate.upgrade, empty_database.admin_url)

        # two readiness checks at once (a probe and a scrape): the deliveries start once
        both = await asyncio.gather(kernel.health.run(), kernel.health.run())
        assert all(_by_name(outcomes)["migrations"] for outcomes in both)
        for _ in range(300):
            if delivered:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        assert [left] == [event.aggregate_id for event in delivered]
        assert relay._task is not None
        assert not relay._task.done()
