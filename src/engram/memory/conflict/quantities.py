"""Quantities in a statement, normalised so that equal amounts compare equal.

"24 hours", "one day" and "a day" are the same duration; "half a minute" is "30 seconds";
"2 GB" is "2048 MB"; "25 km" is "25,000 metres"; "1.2 hectares" is "12,000 m²"; "18:00" is
"6 pm"; "2024-04-03" is "3 April 2024". :func:`quantities` returns each amount it recognises
as a ``(dimension, value)`` pair in a base unit (seconds, bytes, metres, square metres,
kilograms, percent, money in its currency, minutes after midnight, days since year 1, plain
counts), so the conflict features can tell a restated amount from a changed one. Pure
functions, no I/O.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass

from engram.memory.conflict.memo import per_text

_NUMBER_WORDS = {
    "zero": 0, "one": 1, "a": 1, "an": 1, "single": 1, "two": 2, "three": 3, "four": 4,
    "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
    "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
    "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40,
    "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "thousand": 1000, "dozen": 12, "half": 0.5, "quarter": 0.25, "couple": 2,
}  # fmt: skip
#: Number words that are also articles or pronouns ("a", "one of them"): an amount only
#: before a unit. The others count on their own ("eighteen people" is "18 people").
_WEAK_WORDS = frozenset({"a", "an", "one", "single", "half", "quarter", "couple", "dozen"})
_TENS = frozenset({"twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"})
_SECOND = 1.0
_YEAR = 31536000.0
_DURATIONS = {
    "ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": _SECOND, "sec": _SECOND, "secs": _SECOND, "second": _SECOND, "seconds": _SECOND,
    "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "day": 86400.0, "days": 86400.0, "week": 604800.0, "weeks": 604800.0,
    "fortnight": 1209600.0, "month": _YEAR / 12, "months": _YEAR / 12,
    "year": _YEAR, "years": _YEAR,
}  # fmt: skip
_SIZES = {
    "b": 1.0, "byte": 1.0, "bytes": 1.0, "kb": 1024.0, "kib": 1024.0, "mb": 1024.0**2,
    "mib": 1024.0**2, "gb": 1024.0**3, "gib": 1024.0**3, "tb": 1024.0**4, "tib": 1024.0**4,
}  # fmt: skip
_LENGTHS = {  # metres
    "mm": 0.001, "millimetre": 0.001, "millimetres": 0.001, "millimeter": 0.001,
    "millimeters": 0.001, "cm": 0.01, "centimetre": 0.01, "centimetres": 0.01,
    "centimeter": 0.01, "centimeters": 0.01, "m": 1.0, "metre": 1.0, "metres": 1.0,
    "meter": 1.0, "meters": 1.0, "km": 1000.0, "kilometre": 1000.0, "kilometres": 1000.0,
    "kilometer": 1000.0, "kilometers": 1000.0, "mile": 1609.344, "miles": 1609.344,
    "ft": 0.3048, "foot": 0.3048, "feet": 0.3048, "yard": 0.9144, "yards": 0.9144,
    "inch": 0.0254, "inches": 0.0254,
}  # fmt: skip
_AREAS = {  # square metres; "sq m" and "square feet" are read from the lengths
    "m²": 1.0, "sqm": 1.0, "km²": 1e6, "ha": 1e4, "hectare": 1e4, "hectares": 1e4,
    "acre": 4046.8564224, "acres": 4046.8564224,
}  # fmt: skip
_MASSES = {  # kilograms
    "mg": 1e-6, "g": 0.001, "gram": 0.001, "grams": 0.001, "kg": 1.0, "kilo": 1.0,
    "kilos": 1.0, "kilogram": 1.0, "kilograms": 1.0, "tonne": 1000.0, "tonnes": 1000.0,
    "lb": 0.45359237, "lbs": 0.45359237,
}  # fmt: skip
_RATES = {  # how often: once per this many seconds
    "hourly": 3600.0, "daily": 86400.0, "nightly": 86400.0, "weekly": 604800.0,
    "biweekly": 1209600.0, "fortnightly": 1209600.0, "monthly": 2592000.0,
    "quarterly": 7776000.0, "yearly": 31536000.0, "annually": 31536000.0,
}  # fmt: skip
_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4,
    "apr": 4, "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
    "september": 9, "sep": 9, "sept": 9, "october": 10, "oct": 10, "november": 11,
    "nov": 11, "december": 12, "dec": 12,
}  # fmt: skip
#: A number: digits with optional thousands groups ("12,000", not "1,2,3") and decimals.
_DIGITS = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_TOKEN = re.compile(rf"[$€£]?(?:{_DIGITS})%?|°[cf]|[a-z]+[²³]?", re.IGNORECASE)
_NUMERIC = re.compile(rf"([$€£]?)({_DIGITS})(%?)")
_CURRENCY = {"$": "usd", "€": "eur", "£": "gbp", "usd": "usd", "eur": "eur", "gbp": "gbp",
             "dollars": "usd", "euros": "eur", "pounds": "gbp"}  # fmt: skip

#: Times of day: "18:00", "6 pm", "6:30 p.m.", "noon", "midnight".
_CLOCK = re.compile(
    r"\b(?:(\d{1,2})(?::([0-5]\d))?\s?([ap])\.?\s?m\b\.?|([01]?\d|2[0-3]):([0-5]\d)\b"
    r"|(noon|midday|midnight)\b)",
    re.IGNORECASE,
)
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
#: Dates: "2024-04-03", "3 April 2024", "3rd of April, 2024", "April 3, 2024", "30 Jan 2024".
_DATE = re.compile(
    r"\b(?:(\d{4})-(\d{2})-(\d{2})"
    rf"|(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH})\.?,?\s+(\d{{4}})"
    rf"|({_MONTH})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}}))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Quantity:
    """One amount: its dimension (``duration``, ``size``, ``length``, ``area``, ``mass``,
    ``percent``, ``money:usd``, ``clock``, ``date``, ``count``) and its value in the
    dimension's base unit."""

    dimension: str
    value: float


@dataclass(frozen=True, slots=True)
class Reading:
    """An amount where it is written: ``text[start:end]``, its quantity and a key that
    compares it (the normalised value, or a plain number's digits as written)."""

    start: int
    end: int
    quantity: Quantity
    written: tuple[str, str]


#: Significant digits an amount is compared to: a conversion's floating-point residue sits
#: near the sixteenth; a written amount ("5550123456") keeps every digit up to the twelfth.
_SIGNIFICANT = 12


def _exact(dimension: str, value: float) -> Quantity:
    """A quantity whose value is rounded to :data:`_SIGNIFICANT` digits, so that a
    conversion's floating-point residue ("2.2 m" against "220 cm") does not tell equal
    amounts apart."""
    rounded = float(f"{value:.{_SIGNIFICANT}g}") if math.isfinite(value) else value
    return Quantity(dimension, rounded)


def _number(token: str) -> tuple[float, str, bool] | None:
    """The value of a numeric token, its currency sign and whether it ends in ``%``."""
    match = _NUMERIC.fullmatch(token)
    if match is None:
        return None
    try:
        return float(match.group(2).replace(",", "")), match.group(1), bool(match.group(3))
    except ValueError:
        return None


def _measured(value: float, unit: str, following: str, currency: str) -> Quantity | None:
    """The amount ``value`` of ``unit`` (the next word; ``following`` the one after it), or
    None when the word is no unit."""
    if not math.isfinite(value):
        return None
    for dimension, table in (("duration", _DURATIONS), ("size", _SIZES)):
        if unit in table:
            return _exact(dimension, value * table[unit])
    if unit in _TEMPERATURES:
        # to a tenth of a degree: "140 °F" is "60 °C", a fever of 38.4 °C is not one of 38.2
        return Quantity("temperature", round(_TEMPERATURES[unit](value), 1))
    if unit in _CURRENCY or currency:
        return Quantity(f"money:{_CURRENCY[unit if unit in _CURRENCY else currency]}", value)
    if unit in {"sq", "square"} and following in _LENGTHS:
        return _exact("area", value * _LENGTHS[following] ** 2)
    for dimension, table in (("area", _AREAS), ("length", _LENGTHS), ("mass", _MASSES)):
        if unit in table:
            return _exact(dimension, value * table[unit])
    return None


_TEMPERATURES = {
    "°c": lambda v: v,
    "celsius": lambda v: v,
    "°f": lambda v: (v - 32) * 5 / 9,
    "fahrenheit": lambda v: (v - 32) * 5 / 9,
}


def _clock(match: re.Match[str]) -> Quantity | None:
    """Minutes after midnight of a time of day, or None for an impossible one ("13 pm")."""
    hour, minute, half, hour24, minute24, word = match.groups()
    if word is not None:
        return Quantity("clock", 0.0 if word.casefold() == "midnight" else 720.0)
    if hour24 is not None:
        return Quantity("clock", float(int(hour24) * 60 + int(minute24)))
    hours = int(hour)
    if not 1 <= hours <= 12:
        return None
    hours = hours % 12 + (12 if half.casefold() == "p" else 0)
    return Quantity("clock", float(hours * 60 + int(minute or 0)))


def _date(match: re.Match[str]) -> Quantity | None:
    """The day a date names (days since year 1), or None for an impossible one."""
    g = match.groups()
    if g[0] is not None:
        year, month, day = int(g[0]), int(g[1]), int(g[2])
    elif g[3] is not None:
        year, month, day = int(g[5]), _MONTHS[g[4].casefold()], int(g[3])
    else:
        year, month, day = int(g[8]), _MONTHS[g[6].casefold()], int(g[7])
    try:
        return Quantity("date", float(dt.date(year, month, day).toordinal()))
    except ValueError:
        return None


def _written(text: str) -> tuple[list[Reading], str]:
    """Times of day and dates where they are written, and the text with them blanked out (so
    their digits are not read again as counts)."""
    found: list[Reading] = []
    chars = list(text)
    for pattern, read in ((_DATE, _date), (_CLOCK, _clock)):
        for match in pattern.finditer("".join(chars)):
            quantity = read(match)
            if quantity is not None:
                found.append(Reading(match.start(), match.end(), quantity, _key(quantity)))
                chars[match.start() : match.end()] = " " * (match.end() - match.start())
    return found, "".join(chars)


def _word_value(tokens: list[str], i: int) -> tuple[float, int]:
    """The value of the number word at ``tokens[i]`` and the index of its last word:
    "twenty five" is 25 (a hyphen splits "twenty-five" into two tokens)."""
    value = float(_NUMBER_WORDS[tokens[i]])
    if (
        tokens[i] in _TENS
        and i + 1 < len(tokens)
        and tokens[i + 1] in _NUMBER_WORDS
        and 1 <= _NUMBER_WORDS[tokens[i + 1]] <= 9
        and tokens[i + 1] not in _WEAK_WORDS | {"one"}
    ):
        return value + _NUMBER_WORDS[tokens[i + 1]], i + 1
    return value, i


def _amount_at(tokens: list[str], i: int) -> tuple[Quantity | None, int]:
    """The amount that the number (digits or words) at ``tokens[i]`` starts, and the index of
    its last token; None for a number word that is no amount there ("one of them")."""
    token = tokens[i]
    parsed = _number(token)
    if parsed is None:
        value, i = _word_value(tokens, i)
        currency = ""
    else:
        value, currency = parsed[0], parsed[1]
    if tokens[i + 1 : i + 4] == ["and", "a", "half"]:  # "one and a half years"
        value, i = value + 0.5, i + 3
    if parsed is None:
        # "half a minute", "a couple of days": the next words may repeat the amount
        while i + 1 < len(tokens) and tokens[i + 1] in {"a", "an", "of"}:
            i += 1
    unit = tokens[i + 1] if i + 1 < len(tokens) else ""
    following = tokens[i + 2] if i + 2 < len(tokens) else ""
    measured = _measured(value, unit, following, currency)
    if measured is None:
        plain = parsed is not None or token not in _WEAK_WORDS
        return (_exact("count", value) if plain else None), i
    if currency and unit not in _CURRENCY:
        return measured, i  # "$5 per seat": the next word is read on its own
    i += 2 if unit in {"sq", "square"} else 1
    if tokens[i + 1 : i + 4] == ["and", "a", "half"] and value > 0:  # "a year and a half"
        measured = _exact(measured.dimension, measured.value * (value + 0.5) / value)
        i += 3
    return measured, i


@per_text(8192)
def readings(text: str) -> tuple[Reading, ...]:
    """Every amount in ``text`` where it is written, in order of appearance."""
    found, rest = _written(text)
    matches = list(_TOKEN.finditer(rest))
    tokens = [m.group(0).casefold() for m in matches]
    i = 0
    while i < len(tokens):
        token, first = tokens[i], i
        parsed = _number(token)
        amount: Quantity | None = None
        if token in _RATES:
            amount = Quantity("period", _RATES[token])
        elif parsed is not None and parsed[2]:
            amount = Quantity("percent", parsed[0])
        elif parsed is not None or (
            token in _NUMBER_WORDS and (i + 1 < len(tokens) or token not in _WEAK_WORDS)
        ):
            amount, i = _amount_at(tokens, i)
        if amount is not None:
            start, end = matches[first].start(), matches[i].end()
            written = _key(amount)
            if amount.dimension == "count":
                # a plain number is compared as written: "3.10" is not "3.1", and a
                # ten-digit number is not rounded to nine digits ("eighteen" is "18")
                digits = token.replace(",", "") if parsed is not None and i == first else ""
                written = ("count", digits or f"{amount.value:.15g}")
            found.append(Reading(start, end, amount, written))
        i += 1
    return tuple(sorted(found, key=lambda reading: reading.start))


@per_text(8192)
def quantities(text: str) -> tuple[Quantity, ...]:
    """Every amount in ``text``, in order of appearance, normalised to base units."""
    return tuple(reading.quantity for reading in readings(text))


def amount_word(token: str) -> bool:
    """A token that can be part of how an amount is written: a number, a number word, a unit
    or a rate ("24", "one", "hours", "daily", "pm", "april"); weekdays are values but no
    amounts."""
    word = token.casefold()
    return (
        any(c.isdigit() for c in word)
        or word in _UNIT_WORDS
        or f"{word}s" in _UNIT_WORDS  # a stem: "hour" of "hours"
    )


def month_word(token: str) -> bool:
    """A month's name or its abbreviation ("April", "Jan")."""
    return token.casefold() in _MONTHS


_UNIT_WORDS = frozenset(
    {*_NUMBER_WORDS, *_DURATIONS, *_SIZES, *_LENGTHS, *_AREAS, *_MASSES, *_RATES, *_CURRENCY}
    | {*_MONTHS, "sq", "square", "am", "pm", "noon", "midday", "midnight", "and"}
)


def same_amounts(old_text: str, new_text: str) -> bool:
    """Both statements state amounts and they are the same once normalised."""
    old, new = quantities(old_text), quantities(new_text)
    return bool(old) and sorted(old, key=_key) == sorted(new, key=_key)


def changed_amounts(old_text: str, new_text: str) -> bool:
    """An amount of one dimension in the older statement has another value in the newer."""
    old, new = quantities(old_text), quantities(new_text)
    for dimension in {q.dimension for q in old} & {q.dimension for q in new}:
        before = {q.value for q in old if q.dimension == dimension}
        after = {q.value for q in new if q.dimension == dimension}
        # a value replaced, not one added beside the others ("also 5 GB")
        if before != after and not before < after:
            return True
    return False


def _key(quantity: Quantity) -> tuple[str, str]:
    """Significant digits, not decimals: "2.5 mg" (2.5e-06 kg) is not "2.6 mg"."""
    return quantity.dimension, f"{quantity.value:.{_SIGNIFICANT}g}"
