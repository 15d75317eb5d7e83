"""Hostile pass H: races that were run and held (kept as regression tests). Each round
starts its paths together over REST with random delays, then checks the invariants of
:func:`tests.integration.race_helpers.broken_invariants` (one live head per record, contiguous
versions, acknowledged writes stored, no source left consolidated without a live summary
nor active beside one, the audit chain and the state rebuilt from it)."""

from __future__ import annotations

import random
from typing import Any

from engram.autonomy.healing import PiiRescan
from engram.memory.types import AccessLevel, TrustLevel
from tests.integration import test_http_api as http_api
from tests.integration.consolidation_helpers import head_of
from tests.integration.race_helpers import approved_version, broken_invariants, jittered, typed
from tests.integration.test_http_api import Api
from tests.integration.test_self_healing import MARKER, codename_screener

api = http_api.api
FAST = 100_000
SERVICES = ["billing", "ledger", "search", "payments", "identity", "reporting", "mailer"]


async def test_update_forget_a_conflicting_write_and_feedback_at_once(api: Api) -> None:
    """Per round: the writer's PATCH and DELETE pinned to version 1, another agent's newer
    claim (a conflict whose resolution the outbox delivers while the others run), its
    feedback on the record and its own pinned PATCH. Every answer is a success or a typed
    problem, at most one of the pinned writes wins, and the invariants hold."""
    rng = random.Random(7)  # noqa: S311 - interleavings, not secrets
    alice = await api.agent("alice", TrustLevel.STANDARD, writes_per_minute=FAST)
    bob = await api.agent("bob", TrustLevel.TRUSTED, writes_per_minute=FAST)
    acknowledged = []
    for n, name in enumerate(SERVICES * 2):
        created = await api.write(
            {"type": "belief", "content": f"The {name} database runs PostgreSQL 15 (r{n})."},
            alice,
        )
        assert created.status_code == 201, created.text
        path = f"/v1/memories/{created.json()['record_id']}"
        newer = f"The {name} database was upgraded and now runs PostgreSQL 17 (r{n})."
        patch = {"content": f"The {name} database runs PostgreSQL 15.6 (r{n})."}
        steps: list[Any] = [
            lambda path=path, patch=patch: api.client.patch(
                path, json=patch, headers={**alice, "If-Match": '"1"'}
            ),
            lambda path=path: api.client.delete(path, headers={**alice, "If-Match": '"1"'}),
            lambda newer=newer: api.write({"type": "belief", "content": newer}, bob),
            lambda path=path: api.client.post(
                "/v1/feedback",
                json={"record_id": path.rsplit("/", 1)[1], "useful": True},
                headers=bob,
            ),
            lambda path=path, n=n: api.client.patch(
                path, json={"metadata": {"round": n}}, headers={**bob, "If-Match": '"1"'}
            ),
        ]
        answers = await jittered(rng, steps)
        assert typed(answers) == []
        pinned = [answers[i] for i in (0, 1, 4)]
        assert sum(a.status_code == 200 for a in pinned) <= 1, [a.text for a in pinned]
        acknowledged += [a for a in map(approved_version, answers) if a]
        await api.kernel.events.settled()
        assert await broken_invariants(api.kernel, acknowledged) == [], n


async def test_release_update_and_rescan_of_a_quarantined_record_at_once(api: Api) -> None:
    """Per round: a trusted agent's quarantined record (an e-mail address, and a codename
    only the newer detector finds); the admin's release pinned to version 1, the agent's
    pinned PATCH and a PII rescan with the newer detector, at once. Every answer is a
    success or a typed problem; a release and a PATCH that both succeed leave the record
    quarantined when its content still holds the address; the invariants hold."""
    rng = random.Random(5)  # noqa: S311 - interleavings, not secrets
    bob = await api.agent("bob", TrustLevel.TRUSTED, writes_per_minute=FAST)
    kernel = api.kernel
    for n, name in enumerate(SERVICES):
        text = f"The {name} on-call contact is dana{n}.r@example.org ({MARKER})."
        created = await api.write({"type": "belief", "content": text}, bob)
        assert created.status_code in (201, 202), created.text
        record_id = created.json()["record_id"]
        await kernel.events.settled()
        await kernel.db.execute("UPDATE memories SET screened_with = 'regex@1'")
        body = [{"metadata": {"n": n}}, {"access_level": "agent"}][n % 2]

        async def rescan() -> object:
            return await PiiRescan(
                kernel.gate,
                kernel.db,
                kernel.metrics,
                screener=codename_screener(),
                release=kernel.consolidation.release,
            ).run()

        steps: list[Any] = [
            lambda record_id=record_id: api.client.post(
                f"/v1/quarantine/{record_id}/release",
                json={"reason": "the team's rota address", "level": "agent"},
                headers={**api.admin, "If-Match": '"1"'},
            ),
            lambda record_id=record_id, body=body: api.client.patch(
                f"/v1/memories/{record_id}", json=body, headers={**bob, "If-Match": '"1"'}
            ),
            rescan,
        ]
        released, patched, _ = await jittered(rng, steps)
        assert typed([released, patched]) == []
        await kernel.events.settled()
        head = await head_of(kernel, record_id)
        if patched.status_code == 200 and head.version > 1:
            assert head.access_level is AccessLevel.SENSITIVE, (n, head.metadata)
        assert await broken_invariants(kernel) == [], n
