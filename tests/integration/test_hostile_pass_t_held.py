"""Hostile pass T: probes that held (the attack and what was checked), kept as regression
tests. Real embedded PostgreSQL and the real embedding model, no mocks."""

from __future__ import annotations

from datetime import UTC, datetime

from engram.memory.types import TrustLevel
from tests.integration.twin_helpers import Store, twin_a  # noqa: F401 - the fixture

#: Bodies sent as they are (raw JSON text): accepted odd values, then refused ones.
_ACCEPTED = (
    (
        '{"type": "episode", "content": "The vault was sealed by the masons.", '
        '"event_time": "0001-01-01T00:00:00.000001Z"}'
    ),
    (
        '{"type": "episode", "content": "The time capsule opens at the end of the calendar.", '
        '"event_time": "9999-12-31T23:59:59.999998Z"}'
    ),
    (
        '{"type": "episode", "content": "The ferry left the harbour at dawn.", '
        '"event_time": "2026-03-29T02:30:00+14:00"}'
    ),
    (
        '{"type": "belief", "content": "Caf\\u00e9 Nord serves espresso on the pier.", '
        '"metadata": {"caf\\u00e9": -0.0, "cafe\\u0301": 1e300, "t": 5e-324, '
        '"n": 100000000000000000000000000000000000000, "tags": ["caf\\u00e9", "cafe\\u0301"]}}'
    ),
    (
        '{"type": "belief", "content": "The bridge \\u2028 opens \\u0085 at nine \\ud83c\\udf09.", '
        '"metadata": {"k": "\\u202eevil"}}'
    ),
    (
        '{"type": "belief", "content": "first of a duplicated key", '
        '"content": "The lighthouse keeper logs the weather hourly."}'
    ),
)
_REFUSED = (
    '{"type": "belief", "content": "bad \\u0000 nul"}',
    '{"type": "belief", "content": "bad \\ud800 surrogate"}',
    '{"type": "belief", "content": "The tide is high.", "source_confidence": NaN}',
    '{"type": "belief", "content": "The tide is high.", "metadata": {"x": 1e999}}',
)


async def test_odd_records_leave_a_log_that_verifies_rebuilds_and_replays_unchanged(
    twin_a: Store,  # noqa: F811 - the fixture
) -> None:
    """Held. Records at the edges of the calendar (a microsecond after the first UTC instant,
    one before the last, a +14:00 local time), metadata Python and PostgreSQL hold
    differently (-0.0, 1e300, the smallest subnormal, a 39-digit integer, keys equal under
    NFC but not as text), line and paragraph separators, a right-to-left override, an emoji
    sent as a surrogate pair and a body with a duplicated key are stored, read and updated;
    NUL, a lone surrogate, NaN and an overflowing number are typed 422s. Afterwards the audit
    chain verifies, the state rebuilt from the log equals the store, and a replay of every
    row changes no decision (it skips only the four refused inputs, which never parsed)."""
    await twin_a.agent("writer", TrustLevel.STANDARD)
    headers = {**twin_a.headers["writer"], "Content-Type": "application/json"}
    for body in _ACCEPTED:
        written = await twin_a.client.post("/v1/memories", content=body.encode(), headers=headers)
        assert 201 == written.status_code, written.text
        record_id = written.json()["record_id"]
        read = await twin_a.client.get(f"/v1/memories/{record_id}", headers=headers)
        assert 200 == read.status_code, read.text
        if read.json()["type"] == "belief":
            changed = {"content": read.json()["content"] + " Still so."}
            patched = await twin_a.client.patch(
                f"/v1/memories/{record_id}", json=changed, headers={**headers, "If-Match": '"1"'}
            )
            assert 200 == patched.status_code, patched.text
    for body in _REFUSED:
        refused = await twin_a.client.post("/v1/memories", content=body.encode(), headers=headers)
        assert 422 == refused.status_code, refused.text
        assert ["schema"] == [c["name"] for c in refused.json()["failed_checks"]]
    verified = await twin_a.kernel.audit.verify()
    assert verified.ok, verified
    state = await twin_a.kernel.audit_state.compare(datetime.now(UTC))
    assert state.ok, [difference.to_json() for difference in state.differences]
    report = await twin_a.kernel.replay.replay()
    assert 13 == len(report.decisions)
    assert [] == report.changed
    # the refused raw inputs never parsed as records: skipped by design, with that reason
    assert [("rejected", "the input could not be read as a record")] * 4 == [
        (d.recorded.decision, (d.skipped or "").split(";")[0]) for d in report.skipped
    ]


async def test_a_search_naming_a_type_or_tag_twice_answers_each_record_once(
    twin_a: Store,  # noqa: F811 - the fixture
) -> None:
    """Held. Unlike the listing (pass T's finding), search over REST and MCP ``recall`` with
    ``types: ["belief", "belief"]`` and a tag named twice answers each record once, the same
    hits as with each named once."""
    reader = await twin_a.agent("reader", TrustLevel.STANDARD)
    for city in ("Oslo", "Lima", "Pune"):
        written = await twin_a.tools.call(
            "remember",
            {
                "type": "belief",
                "content": f"The ledger replica runs in {city}.",
                "metadata": {"tags": ["ledger"]},
            },
            reader,
        )
        assert not written.is_error, written.structured_content
    once = {"query": "where does the ledger replica run", "types": ["belief"], "tags": ["ledger"]}
    twice = {**once, "types": ["belief", "belief"], "tags": ["ledger", "ledger"]}
    answers = []
    for body in (once, twice):
        rest = await twin_a.client.post("/v1/search", json=body, headers=twin_a.headers["reader"])
        assert 200 == rest.status_code, rest.text
        tool = await twin_a.tools.call("recall", body, reader)
        assert not tool.is_error
        for hits in (rest.json()["hits"], (tool.structured_content or {})["hits"]):
            ids = [hit["record"]["record_id"] for hit in hits]
            assert 3 == len(ids) == len(set(ids)), ids
            answers.append(sorted(ids))
    assert all(ids == answers[0] for ids in answers)
