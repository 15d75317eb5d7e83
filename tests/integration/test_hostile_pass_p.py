"""Hostile pass P: the newest code (a caller's numbering of versions, the PII screen's newest
readings) under hostile input, races and real faults.

Every test here failed on the code it was written against; what held is in
``test_hostile_pass_p_held.py``. Real embedded PostgreSQL, the real embedding model, no
mocks."""

from __future__ import annotations

import json
import time
from typing import Any

from engram.memory.gate.pii import scan
from engram.memory.schemas import MAX_CONTENT_CHARS, MAX_METADATA_BYTES
from tests.integration.test_reader_versions import C3, _belief, _gapped, _writer
from tests.integration.twin_helpers import Store, twin_a

__all__ = ["twin_a"]

#: An address in the content: the Gate quarantines the version at sensitive.
LEAKY = f"{C3} Page the on-call at dana.whitfield@northwind-logistics.com first."


async def test_a_version_closed_by_a_hidden_one_shows_no_change_at_the_hidden_instant(
    twin_a: Store,
) -> None:
    """Medium. A version's ``updated_at`` is when its row last changed: for a superseded
    version, when the next version closed it. The writer's version 1 was closed by the hidden
    version 2: its interval was shown ending at the writer's version 2 (stored v3), but its
    ``updated_at`` was still the hidden version's instant. Without a gap the two are equal,
    so the difference told the writer that a version it may not read was written, and when.
    Every read path (history, as-of reads, searches, through each adapter) showed it."""
    record_id, inside = await _gapped(twin_a)
    writer = twin_a.principals["writer"].caller
    chain = await twin_a.kernel.temporal.get_version_chain(record_id, caller=writer)
    first = chain[0]
    assert first.ingestion_time_end == chain[1].ingestion_time
    assert first.updated_at == first.ingestion_time_end, (first.updated_at, inside)
    [read] = await twin_a.kernel.temporal.query(
        record_id=record_id, as_of_ingestion=inside, caller=writer
    )
    assert read.updated_at == read.ingestion_time_end
    response = await twin_a.client.get(
        f"/v1/memories/{record_id}/versions", headers=twin_a.headers["writer"]
    )
    [shown, _] = response.json()["versions"]
    assert shown["updated_at"] == shown["ingestion_time_end"]
    boss = twin_a.principals["boss"].caller
    full = await twin_a.kernel.temporal.get_version_chain(record_id, caller=boss)
    assert full[0].updated_at == full[0].ingestion_time_end == full[1].ingestion_time


def _filled(piece: str, size: int) -> str:
    return (piece * (size // len(piece) + 1))[:size]


def _largest(piece: str) -> str:
    """The screened text of the largest record an adapter accepts, made of ``piece``: the
    content at its limit and a metadata value filling the metadata's (as ``screened_text``
    joins them)."""
    content = _filled(piece, MAX_CONTENT_CHARS)
    metadata = json.dumps({"n": _filled(piece, MAX_METADATA_BYTES - 16)}, ensure_ascii=False)
    return f"{content}\n{metadata}\n\ndefault"


def _screen_seconds(text: str) -> float:
    """The CPU time the screen spends on ``text`` in this thread (wall time would count the
    waits for a core that other work on a loaded two-core machine causes)."""
    started = time.thread_time()
    scan(text)
    return time.thread_time() - started


#: The screen's time on a crafted record that still counts as linear: the defects these
#: tests guard against cost 1-2 s. It was 0.5 s until session 31's machine, slower than the
#: earlier ones, screened a secret's name repeated ("seed=", "key=") in 0.43-0.64 s, at
#: 8c8c684 and after alike (prose 0.047-0.051 s): the machine, not the code. (A value judged
#: once for a name repeated now brings those records to 0.13-0.16 s, session 32.)
CRAFTED_FLOOR_SECONDS = 0.8


def slow_crafted(crafted: tuple[str, ...]) -> tuple[float, list[tuple[str, float]]]:
    """The screen's time for prose of the largest size, and each crafted piece whose record
    of that size took ``CRAFTED_FLOOR_SECONDS`` or more and ten times prose (best of two
    readings)."""
    prose = _screen_seconds(
        _largest("The committee reviews the budget before the quarter closes in March. ")
    )
    slow = []
    for piece in crafted:
        seconds = min(_screen_seconds(_largest(piece)) for _ in range(2))
        if seconds >= max(CRAFTED_FLOOR_SECONDS, 10 * prose):
            slow.append((piece, seconds))
    return prose, slow


def test_words_of_64_characters_before_an_at_sign_cost_the_screen_no_more_than_prose() -> None:
    """Medium. The spelled-address reading (``evasion._SPELLED``) tried a match at every
    character: started inside a 63-character word, each start walked the same 64 words before
    failing, so the largest record an adapter accepts, filled with such words and one '@',
    held the Gate (on the event loop) about two seconds against some 0.05 s for prose of the
    same size. A look now starts only where a piece starts."""
    prose = _screen_seconds(
        _largest("The committee reviews the budget before the quarter closes in March. ")
    )
    for piece in ("a" * 63 + " ", "b" * 32 + " "):
        text = _largest(piece).replace("\n", " @ ", 1)
        seconds = min(_screen_seconds(text) for _ in range(2))
        assert seconds < max(0.5, 5 * prose), (len(piece), seconds, prose)


async def test_a_replayed_update_now_hidden_gives_its_version_in_the_callers_numbering(
    twin_a: Store,
) -> None:
    """High. The writer's UPDATE through a gap (its number 2, stored v3, behind a hidden v2)
    is quarantined at sensitive for an address in it: the first answer says "stored as
    version 3" (the writer's number of stored v4). The same request again is answered from
    the audit row; the version it stored is above the writer's level, so the record and its
    version are left out, but the reason was the audit row's, in the stored numbering:
    "stored as version 4" told the writer of the hidden version (in a store without it the
    replay says 3). It now says what the first answer said."""
    record_id, _ = await _gapped(twin_a)
    writer = _writer(twin_a)
    first = await writer.update(record_id, _belief(LEAKY), expected_version=2, request_id="p-1")
    assert first.approved, first.reason
    assert first.reason.startswith("stored as version 3"), first.reason
    again = await writer.update(record_id, _belief(LEAKY), expected_version=2, request_id="p-1")
    assert again.replayed
    assert first.reason == again.reason
    assert again.version is None


async def test_a_replayed_patch_now_hidden_gives_its_version_in_the_callers_numbering(
    twin_a: Store,
) -> None:
    """High. The same over REST: a PATCH with an Idempotency-Key sent again answers the reason
    the first answer gave (the writer's number 3), not the stored version 4."""
    record_id, _ = await _gapped(twin_a)
    headers = {**twin_a.headers["writer"], "If-Match": '"2"', "Idempotency-Key": "p-2"}
    url = f"/v1/memories/{record_id}"
    first = await twin_a.client.patch(url, json={"content": LEAKY}, headers=headers)
    body: dict[str, Any] = first.json()
    assert 200 == first.status_code, body
    assert body["reason"].startswith("stored as version 3"), body
    again = await twin_a.client.patch(url, json={"content": LEAKY}, headers=headers)
    assert 200 == again.status_code, again.json()
    assert body["reason"] == again.json()["reason"]
    tool = await twin_a.tools.call(
        "update",
        {"record_id": str(record_id), "expected_version": 2, "content": LEAKY, "request_id": "p-3"},
        twin_a.principals["writer"],
    )
    assert tool.is_error, tool.structured_content  # hidden since: absent for the writer


def test_exchange_names_close_together_cost_the_screen_no_more_than_prose() -> None:
    """Low. Each exchange's name (``okx``, ``htx``, ...) read the 240 characters after it for
    a key: names four characters apart read each character sixty times, about half a second
    for the largest record (ten times prose). Overlapping windows are now read once."""
    prose = _screen_seconds(
        _largest("The committee reviews the budget before the quarter closes in March. ")
    )
    for piece in ("okx-", "okx.", "htx_"):
        seconds = min(_screen_seconds(_largest(piece)) for _ in range(2))
        assert seconds < max(0.25, 5 * prose), (piece, seconds, prose)
