"""Gaps pass AG left open (2026-11-29), closed the next session, each with the test that
showed it. Real embedded PostgreSQL, the real embedding model and the real command line."""

from __future__ import annotations

import asyncio
import json

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
