"""Hostile pass U: probes of the admin desk that held (the attack and what was checked),
kept as regression tests. Real embedded PostgreSQL and the real embedding model, no mocks.
"""

from __future__ import annotations

import asyncio
import random
from uuid import UUID

from engram.memory.types import TrustLevel
from tests.integration.twin_helpers import Store, twin_a  # noqa: F401 - the fixture

#: Query strings every admin listing must answer with a typed 4xx or a 200, never a 500.
ODD_QUERIES = (
    "since=0001-01-01T00:00:00%2B14:00",
    "until=9999-12-31T23:59:59-14:00",
    "since=2026-01-01T00:00:00Z&until=2025-01-01T00:00:00Z",
    "agent=%ED%A0%80",
    "agent=%00",
    "agent=" + "a" * 300,
    "cursor=9223372036854775807",
    "cursor=9223372036854775808",
    "cursor=-1",
    "limit=0",
    "limit=1001",
    "decision=APPROVED",
    "reveal=true&reason=%20%20",
    "reveal=true&reason=x%00",
    "since=NaN",
    "since=infinity",
    "since=2026-13-01T00:00:00Z",
    "since=2026-01-01T00:00:00",
    "cursor=2026-01-01T00:00:00",
)
#: Release bodies the desk must refuse with a reason (422/400), changing nothing.
ODD_BODIES = (
    b'{"reason": NaN}',
    b'{"reason": "x", "level": "sensitive"}',
    b'{"reason": "x", "level": "SENSITIVE"}',
    b'{"reason": "\\ud800"}',
    b'{"reason": "a\\u0000b"}',
    b'{"reason": "   "}',
    b'{"reason": "ok", "level": null}',
    b"[" * 5000,
    b'{"reason": "' + b"x" * 3000 + b'"}',
    b'{"reason": "ok", "extra": 1}',
    b'{"reason": 1e999}',
    b"",
)


async def _quarantined(store: Store, n: int) -> str:
    written = await store.client.post(
        "/v1/memories",
        json={
            "type": "belief",
            "content": f"The on-call lead of service {n} is reachable at lead{n}@example.com.",
        },
        headers=store.headers["writer"],
    )
    assert 201 == written.status_code, written.text
    assert "quarantined" in written.json()["reason"]
    record_id: str = written.json()["record_id"]
    return record_id


async def test_odd_admin_input_is_refused_typed_and_changes_nothing(
    twin_a: Store,  # noqa: F811 - the fixture
) -> None:
    """Odd query strings on the three admin listings (instants without a UTC form or a
    zone, NaN, a lone surrogate, NUL, out-of-range cursors and limits, a reveal without a
    reason) and odd release bodies (NaN, Infinity, lone surrogates, NUL, a blank or 3000
    character reason, a sensitive level, 5000 nested arrays, extra fields): every answer is a
    typed 4xx problem or a 200, never a 500, and no refused release changed the record or
    appended an audit row."""
    await twin_a.agent("boss", TrustLevel.TRUSTED, admin=True)
    await twin_a.agent("writer", TrustLevel.STANDARD)
    record_id = await _quarantined(twin_a, 1)
    headers = twin_a.headers["boss"]
    rows = len(await twin_a.kernel.audit.search(limit=1000))
    for query in ODD_QUERIES:
        for path in ("/v1/audit", "/v1/quarantine", "/v1/conflicts"):
            answer = await twin_a.client.get(f"{path}?{query}", headers=headers)
            assert answer.status_code in (200, 400, 422), (path, query, answer.text)
            if answer.status_code != 200:
                assert answer.headers["content-type"] == "application/problem+json"
    rows = len(await twin_a.kernel.audit.search(limit=1000))  # reveals above are audited
    for body in ODD_BODIES:
        answer = await twin_a.client.post(
            f"/v1/quarantine/{record_id}/release",
            content=body,
            headers={**headers, "content-type": "application/json"},
        )
        assert answer.status_code in (400, 422), (body[:40], answer.text)
        assert answer.json()["detail"], answer.text
    head = await twin_a.kernel.admin_temporal.current(UUID(record_id))
    assert head is not None
    assert "sensitive" == head.access_level.value
    assert rows == len(await twin_a.kernel.audit.search(limit=1000))


async def test_two_admins_releasing_one_record_at_once_release_it_once(
    twin_a: Store,  # noqa: F811 - the fixture
) -> None:
    """Two admins release the same quarantined record at the same moment (separate
    connections, random delays, to different levels), five rounds: exactly one gets 200,
    the other a 409 ``quarantine-state``; the record ends at the winner's level, with one
    RELEASE row naming the winner, and the audit chain verifies."""
    await twin_a.agent("ann", TrustLevel.TRUSTED, admin=True)
    await twin_a.agent("bob", TrustLevel.TRUSTED, admin=True)
    await twin_a.agent("writer", TrustLevel.STANDARD)
    rng = random.Random(20261128)  # noqa: S311 - delays, not secrets
    for n in range(5):
        record_id = await _quarantined(twin_a, n)

        async def release(who: str, level: str, rid: str = record_id) -> tuple[str, int, str]:
            await asyncio.sleep(rng.random() * 0.02)
            answer = await twin_a.client.post(
                f"/v1/quarantine/{rid}/release",
                json={"reason": f"{who} checked it", "level": level},
                headers=twin_a.headers[who],
            )
            return who, answer.status_code, answer.text

        answers = await asyncio.gather(release("ann", "agent"), release("bob", "user"))
        codes = sorted(code for _, code, _ in answers)
        assert [200, 409] == codes, answers
        loser = next(text for _, code, text in answers if code == 409)
        assert "quarantine-state" in loser
        winner = next(who for who, code, _ in answers if code == 200)
        head = await twin_a.kernel.admin_temporal.current(UUID(record_id))
        assert head is not None
        assert {"ann": "agent", "bob": "user"}[winner] == head.access_level.value
        releases = [
            e
            for e in await twin_a.kernel.audit.search(action="RELEASE", limit=1000)
            if str(e["record_id"]) == record_id
        ]
        assert [winner] == [e["agent_id"] for e in releases]
    assert (await twin_a.kernel.audit.verify()).ok
