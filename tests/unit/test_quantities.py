"""Amounts read from statements: equal amounts in other units compare equal, others do not."""

from __future__ import annotations

import time

import pytest

from engram.memory.conflict.cues import is_value
from engram.memory.conflict.quantities import (
    Quantity,
    amount_word,
    changed_amounts,
    quantities,
    same_amounts,
)
from engram.memory.conflict.restatement import marks, restates
from engram.memory.types import MemoryRecord, MemoryType

SAME = [
    ("a delivery radius of 25,000 metres", "a delivery radius of 25 km"),
    ("the sofa is 2.2 metres across", "the sofa is 220 cm wide"),
    ("1.2 hectares of floor space", "12,000 m² of floor space"),
    ("three square metres", "3 m²"),
    ("a 300 cm door", "a 3 metre door"),
    ("five kilometres", "5 km"),
    ("2 kilos of flour", "2000 g of flour"),
    ("closes at 18:00", "closes at 6 pm"),
    ("before 14:00", "before 2 p.m."),
    ("at 6:30 pm", "at 18:30"),
    ("at noon", "at 12:00"),
    ("on 3 April 2024", "on 2024-04-03"),
    ("30 Jan 2024", "2024-01-30"),
    ("April 25, 2024", "the 25th of April 2024"),
    ("kept for one and a half years", "kept for 18 months"),
    ("a year and a half", "18 months"),
    ("twelve months", "one year"),
    ("soak for ten minutes", "soak for 10 minutes"),
    ("twenty-five days", "25 days"),
    ("Eighteen people came", "18 people came"),
    ("wait a day", "wait 24 hours"),
]

DIFFERENT = [
    ("25 km", "2.5 km"),
    ("2.2 m", "22 cm"),
    ("closes at 6 pm", "closes at 6 am"),
    ("on 3 April 2024", "on 4 April 2024"),
    ("on 3 April 2024", "on 2025-04-03"),
    ("18 months", "one year"),
    ("30 days", "one month"),
    ("1.2 hectares", "1,200 m²"),
    ("at 14:00", "at 4 pm"),
]


@pytest.mark.parametrize(("left", "right"), SAME)
def test_an_amount_written_another_way_is_the_same_amount(left: str, right: str) -> None:
    """Units, number words, times of day and dates written two ways compare equal."""
    assert quantities(left), left
    assert True is same_amounts(left, right)
    assert False is changed_amounts(left, right)


@pytest.mark.parametrize(("left", "right"), DIFFERENT)
def test_another_amount_of_the_same_kind_is_a_change(left: str, right: str) -> None:
    """A different length, time, date or duration is not the same amount, and is a change."""
    assert False is same_amounts(left, right)
    assert True is changed_amounts(left, right)


def test_what_each_kind_is_read_as() -> None:
    """Each dimension's base unit: metres, square metres, kilograms, minutes, days."""
    assert quantities("25 km, 2 ha, 500 g, 6 pm, 2024-01-01") == (
        Quantity("length", 25000.0),
        Quantity("area", 20000.0),
        Quantity("mass", 0.5),
        Quantity("clock", 1080.0),
        Quantity("date", 738886.0),
    )


def test_words_that_are_only_sometimes_numbers_are_no_amount_alone() -> None:
    """'one', 'a' and 'half' count only before a unit; 'eighteen' counts on its own."""
    assert () == quantities("one of them said a word about half of it")
    assert (Quantity("count", 18.0),) == quantities("eighteen attended")
    assert (Quantity("count", 0.0),) == quantities("the axis starts at zero")


@pytest.mark.parametrize(
    "text", ["31 February 2024", "on 2024-13-40", "at 13 pm", "at 0 am", "at 99:99"]
)
def test_an_impossible_date_or_time_is_not_read_and_does_not_raise(text: str) -> None:
    """A date or time of day that cannot exist is no amount of its kind."""
    assert all(q.dimension not in {"date", "clock"} for q in quantities(text))


def test_a_long_text_of_numbers_and_dates_is_read_in_linear_time() -> None:
    """A crafted statement of many amounts, dates and clock times is read quickly."""
    text = "on 3 April 2024 at 6 pm for 2.5 km and ten minutes, " * 2_000
    started = time.perf_counter()
    found = quantities(text)
    assert len(found) == 8_000
    assert time.perf_counter() - started < 1.0


def test_month_names_and_clock_words_are_amount_words_and_months_are_no_names() -> None:
    """A date's month is part of the amount, not a name that one side alone mentions."""
    assert True is (amount_word("April") and amount_word("pm") and amount_word("metres"))
    assert False is amount_word("Tuesday")
    assert True is is_value("april")
    assert frozenset() == marks("Team offsite on 25 April 2024.")


def _belief(text: str) -> MemoryRecord:
    return MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="agent")


def test_a_restatement_may_write_its_date_and_counts_another_way() -> None:
    """The same event with the date and the count written otherwise restates it; another day
    or another count does not."""
    old = _belief("2024-04-25: Team offsite in Lisbon, 18 people attended.")
    same = _belief("Eighteen people came to the Lisbon team offsite on 25 April 2024.")
    other_day = _belief("Eighteen people came to the Lisbon team offsite on 26 April 2024.")
    other_count = _belief("Nineteen people came to the Lisbon team offsite on 25 April 2024.")
    assert True is restates(old, same)
    assert False is restates(old, other_day)
    assert False is restates(old, other_count)
