"""PATCH and DELETE of a record the caller cannot find over REST: an unknown id, one hidden
from it, one forgotten. Each is answered 404, as a read of it is, and is audited as a refused
write like any other bad input (non-negotiable 3); it used to be answered 404 before the Gate
saw it, so no audit row recorded the attempt. Answers for a hidden and an unknown id do not
differ. Real embedded PostgreSQL and the real embedding model."""

from __future__ import annotations

import re
import uuid
from typing import Any

from engram import Kernel
from engram.memory.types import TrustLevel
from tests.integration import test_http_api as http_api
from tests.integration.test_http_api import Api, assert_problem

api = http_api.api

HIDDEN = {"type": "belief", "content": "The board meets on the third Thursday at the Oslo office."}
PLAIN = {"type": "belief", "content": "The ledger service runs on PostgreSQL 16 in eu-west-1."}
_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _shape(problem: dict[str, Any]) -> dict[str, Any]:
    """A problem body with record ids written out of it."""
    return {k: _ID.sub("<id>", v) if isinstance(v, str) else v for k, v in problem.items()}


async def _refusals(kernel: Kernel, agent: str) -> list[tuple[str, str]]:
    rows = await kernel.db.fetch(
        "SELECT action, reason FROM librarian_audit WHERE agent_id = $1 AND decision = 'rejected'"
        " ORDER BY seq",
        agent,
    )
    return [(r["action"], r["reason"]) for r in rows]


async def test_patch_and_delete_of_ids_the_caller_cannot_find_are_404_and_audited(
    api: Api, kernel: Kernel
) -> None:
    """A restricted agent patches and deletes an unknown id and a record above its level: four
    404s, the hidden id's answers equal to the unknown one's, four refusals in the audit log
    under its name, and the hidden record unchanged."""
    hidden = (await api.write({**HIDDEN, "access_level": "user"}, api.admin)).json()["record_id"]
    helper = await api.agent("helper", TrustLevel.RESTRICTED)
    pinned = {**helper, "If-Match": '"1"'}
    answers = {}
    for name, record_id in (("hidden", hidden), ("unknown", str(uuid.uuid4()))):
        url = f"/v1/memories/{record_id}"
        patched = await api.client.patch(url, json={"content": "moved"}, headers=pinned)
        deleted = await api.client.delete(url, headers=helper)
        answers[name] = [_shape(assert_problem(patched, 404)), _shape(assert_problem(deleted, 404))]
    assert answers["hidden"] == answers["unknown"]
    refused = await _refusals(kernel, "helper")
    assert [action for action, _ in refused] == ["UPDATE", "FORGET"] * 2
    assert all("no record" in reason for _, reason in refused), refused
    head = await kernel.temporal.current(uuid.UUID(hidden))
    assert head is not None
    assert (head.version, head.content) == (1, HIDDEN["content"])


async def test_patch_and_delete_of_a_forgotten_record_are_404_and_audited_once_per_key(
    api: Api, kernel: Kernel
) -> None:
    """After a forget, a PATCH and a DELETE of the record are 404s and audited refusals; the
    DELETE retried under its Idempotency-Key is the same 404 and adds no audit row."""
    made = (await api.write(PLAIN, api.admin)).json()["record_id"]
    url = f"/v1/memories/{made}"
    assert (await api.client.delete(url, headers=api.admin)).status_code == 200
    before = await _refusals(kernel, "local")
    assert_problem(
        await api.client.patch(
            url, json={"content": "x"}, headers={**api.admin, "If-Match": '"1"'}
        ),
        404,
    )
    keyed = {**api.admin, "Idempotency-Key": "forget-again"}
    first = assert_problem(await api.client.delete(url, headers=keyed), 404)
    again = assert_problem(await api.client.delete(url, headers=keyed), 404)
    assert first == again
    after = await _refusals(kernel, "local")
    assert [action for action, _ in after[len(before) :]] == ["UPDATE", "FORGET"]
