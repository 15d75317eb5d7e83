"""``engram consolidate`` and ``engram consolidation`` as an operator runs them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from engram import open_kernel
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.types import MemoryRecord, MemoryType
from tests.e2e.test_cli_admin import _cli, _json, _lines
from tests.integration.gate_helpers import BOSS, create

THREAD = [
    "Paged at 02:10 for checkout-api: p99 latency above 2 s on the payment step.",
    "Rolled checkout-api back to v4.2.0 at 02:31; latency on the payment step recovered.",
    "Root cause of the checkout-api incident: the connection pool was capped at 20 in v4.3.0.",
]


async def _seed(data_dir: Path, embedder: FastembedEmbedder) -> None:
    settings = EngramSettings(database_url=None, data_dir=data_dir)
    start = datetime(2026, 4, 2, 9, 0, tzinfo=UTC)
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        for n, text in enumerate(THREAD):
            record = MemoryRecord.draft(
                MemoryType.EPISODE,
                text,
                source_agent=BOSS.agent_id,
                event_time=start + timedelta(hours=n),
            )
            result = await kernel.gate.evaluate(create(record, BOSS))
            assert result.record_id is not None


async def test_preview_run_list_show_and_roll_back(
    tmp_path: Path, model_dir: Path, embedder: FastembedEmbedder
) -> None:
    """A dry run writes nothing; a pass makes one batch that list/show report; a rollback
    restores the sources and a second one is refused with the business exit code."""
    await _seed(tmp_path, embedder)
    preview = _json(_cli(tmp_path, model_dir, "consolidate", "--dry-run", "--json"))
    assert (preview["dry_run"], len(preview["planned"]), preview["batches"]) == (True, 1, [])
    assert [] == _lines(_cli(tmp_path, model_dir, "consolidation", "list", "--json"))

    done = _json(_cli(tmp_path, model_dir, "consolidate", "--trigger", "scheduled_deep", "--json"))
    assert (done["created"], done["consumed"]) == (1, 3)
    (batch,) = _lines(_cli(tmp_path, model_dir, "consolidation", "list", "--json"))
    shown = _json(_cli(tmp_path, model_dir, "consolidation", "show", batch["batch_id"], "--json"))
    assert shown["items"][0]["action"] == "merge"
    assert len(shown["consumed"]) == 3

    undone = _json(
        _cli(tmp_path, model_dir, "consolidation", "rollback", batch["batch_id"], "--json")
    )
    assert (len(undone["retired"]), len(undone["restored"])) == (1, 3)
    again = _cli(tmp_path, model_dir, "consolidation", "rollback", batch["batch_id"])
    assert 4 == again.returncode
    assert "rolled back already" in again.stderr
    missing = _cli(
        tmp_path, model_dir, "consolidation", "show", "00000000-0000-0000-0000-000000000001"
    )
    assert 3 == missing.returncode
