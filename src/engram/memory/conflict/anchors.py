"""When a statement says its claim held: the times it names, and whether it reports an
observation made then (ADR-010).

"Cert expiry report, 1 Feb run: 17 certificates expire within 30 days" stays true after "1 Mar
run: only 3 expiring": each is a reading taken at a moment it names, and a later reading does
not end an earlier one. "The store closes at 21:00" is a standing state that a later record
can end. The conflict model reads both sides' anchors (a day, a date, a time of day, a
weekday, a season, "yesterday", "this morning") and whether the older one reports what was
found then ("report", "check", "inspection", "averaged", "found"). Pure functions; each text
is read once (cached), in time linear in its length.
"""

from __future__ import annotations

import re
from datetime import date

from engram.memory.conflict.memo import per_text
from engram.memory.conflict.quantities import readings

_MONTH_NAMES = (
    "January|February|March|April|May|June|July|August|September|October|November|December"
    "|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
#: Moments named in words, in any case.
_MOMENT = re.compile(
    r"\b(?:today|tonight|yesterday|this (?:morning|afternoon|evening|week)"
    r"|last (?:night|week|month|year)|on (?:mon|tues|wednes|thurs|fri|satur|sun)day"
    r"|(?:mon|tues|wednes|thurs|fri|satur|sun)day(?:'s)?|spring|summer|autumn|winter|q[1-4]"
    r"|week \d+|at the \w+ check)\b",
    re.IGNORECASE,
)
#: Days of a month and months, the month's name capitalised ("1 Feb", "March 10", "April").
_DAY = re.compile(
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTH_NAMES})\b"
    rf"|\b(?:{_MONTH_NAMES})\.?\s+\d{{1,2}}\b|\b(?:{_MONTH_NAMES})\b"
)
#: Words of a reading taken or a result found at a moment.
_OBSERVED = re.compile(
    r"\b(?:report|run|check|inspection|re-inspection|audit|count|stock take|results?|mock"
    r"|review|reading|meter read|survey|test|scan|measured|found|reported|showed|averaged"
    r"|read)\b",
    re.IGNORECASE,
)


@per_text(8192)  # a stored neighbour's side is read again on every write
def anchors(text: str) -> frozenset[str]:
    """The moments ``text`` names: words of time as written (case-folded), and its times of
    day and dates by value."""
    found = {match.group(0).casefold() for match in _MOMENT.finditer(text)}
    found |= {match.group(0).casefold() for match in _DAY.finditer(text)}
    found |= {
        f"{reading.quantity.dimension}:{reading.quantity.value}"
        for reading in readings(text)
        if reading.quantity.dimension in {"clock", "date"}
    }
    return frozenset(found)


#: A day of a month, either way round ("12 March", "12th of March", "March 12", "Mar. 12th").
_DAY_OF_MONTH = re.compile(
    rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_NAMES})\b"
    rf"|\b({_MONTH_NAMES})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b"
)
#: A date written the ISO way ("2026-06-09").
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTHS = {
    month: n
    for n, month in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1
    )
}


@per_text(8192)
def named_days(text: str) -> frozenset[tuple[int, int, int]]:
    """The calendar days ``text`` names, as (year, month, day) with year 0 when it is not
    written: days of a month either way round, and ISO dates. Words of time whose day depends
    on when they were said ("today", "Monday", "this morning") are not among them. Two regular
    expressions: linear in the text."""
    found: set[tuple[int, int, int]] = set()
    for match in _DAY_OF_MONTH.finditer(text):
        day, month = match.group(1, 2) if match.group(1) else match.group(4, 3)
        if 1 <= int(day) <= 31:
            found.add((0, _MONTHS[month[:3].casefold()], int(day)))
    for match in _ISO_DATE.finditer(text):
        year, month, day = (int(part) for part in match.groups())
        if year and 1 <= month <= 12 and 1 <= day <= 31:  # year 0 stands for none
            found.add((year, month, day))
    return frozenset(found)


def _dated(days: frozenset[tuple[int, int, int]], on: date | None) -> set[tuple[int, int, int]]:
    """``days`` with each day written without its year given the year that puts it nearest
    ``on`` (a day no such year has, "31 February", is dropped); as they are without ``on``."""
    if on is None:
        return set(days)
    dated = set()
    for year, month, day in days:
        if year:
            dated.add((year, month, day))
            continue
        nearest = None
        for candidate in range(on.year - 4, on.year + 5):  # 29 February: a leap year
            try:
                when = date(candidate, month, day)
            except ValueError:
                continue
            if nearest is None or abs(when - on) < abs(nearest - on):
                nearest = when
        if nearest is not None:
            dated.add((nearest.year, month, day))
    return dated


def share_a_day(
    left: str, right: str, *, left_on: date | None = None, right_on: date | None = None
) -> bool:
    """Whether the two texts name one calendar day. A day without its year is that day
    nearest ``left_on`` (``right_on``), the day its text was recorded, when given; else it
    matches that day of any year. Linear in the days named (sets, not every pair of days:
    two texts of 16,000 characters of dates took 1.5 s)."""
    ours, theirs = _dated(named_days(left), left_on), _dated(named_days(right), right_on)
    return bool(
        ours & theirs
        or {day[1:] for day in ours if not day[0]} & {day[1:] for day in theirs}
        or {day[1:] for day in theirs if not day[0]} & {day[1:] for day in ours}
    )


@per_text(8192)
def observation(text: str) -> bool:
    """Whether ``text`` reports a reading or a result at a moment it names."""
    return bool(anchors(text)) and _OBSERVED.search(text) is not None
