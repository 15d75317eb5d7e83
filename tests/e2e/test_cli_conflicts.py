"""`engram conflicts list / ack` against a data dir with an escalated conflict."""

from __future__ import annotations

import asyncio
import json
import subprocess
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from engram import open_kernel
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from tests.e2e.test_serve import ENGRAM, _env
from tests.integration.gate_helpers import STANDARD, belief, create

WRITER = replace(STANDARD, writes_per_minute=1000)


async def _escalate(data_dir: Path, embedder: FastembedEmbedder) -> str:
    settings = EngramSettings(database_url=None, data_dir=data_dir)
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        for content, when in [
            (
                "The API gateway allows 100 requests per minute per key.",
                datetime(2025, 5, 1, tzinfo=UTC),
            ),
            (
                "The API gateway allows 60 requests per minute per key.",
                datetime(2025, 2, 1, tzinfo=UTC),
            ),
        ]:
            result = await kernel.gate.evaluate(
                create(belief(content, event_time=when, source_confidence=0.9), WRITER)
            )
        for _ in range(250):
            if await kernel.admin_queue.pending():
                break
            await asyncio.sleep(0.02)
    return str(result.record_id)


def _cli(data_dir: Path, model_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own CLI
        [*ENGRAM, "conflicts", *args],
        env=_env(data_dir, model_dir),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_an_admin_lists_and_closes_escalations(
    tmp_path: Path, model_dir: Path, embedder: FastembedEmbedder
) -> None:
    """The queued conflict is listed as JSON, closed by id, and the queue is then empty."""
    data_dir = tmp_path / "data"
    record_id = await _escalate(data_dir, embedder)
    listed = await asyncio.to_thread(_cli, data_dir, model_dir, "list", "--json")
    assert 0 == listed.returncode, listed.stderr
    [line] = listed.stdout.splitlines()
    item = json.loads(line)
    assert (record_id, "memory.conflict_detected") == (item["record_id"], item["kind"])
    for by in ("", "x" * 129, "dana\tlee"):  # as every other --by: 1-128 printable characters
        refused = await asyncio.to_thread(
            _cli, data_dir, model_dir, "ack", str(item["id"]), "--by", by
        )
        assert 2 == refused.returncode, refused.stderr
        assert "--by" in refused.stderr
    still = await asyncio.to_thread(_cli, data_dir, model_dir, "list", "--json")
    assert [item["id"]] == [json.loads(line)["id"] for line in still.stdout.splitlines()]
    closed = await asyncio.to_thread(
        _cli, data_dir, model_dir, "ack", str(item["id"]), "--by", "dana"
    )
    assert 0 == closed.returncode, closed.stderr
    again = await asyncio.to_thread(_cli, data_dir, model_dir, "list")
    assert "no open escalations" in again.stdout
    missing = await asyncio.to_thread(_cli, data_dir, model_dir, "ack", str(item["id"]))
    assert 3 == missing.returncode  # not found, as documented
    assert "no open escalation" in missing.stderr
