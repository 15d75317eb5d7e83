"""A newer claim changed only in its metadata does not end an older claim again (real
PostgreSQL, the real model, the in-process adapter as REST's PATCH uses it).

Seen in a CI run: a belief with no event time ("The wiki moved to host nine.") ended older
beliefs; each later change of its metadata was judged again, and its new version was stored
with "now" as its event time. The resolver ended the older beliefs again at that later
instant: one was rewritten ten times, its end moved later each time, as if the claim the
newer one ended had stayed true meanwhile. A caller's version that keeps the content now
keeps the event times it leaves out (``plan.next_version``)."""

from __future__ import annotations

from datetime import timedelta

from engram import Kernel
from engram.memory.types import TrustLevel
from engram.protocols.inprocess import AgentSession
from tests.integration.consolidation_helpers import head_of
from tests.integration.test_layer2_hostile import V20, V21


async def test_a_newer_claim_whose_metadata_changes_does_not_end_the_older_one_again(
    kernel: Kernel,
) -> None:
    """v2.1 ends v2.0's validity; v2.1's metadata then changes three times. v2.1 keeps its
    event time, v2.0 its one ending (no version after the resolver's); a change of v2.0's
    metadata neither reopens it nor touches v2.1; audit replay decides every recorded
    request as the Gate did."""
    _, token = await kernel.agents.add("deployer", TrustLevel.STANDARD, writes_per_minute=1000)
    session = AgentSession(kernel, (await kernel.agents.authenticate(token)).caller)
    older = await session.remember({"type": "belief", "content": V20})
    await kernel.events.settled()
    newer = await session.remember({"type": "belief", "content": V21})
    await kernel.events.settled()
    assert older.record_id is not None, older.reason
    assert newer.record_id is not None, newer.reason
    ended = await head_of(kernel, older.record_id)
    assert ended.event_time_end is not None, "no supersession"
    began = (await head_of(kernel, newer.record_id)).event_time
    for version in (1, 2, 3):
        changed = await session.amend(
            newer.record_id, {"metadata": {"round": version}}, expected_version=version
        )
        assert changed.version == version + 1, changed.reason
        await kernel.events.settled()
    after = await head_of(kernel, older.record_id)
    assert (after.version, after.event_time_end) == (ended.version, ended.event_time_end)
    assert (await head_of(kernel, newer.record_id)).event_time == began
    standing = await head_of(kernel, newer.record_id)
    tagged = await session.amend(
        older.record_id, {"metadata": {"note": "kept"}}, expected_version=ended.version
    )
    assert tagged.version == ended.version + 1, tagged.reason
    await kernel.events.settled()
    kept = await head_of(kernel, older.record_id)
    assert (kept.event_time, kept.event_time_end) == (ended.event_time, ended.event_time_end)
    # the older claim, restated with its date, is not judged newer than the one that ended it
    assert await head_of(kernel, newer.record_id) == standing
    replayed = await kernel.replay.replay()
    assert [] == [d.to_json() for d in replayed.changed]


async def test_a_restated_claim_dated_after_its_end_is_true_again_from_then(
    kernel: Kernel,
) -> None:
    """v2.0, ended by v2.1, restated with its content and an event time: dated before its
    end it keeps the end; dated at or after it, it is stated true again from then (no end,
    and no end before the start, which the table's check refuses)."""
    _, token = await kernel.agents.add("deployer", TrustLevel.STANDARD, writes_per_minute=1000)
    session = AgentSession(kernel, (await kernel.agents.authenticate(token)).caller)
    older = await session.remember({"type": "belief", "content": V20})
    await kernel.events.settled()
    await session.remember({"type": "belief", "content": V21})
    await kernel.events.settled()
    assert older.record_id is not None, older.reason
    ended = await head_of(kernel, older.record_id)
    end = ended.event_time_end
    assert end is not None, "no supersession"
    assert ended.event_time is not None
    before = ended.event_time + (end - ended.event_time) / 2
    dated = await session.amend(
        older.record_id, {"event_time": before.isoformat()}, expected_version=ended.version
    )
    assert dated.version == ended.version + 1, dated.reason
    kept = await head_of(kernel, older.record_id)
    assert (kept.event_time, kept.event_time_end) == (before, end)
    later = end + timedelta(seconds=1)
    again = await session.amend(
        older.record_id, {"event_time": later.isoformat()}, expected_version=kept.version
    )
    assert again.version == kept.version + 1, again.reason
    reopened = await head_of(kernel, older.record_id)
    assert (reopened.event_time, reopened.event_time_end) == (later, None)
