"""Hostile pass AA, pure logic: findings, each a test that failed before its fix (see each
docstring)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from engram.autonomy.levels import LevelBackoff
from engram.autonomy.schedule import backoff
from engram.memory.conflict.anchors import named_days, share_a_day
from engram.memory.conflict.detection import ConflictDetector
from engram.memory.conflict.scope import later_occurrence
from engram.memory.consolidation.model import BatchReport, ConsolidationReport, SkipReason
from engram.memory.types import (
    AccessLevel,
    ConflictClassification,
    ConsolidationTrigger,
    MemoryRecord,
    MemoryType,
)


def _episode(text: str, when: datetime) -> MemoryRecord:
    return MemoryRecord.draft(MemoryType.EPISODE, text, source_agent="a", event_time=when)


async def _found(old: MemoryRecord, new: MemoryRecord) -> list[ConflictClassification]:
    found = await ConflictDetector().detect(new, [old], similarities={old.id: 0.85})
    return [conflict.classification for conflict in found]


async def test_an_account_saying_it_happened_again_is_never_acted_on_for_naming_the_day() -> None:
    """A release train account a day later says the train shipped *again*, naming the day
    the older one names.
    Rule: a true record is never ended or challenged on the evidence of a later occurrence
    of an episode; an account that says "again" ("once more") is one by its own words, and
    what it finds is escalated, never acted on (ADR-010).
    Failed before: ``later_occurrence`` used the named-day rule, so naming "12 March" made
    the account the same occurrence and the older record was superseded silently (both a
    day and a year later). Fixed in ``memory/conflict/scope.py``: ``later_occurrence``
    reads the recording times alone."""
    old_text = "On 12 March the release train shipped version 4.2 to production."
    for new_text in (
        "On 12 March the release train again shipped version 4.3 to production, not 4.2.",
        "On 12 March the release train shipped version 4.3 to production once more, replacing 4.2.",
    ):
        for recorded in (
            datetime(2026, 3, 12, 8, tzinfo=UTC),
            datetime(2025, 3, 12, 15, tzinfo=UTC),
        ):
            old = _episode(old_text, recorded)
            new = _episode(new_text, datetime(2026, 3, 13, 9, tzinfo=UTC))
            assert later_occurrence(new, old), (new_text, recorded)
            found = await _found(old, new)
            assert found == [ConflictClassification.UNRESOLVABLE], (new_text, recorded, found)


async def test_a_day_named_without_its_year_is_the_one_nearest_its_account() -> None:
    """The 12 March anniversary dinner of 2025 and that of 2026, each told on its day.
    Rule: a true record is never challenged on the evidence of another occurrence of an
    episode; "12 March" written in March 2025 and in March 2026 names two days.
    Failed before: a day without its year matched that day of any year, so the 2026
    account was judged against the 2025 one and escalated as a conflict with it. Fixed in
    ``memory/conflict/anchors.py`` (``share_a_day``, given when each text was recorded)
    and ``scope._other_occurrence``: a yearless day is the one nearest its account."""
    old = _episode(
        "The 12 March anniversary dinner was at Marco's.", datetime(2025, 3, 12, 22, tzinfo=UTC)
    )
    new = _episode(
        "The 12 March anniversary dinner was at Luigi's again.",
        datetime(2026, 3, 12, 22, tzinfo=UTC),
    )
    assert [] == await _found(old, new)
    later = _episode(
        "The 12 March anniversary dinner was at Luigi's.", datetime(2026, 3, 14, 9, tzinfo=UTC)
    )
    assert [] == await _found(old, later)
    # told two days apart (and across a new year), they are still one occurrence
    march = datetime(2026, 3, 12, 22, tzinfo=UTC).date()
    assert share_a_day("the 12 March dinner", "dinner on March 12th", left_on=march, right_on=march)
    assert share_a_day(
        "the 30 December party",
        "the party of 2025-12-30",
        left_on=datetime(2026, 1, 2, tzinfo=UTC).date(),
        right_on=datetime(2025, 12, 30, tzinfo=UTC).date(),
    )
    assert not share_a_day(
        "the 12 March dinner",
        "the 12 March dinner",
        left_on=march,
        right_on=datetime(2025, 3, 12, tzinfo=UTC).date(),
    )
    assert named_days("the audit of 0000-03-12") == frozenset()  # year 0 stands for none


def test_two_texts_full_of_dates_are_compared_in_linear_time() -> None:
    """Two 16,000-character episodes each naming about 1,450 dates.
    Rule: the conflict rules stay linear in the text (the Gate judges up to three pairs on
    every write).
    Failed before: ``share_a_day`` compared every day of one text with every day of the
    other: 1.5 s a pair, 4.4 s of one write's event loop for three. Fixed in
    ``memory/conflict/anchors.py``: the days are compared as sets."""
    texts = [
        " ".join(f"{start + i:04d}-{1 + i % 12:02d}-{1 + i % 28:02d}" for i in range(1450))[:16000]
        for start in (1000, 3000, 5000, 7000)
    ]
    for text in texts:
        assert len(named_days(text)) > 1400
    started = time.perf_counter()
    for left, right in pairwise(texts):
        assert not share_a_day(left, right)
    assert time.perf_counter() - started < 0.6


def test_a_level_failing_for_ever_with_a_day_long_back_off_is_backed_off_not_raised() -> None:
    """``ENGRAM_JOB_BACKOFF_SECONDS`` of one day (a valid setting: one second to 1000
    years), and a level whose batches failed in 40 passes in a row.
    Rule: a more closed level's failures never change what happens to a more open one (a
    job's pass must not fail for them, ADR-019), and a valid setting never breaks the
    kernel.
    Failed before: ``schedule.backoff`` doubled the base 30 times before capping it at the
    ceiling: past the 31st failure a day became more than ``timedelta.max`` and raised
    ``OverflowError`` in ``LevelBackoff.note``, so every consolidation job's pass failed
    whole (every level backed off by the scheduler) until a batch of that level committed;
    the scheduler's own back-off of a job failing 31 times raised the same way. Fixed in
    ``autonomy/schedule.py``: the ceiling is returned once the doubled base would pass it."""
    sensitive, public = AccessLevel.SENSITIVE, AccessLevel.PUBLIC
    failing = ConsolidationReport(
        run_id=uuid.uuid4(),
        trigger=ConsolidationTrigger.SCHEDULED_LIGHT,
        dry_run=False,
        candidates=3,
        batches=(
            BatchReport(
                uuid.uuid4(),
                (),
                {SkipReason.FAILED.value: 3},
                committed=False,
                trigger=ConsolidationTrigger.SCHEDULED_LIGHT,
                level=sensitive,
            ),
        ),
        skipped={SkipReason.FAILED.value: 3},
        duration_seconds=0.1,
        levels=(public, sensitive),
    )
    held = LevelBackoff(base=timedelta(days=1), ceiling=timedelta(days=2))
    now = datetime(2026, 11, 29, 3, tzinfo=UTC)
    for _ in range(40):
        held.note(failing, now)
    assert held.until[sensitive] - now == timedelta(days=2)
    assert held.awake((public, sensitive), now) == (public,)
    longest = timedelta(days=365_000)  # the settings' 1000 years
    assert backoff(10**6, base=longest, ceiling=longest) == longest
    assert backoff(3, base=timedelta(seconds=60), ceiling=timedelta(hours=1)) == timedelta(
        minutes=4
    )
