"""Migrations: empty → head → base → head, compared with the checked-in schema snapshot."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path

import asyncpg
import pytest
import structlog.testing

from benchmarks.seed_versions import seed_versions
from engram.errors import MigrationError
from engram.infra import migrate
from tests.conftest import ScratchDatabase
from tests.migrations.catalog import read_catalog

SNAPSHOT = Path(__file__).with_name("schema_snapshot.json")
WRITE = os.environ.get("ENGRAM_WRITE_SNAPSHOT") == "1"


async def test_upgrade_downgrade_upgrade_matches_the_snapshot(
    empty_database: ScratchDatabase,
) -> None:
    """Head's catalog equals the snapshot, base leaves nothing, and head is reachable again."""
    url = empty_database.admin_url
    await asyncio.to_thread(migrate.upgrade, url)
    first = await read_catalog(url)
    if WRITE:
        SNAPSHOT.write_text(_dump(first))
    expected = json.loads(SNAPSHOT.read_text())
    assert expected == first, "schema differs from tests/migrations/schema_snapshot.json"

    await asyncio.to_thread(migrate.downgrade, url, "base")
    emptied = await read_catalog(url)
    for section in (
        "columns",
        "constraints",
        "indexes",
        "triggers",
        "functions",
        "types",
        "storage",
    ):
        assert [] == emptied[section], section
    assert [] == emptied["schema"]
    assert "base" == (await asyncio.to_thread(migrate.current_revision_sync, url) or "base")

    await asyncio.to_thread(migrate.upgrade, url)
    assert first == await read_catalog(url)
    assert migrate.head_revision() == await asyncio.to_thread(migrate.current_revision_sync, url)


def _dump(catalog: dict[str, list[list[object]]]) -> str:
    """One line per catalog row, so a schema change reads as a small diff."""
    sections = []
    for name in sorted(catalog):
        rows = ",\n".join(f"    {json.dumps(row)}" for row in catalog[name])
        sections.append(f'  "{name}": [\n{rows}\n  ]' if rows else f'  "{name}": []')
    return "{\n" + ",\n".join(sections) + "\n}\n"


@pytest.mark.parametrize("stop_at", ["0001", "0002", "0003", "0004", "0005", "0006", "0007"])
async def test_each_revision_downgrades_cleanly(
    empty_database: ScratchDatabase, stop_at: str
) -> None:
    """Stepping down from head to each revision and back up again succeeds."""
    url = empty_database.admin_url
    await asyncio.to_thread(migrate.upgrade, url)
    await asyncio.to_thread(migrate.downgrade, url, stop_at)
    assert stop_at == await asyncio.to_thread(migrate.current_revision_sync, url)
    await asyncio.to_thread(migrate.upgrade, url)
    assert migrate.head_revision() == await asyncio.to_thread(migrate.current_revision_sync, url)


async def test_downgrade_below_0008_refuses_while_rows_are_hashed_with_their_seq(
    empty_database: ScratchDatabase,
) -> None:
    """Rows in audit hash format 2 would not verify without ``hash_version``: stepping down
    past 0008 refuses and leaves the schema at head."""
    url = empty_database.admin_url
    await asyncio.to_thread(migrate.upgrade, url)
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "INSERT INTO engram.librarian_audit (decision_id, occurred_at, action, decision, "
            "outcome, decision_type, reason, agent_id, caller, input_snapshot, layer1_checks, "
            "decision_source, duration_ms, lane, prev_hash, row_hash) VALUES (gen_random_uuid(), "
            "now(), 'CREATE', 'rejected', 'none', 'external', 'x', 'x', '{}', '{}', '[]', 'x', 0, "
            "0, sha256('a'), sha256('b'))"
        )
    finally:
        await conn.close()
    with pytest.raises(MigrationError, match="refusing to downgrade"):
        await asyncio.to_thread(migrate.downgrade, url, "0007")
    assert migrate.head_revision() == await asyncio.to_thread(migrate.current_revision_sync, url)


def test_snapshot_is_not_being_rewritten() -> None:
    """CI never runs with ENGRAM_WRITE_SNAPSHOT=1, which would make the comparison vacuous."""
    assert not (WRITE and os.environ.get("CI")), "ENGRAM_WRITE_SNAPSHOT must not be set in CI"


_ADD_AGENT = (
    "INSERT INTO engram.agents (id, name, token_hash, token_prefix, trust_level, created_at) "
    "VALUES (gen_random_uuid(), $1, sha256(convert_to($1, 'UTF8')), 'engram_x', 'standard', "
    "now() + make_interval(secs => $2))"
)


async def test_0022_refuses_agents_whose_names_differ_only_in_case_and_names_them(
    empty_database: ScratchDatabase,
) -> None:
    """Names unique whatever their case (0022) cannot hold a store where ``LOCAL`` and
    ``local`` were both registered: the upgrade fails naming every such group and how to
    rename, changing nothing (no agent renamed, merged or lost; the schema stays at 0021);
    once one of each group is renamed, it goes through."""
    url = empty_database.admin_url
    await asyncio.to_thread(migrate.upgrade, url, "0021")
    conn = await asyncpg.connect(url)
    try:
        for offset, name in enumerate(["local", "LOCAL", "ops.bot", "Ops.Bot", "OPS.BOT", "solo"]):
            await conn.execute(_ADD_AGENT, name, offset)
        with pytest.raises(MigrationError) as refused:
            await asyncio.to_thread(migrate.upgrade, url)
        message = str(refused.value)
        for group in ("'local', 'LOCAL'", "'ops.bot', 'Ops.Bot', 'OPS.BOT'"):
            assert group in message, message
        assert "solo" not in message
        assert "UPDATE engram.agents SET name" in message
        assert "0021" == await asyncio.to_thread(migrate.current_revision_sync, url)
        names = await conn.fetch("SELECT name FROM engram.agents ORDER BY created_at")
        assert ["local", "LOCAL", "ops.bot", "Ops.Bot", "OPS.BOT", "solo"] == [
            row["name"] for row in names
        ]
        for old, new in (("LOCAL", "local-2"), ("Ops.Bot", "ops.bot-2"), ("OPS.BOT", "ops.bot-3")):
            await conn.execute("UPDATE engram.agents SET name = $2 WHERE name = $1", old, new)
        await asyncio.to_thread(migrate.upgrade, url)
        assert migrate.head_revision() == await asyncio.to_thread(
            migrate.current_revision_sync, url
        )
        assert 6 == await conn.fetchval("SELECT count(*) FROM engram.agents")
    finally:
        await conn.close()


_ACCESS = (
    "INSERT INTO engram.memory_access (record_id, access_count, last_accessed_at, period_start,"
    " period_count, reinforcements)"
    " VALUES ($1, $2::int, now(), current_date, $2::int, least($2::int, 5))"
)
_ACCESS_ROWS = (
    "SELECT record_id, access_count, period_count, reinforcements, "
    "array_positions(last_accessed_at, NULL) AS unread FROM engram.memory_access"
)


async def test_0023_keeps_reads_of_before_for_the_levels_that_could_have_made_them(
    empty_database: ScratchDatabase,
) -> None:
    """Reads counted before 0023 name no level: each record's are kept for the highest
    level any of its versions has had and every level above (every version read was at or
    below it), never below, so a record lowered since shows its new readers no read they
    could not have made; a record without versions keeps them at ``sensitive``, and so does
    one the PII check held there (a quarantine release lowers the level in place, so no
    version remembers it; the finding stays in ``metadata.pii``); the downgrade keeps the
    ``sensitive`` count, which holds every read, as the one count per record of before."""
    url = empty_database.admin_url
    await asyncio.to_thread(migrate.upgrade, url, "0022")
    conn = await asyncpg.connect(url)
    try:
        await seed_versions(conn, records=3, versions_per_record=2)
        lowered, plain, released = await conn.fetchval(
            "SELECT array_agg(DISTINCT record_id ORDER BY record_id) FROM engram.memories"
        )
        await conn.execute(
            "UPDATE engram.memories SET access_level = CASE WHEN version = 1 AND record_id = $1"
            " THEN 'sensitive' ELSE 'agent' END",
            lowered,
        )
        await conn.execute(
            'UPDATE engram.memories SET metadata = metadata || \'{"pii": {"kinds": ["email"]}}\''
            " WHERE record_id = $1 AND superseded_by IS NULL",
            released,
        )
        orphan = uuid.UUID(int=2**128 - 1)
        for record_id, count in ((lowered, 12), (plain, 3), (released, 9), (orphan, 7)):
            await conn.execute(_ACCESS, record_id, count)
        await asyncio.to_thread(migrate.upgrade, url)
        rows = {row["record_id"]: tuple(row.values())[1:] for row in await conn.fetch(_ACCESS_ROWS)}
        # Elements: public, agent, user, system, sensitive.
        assert {
            lowered: ([0, 0, 0, 0, 12], [0, 0, 0, 0, 12], [0, 0, 0, 0, 5], [1, 2, 3, 4]),
            plain: ([0, 3, 3, 3, 3], [0, 3, 3, 3, 3], [0, 3, 3, 3, 3], [1]),
            released: ([0, 0, 0, 0, 9], [0, 0, 0, 0, 9], [0, 0, 0, 0, 5], [1, 2, 3, 4]),
            orphan: ([0, 0, 0, 0, 7], [0, 0, 0, 0, 7], [0, 0, 0, 0, 5], [1, 2, 3, 4]),
        } == rows
        await asyncio.to_thread(migrate.downgrade, url, "0022")
        back = await conn.fetch(
            "SELECT record_id, access_count FROM engram.memory_access ORDER BY record_id"
        )
        before = [(lowered, 12), (plain, 3), (released, 9), (orphan, 7)]
        assert sorted(before) == [tuple(r.values()) for r in back]
    finally:
        await conn.close()


async def test_a_run_waiting_for_another_runs_lock_says_so_and_then_migrates(
    empty_database: ScratchDatabase,
) -> None:
    """Two processes migrating one database run one after the other; the second waited on
    the migration lock without a word, so an operator saw `engram migrate` (or a start)
    hang with nothing logged. It now logs that it waits, naming the holder's backend, and
    goes on once the lock is released."""
    url = empty_database.admin_url
    holder = await asyncpg.connect(url)
    try:
        await holder.execute("SELECT pg_advisory_lock(1701147251, 0)")
        holder_pid = await holder.fetchval("SELECT pg_backend_pid()")
        with structlog.testing.capture_logs() as logs:
            running = asyncio.create_task(asyncio.to_thread(migrate.upgrade, url))
            for _ in range(200):
                if any(e["event"] == "migrations.waiting_for_lock" for e in logs):
                    break
                await asyncio.sleep(0.05)
            waiting = [e for e in logs if e["event"] == "migrations.waiting_for_lock"]
            assert [holder_pid] == [e["holder_pid"] for e in waiting], logs
            assert not running.done()
            await holder.execute("SELECT pg_advisory_unlock(1701147251, 0)")
            await asyncio.wait_for(running, 120)
        assert "migrations.lock_taken" in [e["event"] for e in logs]
        assert migrate.head_revision() == await asyncio.to_thread(
            migrate.current_revision_sync, url
        )
    finally:
        await holder.close()
