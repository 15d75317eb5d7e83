"""Faults found by reviewing passes AF and AG (2026-11-29), each with the test that showed it.

Real embedded PostgreSQL and the real embedding model, as the passes' own tests.
"""

from __future__ import annotations

import pytest

from engram import Kernel
from tests.integration import test_http_api as http_api
from tests.integration.test_http_api import BELIEF, Api, assert_problem

api = http_api.api


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
