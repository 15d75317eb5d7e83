"""Hostile pass G: what ``restates`` (the advisor's NOOP) must not take for a restatement.

It lets a proposal add a value token when the amounts of both statements are the same once
normalised ("25 km" / "25,000 metres"). The first pairs read as equal amounts while the facts
differ: a month without a year, a scale word, a number with letters glued on, a decimal with
a trailing digit, a ten-digit number, the parts of a date in another order. The others keep
a sentence word for word around one swapped verb or noun, or add a bound, an exception or a
scope in two or three words.
"""

from __future__ import annotations

import time

import pytest

from engram.memory.conflict.restatement import restates
from engram.memory.types import MemoryRecord, MemoryType


def _belief(content: str) -> MemoryRecord:
    return MemoryRecord.draft(MemoryType.BELIEF, content, source_agent="agent-g")


#: (stored, proposed): each proposal changes a fact of the stored record.
CHANGED = [
    ("The product launch is on 3 April", "The product launch is on 3 June"),
    ("The offsite is on 3 June", "The offsite is on 3 May"),
    ("The 2 day offsite is in April", "The 2 day offsite is in June"),
    ("The service runs on Python 3.10", "The service runs on Python 3.1"),
    ("The cache holds 10K entries", "The cache holds 10 entries"),
    ("The marketing budget is $5k", "The marketing budget is $5M"),
    ("The app has 5 million users", "The app has 5 billion users"),
    ("The support hotline number is 5550123456", "The support hotline number is 5550123457"),
    ("The invoice date is 03/04/2024", "The invoice date is 04/03/2024"),
]

#: (stored, proposed): the same sentence with one thing swapped, bounded or scoped.
CHANGED_WORDS = [
    ("The lease was signed on 3 April 2024", "The lease expires on 3 April 2024"),
    ("Alice approved the budget of $5,000", "Alice requested the budget of $5,000"),
    ("The new hire starts on 1 March 2025", "The new hire leaves on 1 March 2025"),
    ("Ravi leads the mobile team", "Ravi left the mobile team"),
    ("2024-03-18: Booked a hotel in Porto for the conference.",
     "2024-03-18: Booked flights to Porto for the conference."),
    ("The cache TTL is 5 minutes", "The cache TTL is at least 5 minutes"),
    ("The pool allows up to 40 connections", "The pool requires at least 40 connections"),
    ("The office is open on weekdays", "The office is open only on weekdays"),
    ("The job runs every 6 hours", "The job runs every 6 hours except weekends"),
    ("The team uses Slack for alerts", "The team uses Slack for alerts in production"),
    ("The kids go to bed at 8 pm", "The kids go to bed at 8 pm on school nights"),
    ("The retro happens every sprint", "The retro happens every other sprint"),
    ("The invoice is due in thirty days", "The invoice is due in thirty business days"),
    ("The 9 am train is usually late", "The 9 pm train is usually late"),
    ("The vendor contract auto-renews every year",
     "The vendor contract auto-renews every year unless cancelled"),
]  # fmt: skip

#: (stored, proposed): the same facts written another way.
SAME = [
    ("The deadline is 2024-04-03", "The deadline is 3 April 2024"),
    ("2024-04-25: Team offsite in Lisbon, 18 people attended.",
     "Eighteen people came to the Lisbon team offsite on 25 April 2024."),
    ("The trail is 25 km long", "The trail is 25,000 metres long"),
    ("Pixel is our 4-year-old beagle", "Pixel is our beagle, four years old"),
    ("The app has 5 million users", "The app has 5 million users overall"),
    ("Maria prefers 18:00 meetings", "Maria prefers 6 pm meetings"),
    ("The team prefers the 6 pm slot for retros", "The team likes the 18:00 slot for retros"),
    ("The team has 1,200 members", "The team has 1200 members"),
    ("Alerts without a runbook link get ignored at night.",
     "At night, on-call engineers ignore alerts that come without a runbook link."),
    ("The Berlin office closes at 6 pm on Fridays.",
     "On Fridays the Berlin office shuts its doors at 18:00."),
    ("Maya will attend Hillcrest Primary from September.",
     "From September, Maya's school is Hillcrest Primary."),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new"), CHANGED)
def test_a_changed_value_is_no_restatement(old: str, new: str) -> None:
    """Equal numbers read from different values do not make the proposal a restatement."""
    assert not restates(_belief(old), _belief(new))


@pytest.mark.parametrize(("old", "new"), CHANGED_WORDS)
def test_a_swapped_bounded_or_scoped_claim_is_no_restatement(old: str, new: str) -> None:
    """A kept sentence with one verb or noun swapped, or a bound, an exception or a scope
    added, says something new."""
    assert not restates(_belief(old), _belief(new))


@pytest.mark.parametrize(("old", "new"), SAME)
def test_the_same_value_written_another_way_is_a_restatement(old: str, new: str) -> None:
    """Dates, units, number words, thousands groups and compounds still restate."""
    assert restates(_belief(old), _belief(new))


def test_a_long_code_of_numbers_is_compared_in_one_pass() -> None:
    """A record written as one code of 5,000 numbers ("1/1/1/…") is read once, not once per
    number: comparing each number's whole code took 22 s for this text."""
    code = "/".join(["1"] * 5000)
    started = time.monotonic()
    assert not restates(_belief(f"The key is {code}"), _belief(f"The key is {code}/2"))
    assert time.monotonic() - started < 5.0
