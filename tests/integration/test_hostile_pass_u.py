"""Hostile pass U: the admin desk under races and across read levels (a release racing a
consolidation pass planned before it, admins narrowed below ``sensitive`` on the admin
endpoints).

Every test here failed on the code it was written against; what held is in
``test_hostile_pass_u_held.py``. Real embedded PostgreSQL, the real embedding model, no
mocks: a pass is held inside its transaction by a real row lock another session holds.
"""

from __future__ import annotations

import asyncio

from engram import Kernel
from engram.memory.consolidation import SkipReason
from engram.memory.types import AccessLevel, CallerIdentity, MemoryStatus, TrustLevel
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DAY, DEEP, INCIDENT, head_of
from tests.integration.gate_helpers import holding_head, lock_waiters
from tests.integration.test_consolidation import _seed
from tests.integration.twin_helpers import Store, twin_a  # noqa: F401 - the fixture

PII_CLAIM = "The on-call lead for checkout-api is reachable at jana.novak@example.com."
SECRET = "The merger with Initech closes on 3 March."


async def test_a_release_is_not_undone_by_a_pass_planned_before_it(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """High. An admin's release lowers a quarantined record's level in place (the version
    stays), and a consolidation batch checked only the versions of the sources it had
    planned: a pass that planned two quarantined records of one thread as a ``sensitive``
    topic and committed after an admin released one of them wrote that source's
    ``consolidated`` version back at ``sensitive`` and cited it from a ``sensitive``
    summary. The release, acknowledged with a 200 and audited, was undone: the record was
    gone for every reader it was released to. A batch now also checks that each source is
    still at the level it restates it at; a source released since is left out
    (``source_changed``), stays at the level it was released to, and the next pass
    consolidates it with its new level's records."""
    texts = list(INCIDENT)
    texts[1] += " Escalated to the on-call lead at jana.novak@example.com."
    texts[2] += " Ticket owner: jana.novak@example.com."
    ids = await _seed(kernel, texts, DAY)
    assert [AccessLevel.SENSITIVE] * 2 == [(await head_of(kernel, i)).access_level for i in ids[1:]]
    first, second = sorted(ids[1:])  # the batch locks its heads in record-id order
    admin = CallerIdentity.system("cli:test-admin")
    async with holding_head(database.admin_url, first) as held:
        running = asyncio.create_task(kernel.consolidation.run(DEEP))
        await lock_waiters(held.watch, 1)  # planned and screened, waiting to commit
        released, _ = await kernel.quarantine.release(second, admin=admin, reason="work address")
        assert AccessLevel.AGENT is released.access_level
        await held.release()
        report = await running
    assert [] == report.created
    assert 2 == report.skipped.get(SkipReason.SOURCE_CHANGED.value)
    head = await head_of(kernel, second)
    assert (AccessLevel.AGENT, MemoryStatus.ACTIVE, 1) == (
        head.access_level,
        head.status,
        head.version,
    )
    assert [] == report.consumed


async def test_a_released_record_is_not_consolidated_into_a_quarantined_summary(
    kernel: Kernel,
) -> None:
    """Medium. A record an admin released keeps its finding in its text, and the next
    consolidation pass joined it with the clean records of its level (ADR-018: a consolidated
    record has its sources' level): the PII check screened the summary, found the released
    address and stored the summary at ``sensitive``, and the sources became
    ``consolidated``. The readers the record was released to, and the readers of the clean
    record beside it, then found neither the sources (consolidated) nor the summary
    (sensitive), the state a release refuses to create. A batch now leaves out a topic whose
    record the Gate would store above the level it was planned at (``quarantined``): its
    sources stay active at their level; a topic of quarantined sources still makes a
    ``sensitive`` summary."""
    texts = list(INCIDENT)
    texts[1] += " Escalated to the on-call lead at jana.novak@example.com."
    ids = await _seed(kernel, texts, DAY)
    admin = CallerIdentity.system("cli:test-admin")
    await kernel.quarantine.release(ids[1], admin=admin, reason="a published work address")
    report = await kernel.consolidation.run(DEEP)
    assert [] == report.created, report.skipped
    assert 3 == report.skipped.get(SkipReason.QUARANTINED.value), report.skipped
    for record_id in ids:
        head = await head_of(kernel, record_id)
        assert (AccessLevel.AGENT, MemoryStatus.ACTIVE) == (head.access_level, head.status)
    assert 0 == await kernel.db.fetchval(
        "SELECT count(*) FROM memories WHERE consolidation_path = 'slow'"
    )


async def test_an_admin_narrowed_below_sensitive_reads_no_record_it_may_not_read(
    twin_a: Store,  # noqa: F811 - the fixture
) -> None:
    """Medium. The admin endpoints checked only the admin flag: an admin agent narrowed to
    ``max_read_level = agent`` got a 404 for a ``sensitive`` record, then read its content in
    the snapshot of its CREATE on ``GET /v1/audit``, and read quarantined PII in clear with
    ``GET /v1/quarantine?reveal=true`` (the reveal audited, the narrowing ignored). ADR-022
    already refused such an admin the counts of ``/metrics``; the admin endpoints, which show
    every level's records, now refuse it too (403, saying why), and answer admins cleared for
    every level as before."""
    await twin_a.agent("narrow", TrustLevel.TRUSTED, admin=True, max_read_level=AccessLevel.AGENT)
    await twin_a.agent("boss", TrustLevel.TRUSTED, admin=True)
    await twin_a.agent("writer", TrustLevel.STANDARD)
    client, headers = twin_a.client, twin_a.headers
    quarantined = await client.post(
        "/v1/memories", json={"type": "belief", "content": PII_CLAIM}, headers=headers["writer"]
    )
    assert 201 == quarantined.status_code, quarantined.text
    secret = await client.post(
        "/v1/memories",
        json={"type": "belief", "content": SECRET, "access_level": "sensitive"},
        headers=headers["boss"],
    )
    assert 201 == secret.status_code, secret.text
    record_id = secret.json()["record_id"]
    assert (
        404
        == (await client.get(f"/v1/memories/{record_id}", headers=headers["narrow"])).status_code
    )
    before = await twin_a.kernel.audit.search(limit=1000)
    for path in (
        "/v1/audit",
        "/v1/audit?reveal=true&reason=review",
        "/v1/quarantine?reveal=true&reason=review",
        "/v1/conflicts",
    ):
        refused = await client.get(path, headers=headers["narrow"])
        assert 403 == refused.status_code, (path, refused.text)
        assert "every access level" in refused.json()["detail"]
        assert SECRET not in refused.text
        assert "jana.novak" not in refused.text
    released = await client.post(
        f"/v1/quarantine/{quarantined.json()['record_id']}/release",
        json={"reason": "a published work address"},
        headers=headers["narrow"],
    )
    assert 403 == released.status_code, released.text
    assert len(before) == len(await twin_a.kernel.audit.search(limit=1000))  # no REVEAL row
    shown = await client.get("/v1/audit?limit=1000", headers=headers["boss"])
    assert 200 == shown.status_code
    assert SECRET in shown.text
