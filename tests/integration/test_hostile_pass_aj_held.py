"""Hostile pass AJ: probes that held (no fix needed); each docstring states the rule probed."""

from __future__ import annotations

import asyncio
import math
import signal
import sys
import uuid
from pathlib import Path

import pytest
from pydantic import ValidationError

from engram import Kernel
from engram.config import EngramSettings
from engram.infra.model_files import DIGESTS, digest, ensure_default_model
from engram.memory.temporal.reads import ReadRecorder
from engram.memory.types import AccessLevel

ROUNDS = 5


async def test_two_kernels_flushing_reads_of_the_same_records_at_once_lose_and_lock_nothing(
    kernel: Kernel,
) -> None:
    """Two read recorders (two kernels' worth) flush reads of the same 60 records at
    different levels, noted in opposite orders, at once, five times: no flush fails (a
    failed one keeps its counts pending) and each level's element holds exactly the reads
    of versions at or below it, the daily cap applied to each."""
    records = [uuid.uuid4() for _ in range(60)]
    first, second = ReadRecorder(kernel.db, interval=60.0), ReadRecorder(kernel.db, interval=60.0)
    for _ in range(ROUNDS):
        first.note([(r, AccessLevel.AGENT) for r in records] * 2)
        first.note([(r, AccessLevel.SENSITIVE) for r in records])
        second.note([(r, AccessLevel.PUBLIC) for r in reversed(records)])
        second.note([(r, AccessLevel.SYSTEM) for r in reversed(records)] * 3)
        written = await asyncio.gather(first.flush(), second.flush())
        assert [120, 120] == written
    rows = await kernel.db.fetch(
        "SELECT access_count, period_count, reinforcements FROM engram.memory_access "
        "WHERE record_id = ANY($1::uuid[])",
        records,
    )
    assert 60 == len(rows)
    per_round = [1, 3, 3, 6, 7]  # public 1; agent 2; system 3; sensitive 1, cumulated upward
    for row in rows:
        assert [ROUNDS * n for n in per_round] == list(row["access_count"])
        assert [ROUNDS * n for n in per_round] == list(row["period_count"])
        assert [5.0] * 5 == list(row["reinforcements"])  # DAILY_CAP for every audience
    await first.close()
    await second.close()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ENGRAM_OUTBOX_MAX_ATTEMPTS", odd)
        for odd in ("0", "-1", "nan", "inf", "1.5", "ten", "", "1001", "9" * 5000)
    ]
    + [
        ("ENGRAM_OUTBOX_RETRY_SECONDS", odd)
        for odd in ("0", "-1", "nan", "inf", "-inf", "ten", "", "301", "1e309", "0.001", "5e-324")
    ],
)
def test_odd_outbox_settings_are_refused_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """ENGRAM_OUTBOX_MAX_ATTEMPTS and ENGRAM_OUTBOX_RETRY_SECONDS of 0, a negative, NaN, an
    infinity, a fraction of an attempt, text, nothing, past their bounds, or 5,000 digits
    are refused when the settings are read, naming the setting; none is read as a default."""
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as refused:
        EngramSettings()
    assert name.removeprefix("ENGRAM_").lower() in str(refused.value)


def test_the_outbox_settings_bounds_are_finite() -> None:
    """The largest values the settings accept give finite waits and a bounded retry count."""
    settings = EngramSettings(outbox_max_attempts=1000, outbox_retry_seconds=300)
    assert math.isfinite(settings.outbox_retry_seconds * 2.0**settings.outbox_max_attempts)


_ASSEMBLE = """
import sys
from pathlib import Path
from engram.infra.model_files import ensure_default_model
ensure_default_model(Path(sys.argv[1]))
"""


async def test_an_assembler_killed_holding_the_model_lock_blocks_no_later_start(
    tmp_path: Path,
) -> None:
    """A process SIGKILLed while it assembles the default model (holding the directory's
    lock, a partial copy on disk) leaves the lock free: the next start assembles the model
    whole, without waiting."""
    model_dir = tmp_path / "models" / "default"
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", _ASSEMBLE, str(model_dir))
    lock = model_dir / ".engram-model.lock"
    for _ in range(500):  # until it holds the lock and has begun to copy
        if lock.exists() and any(model_dir.glob(".*.tmp")):
            break
        await asyncio.sleep(0.01)
    assert lock.exists()
    assert any(model_dir.glob(".*.tmp")), "killed before it began to copy"
    process.send_signal(signal.SIGKILL)
    await process.wait()
    assert await asyncio.wait_for(asyncio.to_thread(ensure_default_model, model_dir), 60)
    assert {name: digest(model_dir / name) for name in DIGESTS} == DIGESTS
