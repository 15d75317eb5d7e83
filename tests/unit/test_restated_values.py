"""Hostile pass G: a restatement's values must be the same values, not only equal numbers.

``restates`` lets a proposal add a value token when the amounts of both statements are the
same once normalised ("25 km" / "25,000 metres"). These pairs read as equal amounts while the
facts differ: a month without a year, a scale word, a number with letters glued on, a decimal
with a trailing digit, a ten-digit number, the parts of a date in another order.
"""

from __future__ import annotations

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

#: (stored, proposed): the same facts written another way.
SAME = [
    ("The deadline is 2024-04-03", "The deadline is 3 April 2024"),
    ("2024-04-25: Team offsite in Lisbon, 18 people attended.",
     "Eighteen people came to the Lisbon team offsite on 25 April 2024."),
    ("The trail is 25 km long", "The trail is 25,000 metres long"),
    ("Pixel is our 4-year-old beagle", "Pixel is our beagle, four years old"),
    ("The app has 5 million users", "The app has 5 million users overall"),
    ("Maria prefers 18:00 meetings", "Maria prefers 6 pm meetings"),
    ("The team has 1,200 members", "The team has 1200 members"),
]  # fmt: skip


@pytest.mark.parametrize(("old", "new"), CHANGED)
def test_a_changed_value_is_no_restatement(old: str, new: str) -> None:
    """Equal numbers read from different values do not make the proposal a restatement."""
    assert not restates(_belief(old), _belief(new))


@pytest.mark.parametrize(("old", "new"), SAME)
def test_the_same_value_written_another_way_is_a_restatement(old: str, new: str) -> None:
    """Dates, units, number words, thousands groups and compounds still restate."""
    assert restates(_belief(old), _belief(new))
