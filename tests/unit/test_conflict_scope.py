"""Scope rules that keep a store's true records from being ended or challenged
(engram.memory.conflict.scope): a distant neighbour and a later occurrence of an episode."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from engram.memory.conflict.anchors import named_days, share_a_day
from engram.memory.conflict.detection import ConflictDetector
from engram.memory.conflict.features import _tense
from engram.memory.conflict.scope import REPORTED_SIMILARITY, later_occurrence, says_again
from engram.memory.types import ConflictClassification, MemoryRecord, MemoryType


def record(kind: MemoryType, text: str, day: int, hour: int = 9) -> MemoryRecord:
    """A draft of ``kind`` from agent a, dated that day of March 2026."""
    return MemoryRecord.draft(
        kind, text, source_agent="a", event_time=datetime(2026, 3, day, hour, tzinfo=UTC)
    )


async def classes(old: MemoryRecord, new: MemoryRecord, similarity: float) -> list[str]:
    """The classes the packaged detector reports for one pair."""
    found = await ConflictDetector().detect(new, [old], similarities={old.id: similarity})
    return [c.classification.value for c in found]


async def test_a_distant_neighbour_is_never_in_conflict() -> None:
    """Two reflections about different things, one saying something changed, are close
    enough in a store to be judged; below the floor nothing is reported (the classifier
    alone read them as a supersession)."""
    old = record(
        MemoryType.REFLECTION,
        "Customers escalate less when the very first reply promises a concrete time for the "
        "next update, even if there is no fix yet.",
        3,
    )
    new = record(
        MemoryType.REFLECTION,
        "On-call load dropped noticeably once alerts were routed to each dataset owner "
        "instead of one shared channel for everything.",
        20,
    )
    assert [] == await classes(old, new, 0.25)
    assert [] == await classes(old, new, REPORTED_SIMILARITY - 0.01)


async def test_a_later_occurrence_of_an_episode_is_escalated_not_retired() -> None:
    """A week later the substitution happens "once more", told with a word of change
    ("replaced"): each episode is a true account of its own Saturday, so the older one is not
    ended; the judgement is escalated at most. Within the window it is one account."""
    old = record(
        MemoryType.EPISODE,
        "FreshCart order came: free-range eggs listed as out of stock and swapped for a "
        "standard dozen. The family won't eat those.",
        7,
    )
    again = record(
        MemoryType.EPISODE,
        "Once more FreshCart replaced the free-range eggs with a different product. That is "
        "the third Saturday in a row.",
        14,
    )
    found = await ConflictDetector().detect(again, [old], similarities={old.id: 0.71})
    assert all(c.classification is ConflictClassification.UNRESOLVABLE for c in found)
    assert later_occurrence(again, old)
    same_morning = record(MemoryType.EPISODE, again.content, 7, 15)
    assert not later_occurrence(same_morning, old)


async def test_a_moved_event_still_supersedes_days_later() -> None:
    """A planned event that the newer says was moved is the same event, not another one."""
    old = record(MemoryType.EPISODE, "Leo's dentist appointment booked for 14 May at 10:30.", 2)
    moved = record(
        MemoryType.EPISODE, "Leo's dentist appointment was changed to 21 May at 09:00.", 20
    )
    assert not later_occurrence(moved, old)
    assert ["supersession"] == await classes(old, moved, 0.86)


async def test_a_later_episode_that_changes_a_state_still_supersedes() -> None:
    """Without a word saying it happened again, a later episode that reports a change of the
    state the older one described is judged as before ("is at 10 %" / "expanded to 100 %").
    Told as an action ("Rolled out … to 10 %") the same change is escalated by
    `conflict-gbdt@6` (0.68): an account of a moment may stay true after a later step."""
    old = record(MemoryType.EPISODE, "The mobile rollout of v3.2.0 is at 10% of Android users.", 2)
    expanded = record(MemoryType.EPISODE, "Android rollout of v3.2.0 expanded to 100%.", 5)
    assert not later_occurrence(expanded, old)
    assert ["supersession"] == await classes(old, expanded, 0.8)


async def test_a_later_step_of_a_story_leaves_the_earlier_account_standing() -> None:
    """ "Agreed to a credit memo instead of wiring the money back" uses a word of change, but
    the audit finding it follows stays true: no conflict (`conflict-gbdt@4` ended it)."""
    finding = record(
        MemoryType.EPISODE,
        "Internal audit flagged a duplicate payment: Brightline Supplies invoice BL-20931 for "
        "18,400 USD was paid on April 14 and then again on April 21.",
        2,
    )
    settled = record(
        MemoryType.EPISODE,
        "Brightline Supplies agreed to issue credit memo CM-5512 for 18,400 USD against "
        "upcoming invoices instead of wiring the money back.",
        10,
    )
    assert [] == await classes(finding, settled, 0.685)


def test_tense_tells_an_account_from_a_standing_state() -> None:
    """The classifier reads how many words tell of the past and how many of how things
    stand; "needed"-like regular pasts count, "speed" and "need" do not."""
    assert (0.0, 3.0) == _tense("Kim owns the ticket and is on call every Monday.")
    assert (2.0, 0.0) == _tense("Raised the pool to 200 and restarted the pods.")
    assert (1.0, 0.0) == _tense("We needed more speed.")
    assert (3.0, 0.0) == _tense("was were had did went")


async def test_a_change_told_by_a_later_occurrence_is_escalated_with_its_reason() -> None:
    """The classifier is sure the world changed, but the newer episode says it is another
    occurrence ("once again", a week later): escalated, and the reason says why; told on the
    same day without those words, it supersedes."""
    old = record(MemoryType.EPISODE, "The team tracks its work in Jira.", 2)
    again = record(
        MemoryType.EPISODE, "Once again the team switched its work tracking from Jira to Linear.", 9
    )
    found = await ConflictDetector().detect(again, [old], similarities={old.id: 0.8})
    assert [ConflictClassification.UNRESOLVABLE] == [c.classification for c in found]
    assert "another occurrence of an episode" in found[0].reason
    same_day = record(
        MemoryType.EPISODE, "The team switched its work tracking from Jira to Linear.", 2, 15
    )
    assert ["supersession"] == await classes(old, same_day, 0.8)


def test_odd_and_huge_text_is_judged_quickly_and_without_error() -> None:
    """NUL, other scripts, a run of "again" and 200 KB of text: the tense counts, the
    recurrence test and a whole judgement stay linear and raise nothing."""
    odd = "was\x00is " + "again once more the third week in a row " * 4_000 + "Ω ещё 再次 " * 2_000
    started = time.perf_counter()
    assert (1.0, 1.0) == _tense(odd)  # "was" and "is", split by the NUL
    assert says_again(odd)
    old = record(MemoryType.EPISODE, odd, 2)
    new = record(MemoryType.EPISODE, odd.replace("third", "fourth"), 9)
    assert later_occurrence(new, old)
    found = ConflictDetector().judge(old, new, float("nan"))
    assert found is None or found.classification is not ConflictClassification.SUPERSESSION
    assert time.perf_counter() - started < 2.0


async def test_two_accounts_naming_one_day_are_one_occurrence_whenever_written() -> None:
    """Two accounts of "the 12 March team lunch", written two days apart (their event times
    are when they were recorded), disagree on its cost: one occurrence, so the pair is
    judged. Without a day named in both, episodes that far apart are two occurrences and
    nothing is reported (the scope rule settles them before the classifier)."""
    old = record(
        MemoryType.EPISODE, "Team lunch expense on 12 March came to €284 with tip.", 12, 15
    )
    new = record(MemoryType.EPISODE, "The March 12 team lunch cost €248, tip included.", 14)
    assert await classes(old, new, 0.85)
    unnamed_old = record(MemoryType.EPISODE, "Team lunch expense came to €284 with tip.", 12, 15)
    unnamed_new = record(MemoryType.EPISODE, "The team lunch cost €248, tip included.", 14)
    assert [] == await classes(unnamed_old, unnamed_new, 0.85)
    other_day = record(MemoryType.EPISODE, "The 13 March team lunch cost €248, tip included.", 14)
    assert [] == await classes(old, other_day, 0.85)


def test_named_days_read_a_day_of_a_month_either_way_round_and_full_dates() -> None:
    """Only days a text fixes on the calendar count; words whose day depends on when they
    were said do not, nor does a month alone or a day that no month has."""
    assert named_days("on 12 March") == named_days("March 12th") == named_days("12th of Mar.")
    assert named_days("on 12 March") == {(0, 3, 12)}
    assert share_a_day("hearing on 2026-06-09", "heard on 9 June")
    assert not share_a_day("hearing on 2026-06-09", "heard on 2025-06-09")
    assert not share_a_day("on 12 March", "on 13 March")
    for text in ("today", "on Monday", "this morning", "in May 2026", "on 45 March"):
        assert named_days(text) == frozenset(), text
