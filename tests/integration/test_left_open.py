"""Gaps passes AG and AH left open (2026-11-29), closed the next session, each with the test
that showed it. Real embedded PostgreSQL, the real embedding model and the real command line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import asyncpg

from engram import Kernel
from engram.memory.types import MemoryStatus
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DEEP, INCIDENT, head_of
from tests.integration.test_hostile_pass_ag import (
    FORGOTTEN_FACT,
    _forget_while_releases_fail,
    _seed,
    _what_readers_see,
    impatient_kernel,
)
from tests.integration.test_hostile_pass_b import _INIT, start_stdio_mcp
from tests.integration.test_hostile_pass_l import _cli

__all__ = ["impatient_kernel"]  # the fixture shared with pass AG's tests


async def test_engram_consolidate_finishes_lost_releases_before_its_pass(
    impatient_kernel: Kernel, database: ScratchDatabase
) -> None:
    """The scheduled passes begin with the sweep of releases the outbox gave up on; the
    operator's `engram consolidate` did not, so a pass run by hand planned over a summary
    that still stated a source the agent had forgotten, and left it standing. It now sweeps
    first, under the same lock, and says what it finished (`releases_swept` in `--json`)."""
    kernel = impatient_kernel
    ids = await _seed(kernel, INCIDENT)
    (made,) = (await kernel.consolidation.run(DEEP)).created
    await _forget_while_releases_fail(kernel, database, ids[2])
    assert (await head_of(kernel, made)).status is not MemoryStatus.FORGOTTEN

    preview = await asyncio.to_thread(_cli, database, "consolidate", "--dry-run", "--json")
    assert 0 == preview.returncode, preview.stderr[-2000:]
    assert "releases_swept" not in json.loads(preview.stdout)  # a preview writes nothing
    assert (await head_of(kernel, made)).status is not MemoryStatus.FORGOTTEN

    done = await asyncio.to_thread(_cli, database, "consolidate", "--json")

    assert 0 == done.returncode, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert (1, 0) == (report["releases_swept"], report["releases_failed"])
    assert (await head_of(kernel, made)).status is MemoryStatus.FORGOTTEN
    seen = await _what_readers_see(kernel, "checkout-api connection pool root cause")
    assert seen
    assert not [text for text in seen if FORGOTTEN_FACT in text]
    text = await asyncio.to_thread(_cli, database, "consolidate")
    assert 0 == text.returncode, text.stderr[-2000:]
    assert "release" not in text.stdout  # nothing left to finish: nothing said


def test_stdio_mcp_reading_a_file_checks_each_line_as_over_a_pipe(
    database: ScratchDatabase, model_dir: Path, tmp_path: Path
) -> None:
    """`engram mcp < calls.jsonl`: the event loop cannot watch a regular file, so stdin was
    handed to the SDK's own reader, which skips the checks every line gets over a pipe: a line
    that is not UTF-8 was decoded with replacement marks and its content stored, and text that
    is not JSON went unanswered. A file is now read line by line with the same checks. (The
    end of the file ends the session and the SDK cancels calls still running, so the test
    waits for no answer after the two lines' own.)"""
    calls = tmp_path / "calls.jsonl"
    calls.write_bytes(
        _INIT
        + b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"remember",'
        + b'"arguments":{"type":"belief","content":"The build host is caf\xe9-01."}}}\n'
        + b"this is not json\n"
    )
    with calls.open("rb") as stdin:
        process = start_stdio_mcp(database, model_dir, "file-client", stdin=stdin)
        out, _ = process.communicate(timeout=120)
    answers: list[dict[str, Any]] = [json.loads(line) for line in out.splitlines()]
    assert 5 not in [a.get("id") for a in answers], "the line that is not UTF-8 was taken"
    errors = [(a["id"], a["error"]["code"]) for a in answers if "error" in a]
    assert [(None, -32700), (None, -32700)] == errors, answers
    stored = asyncio.run(_count_memories(database))
    assert 0 == stored


async def _count_memories(database: ScratchDatabase) -> int:
    conn = await asyncpg.connect(database.admin_url)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM engram.memories"))
    finally:
        await conn.close()
