"""`engram consolidate` SIGKILLed in the middle of a pass: every batch is whole or absent,
the audit log still rebuilds the store, and the next pass finishes the work (ADR-018)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg

from benchmarks.agent_text import texts
from engram import open_kernel
from engram.config import EngramSettings
from engram.infra.embedded_server import DATABASE
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.consolidation import ConsolidationTrigger
from engram.memory.types import MemoryRecord, MemoryStatus, MemoryType
from tests.e2e.test_serve import ENGRAM, _env
from tests.integration.gate_helpers import BOSS, create
from tests.integration.pass_y_helpers import Summariser, summariser

RECORDS = 400


async def _seed(data_dir: Path, embedder: FastembedEmbedder) -> None:
    settings = EngramSettings(database_url=None, data_dir=data_dir)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        for n, text in enumerate(texts(RECORDS, 7)):
            record = MemoryRecord.draft(
                MemoryType.EPISODE,
                text,
                source_agent=BOSS.agent_id,
                event_time=start + timedelta(hours=n),
            )
            result = await kernel.gate.evaluate(create(record, BOSS))
            assert result.decision.value == "approved", result.reason
        await kernel.events.settled()


async def _batches_committed(pgdata: Path) -> int:
    url = f"postgresql://postgres@/{DATABASE}?host={pgdata}"
    try:
        conn = await asyncpg.connect(url, timeout=2)
    except (OSError, asyncpg.PostgresError):
        return 0
    try:
        return int(await conn.fetchval("SELECT count(*) FROM engram.consolidation_batches"))
    except asyncpg.PostgresError:
        return 0
    finally:
        await conn.close()


async def _consolidate(env: dict[str, str]) -> asyncio.subprocess.Process:
    """`engram consolidate --json` started with ``env``, its output discarded."""
    return await asyncio.create_subprocess_exec(
        *ENGRAM,
        "consolidate",
        "--json",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )


async def _check_whole_and_finish(data_dir: Path, embedder: FastembedEmbedder) -> None:
    """Every batch whole, no consolidated source outside a batch, audit state and chain
    verified; then the next pass consumes what is left."""
    settings = EngramSettings(database_url=None, data_dir=data_dir)
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        batches = await kernel.consolidation.batches(limit=1000)
        assert batches
        in_batches = set()
        for batch in batches:
            for item in batch.items:
                made = await kernel.admin_temporal.get_version_chain(item.record_id)
                assert made
                assert made[-1].status is MemoryStatus.ACTIVE
                for source in item.sources:
                    chain = await kernel.admin_temporal.get_version_chain(source)
                    assert chain[-1].status is MemoryStatus.CONSOLIDATED
                    in_batches.add(source)
        consolidated = await kernel.db.fetch(
            "SELECT record_id FROM memories WHERE superseded_by IS NULL AND status = 'consolidated'"
        )
        assert {row["record_id"] for row in consolidated} == in_batches
        state = await kernel.audit_state.compare(datetime.now(UTC))
        assert state.ok, [d.to_json() for d in state.differences]
        assert (await kernel.audit.verify()).ok
        rest = await kernel.consolidation.run(ConsolidationTrigger.SCHEDULED_DEEP)
        assert rest.consumed
        left = await kernel.db.fetchval(
            "SELECT count(*) FROM memories WHERE superseded_by IS NULL AND status = 'active' "
            "AND consolidation_path = 'fast'"
        )
        assert left < RECORDS // 10  # singletons at most


async def test_a_pass_killed_midway_leaves_whole_batches_only(
    tmp_path: Path, model_dir: Path, embedder: FastembedEmbedder
) -> None:
    """SIGKILL of the consolidating process after its first batches committed: each batch
    row's sources are consolidated versions and its records exist; no source is consolidated
    without a batch; audit state and chain verify; the next pass consumes the rest."""
    await _seed(tmp_path, embedder)
    env = _env(tmp_path, model_dir, ENGRAM_CONSOLIDATION_BATCH_SIZE="10")
    child = await _consolidate(env)
    try:
        deadline = time.monotonic() + 120
        while await _batches_committed(tmp_path / "pg") < 2:
            assert child.returncode is None, "the pass ended before it could be killed"
            assert time.monotonic() < deadline, "no batch committed in time"
            await asyncio.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        assert await asyncio.wait_for(child.wait(), 30) == -signal.SIGKILL
    finally:
        if child.returncode is None:
            child.kill()
    await _check_whole_and_finish(tmp_path, embedder)


async def test_a_pass_killed_while_it_waits_for_the_outside_summariser_leaves_whole_batches(
    tmp_path: Path, model_dir: Path, embedder: FastembedEmbedder
) -> None:
    """`engram consolidate` with an outside summariser: SIGKILL while the model holds one
    call, after the pass has committed batches planned before it. Rule: nothing acknowledged
    is lost and nothing half done remains. Each batch is whole (its records active, its
    sources consolidated, no consolidated source outside a batch), audit state and chain
    verify, and the next pass consumes the rest."""
    await _seed(tmp_path, embedder)
    with summariser(Summariser(special=25)) as model:
        env = _env(
            tmp_path,
            model_dir,
            ENGRAM_CONSOLIDATION_BATCH_SIZE="10",
            ENGRAM_SUMMARIZER_URL=model.url,
            ENGRAM_SUMMARIZER_TIMEOUT_SECONDS="60",
        )
        child = await _consolidate(env)
        try:
            await model.reached(120)
            deadline = time.monotonic() + 20
            while await _batches_committed(tmp_path / "pg") < 1:
                assert child.returncode is None, "the pass ended before it could be killed"
                assert time.monotonic() < deadline, "no batch committed while the call was held"
                await asyncio.sleep(0.05)
            assert model.asked == 25, "the held call was not the one in flight"
            os.kill(child.pid, signal.SIGKILL)
            assert await asyncio.wait_for(child.wait(), 30) == -signal.SIGKILL
        finally:
            if child.returncode is None:
                child.kill()
    await _check_whole_and_finish(tmp_path, embedder)
