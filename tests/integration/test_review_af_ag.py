"""Faults found by reviewing passes AF and AG (2026-11-29), each with the test that showed it.

Real embedded PostgreSQL and the real embedding model, as the passes' own tests.
"""

from __future__ import annotations

import asyncpg
import pytest

from engram import Kernel
from engram.memory.types import MemoryStatus
from tests.conftest import ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.consolidation_helpers import DEEP, INCIDENT, LATE_ETL, head_of
from tests.integration.test_hostile_pass_ag import (
    _forget_while_releases_fail,
    _seed,
    impatient_kernel,
)
from tests.integration.test_http_api import BELIEF, Api, assert_problem

api = http_api.api
__all__ = ["api", "impatient_kernel"]  # fixtures shared with the passes' own tests


@pytest.mark.parametrize("namespace", ["team\n", "team\r\n", "\nteam"])
async def test_a_namespace_with_a_line_break_is_refused_and_audited(
    api: Api, kernel: Kernel, namespace: str
) -> None:
    """A namespace ending in a newline passed the name pattern (``$`` matches before a final
    newline) and made a second namespace that prints exactly like ``team``. It is refused with
    the namespace rule, audited, and nothing is stored."""
    before = await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    body = assert_problem(await api.write({**BELIEF, "namespace": namespace}, api.admin), 422)
    assert "namespace" in body["detail"]
    assert before + 1 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    [entry] = await kernel.audit.search(agent_id="local", decision="rejected")
    assert body["decision_id"] == entry["decision_id"]
    assert 0 == await kernel.db.fetchval("SELECT count(*) FROM memories")


async def test_a_release_that_fails_for_a_reason_of_its_own_does_not_stop_the_pass(
    impatient_kernel: Kernel, database: ScratchDatabase
) -> None:
    """The sweep went on past a release the Gate refused or the database failed, but any
    other error (here a batch row whose item names an action no version knows, written by
    hand) ended the sweep and with it the whole light pass: no level was consolidated. Such a
    release is now counted as failed, and the pass runs."""
    kernel = impatient_kernel
    ids = await _seed(kernel, INCIDENT)
    (made,) = (await kernel.consolidation.run(DEEP)).created
    await _forget_while_releases_fail(kernel, database, ids[2])
    admin = await asyncpg.connect(database.admin_url)
    try:
        await admin.execute(
            "UPDATE engram.consolidation_batches SET items = (SELECT jsonb_agg("
            "jsonb_set(item, '{action}', '\"bogus\"')) FROM jsonb_array_elements(items) AS item)"
        )
    finally:
        await admin.close()
    etl = await _seed(kernel, LATE_ETL)  # a topic due at the next pass

    outcome = await kernel.scheduler.run_now("consolidation_light")

    assert "succeeded" == outcome.outcome, outcome.detail
    assert (0, 1) == (outcome.detail["releases_swept"], outcome.detail["releases_failed"])
    assert {MemoryStatus.CONSOLIDATED} == {(await head_of(kernel, s)).status for s in etl}
    assert (await head_of(kernel, made)).status is not MemoryStatus.FORGOTTEN
