"""Quantities in a statement, normalised so that equal amounts compare equal.

"24 hours", "one day" and "a day" are the same duration; "half a minute" is "30 seconds";
"2 GB" is "2048 MB". :func:`quantities` returns each amount it recognises as a
``(dimension, value)`` pair in a base unit (seconds, bytes, percent, money in its currency,
plain counts), so the conflict features can tell a restated amount from a changed one.
Pure functions, no I/O.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

_NUMBER_WORDS = {
    "zero": 0, "one": 1, "a": 1, "an": 1, "single": 1, "two": 2, "three": 3, "four": 4,
    "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
    "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "ninety": 90, "hundred": 100, "thousand": 1000, "dozen": 12,
    "half": 0.5, "quarter": 0.25, "couple": 2,
}  # fmt: skip
_SECOND = 1.0
_DURATIONS = {
    "ms": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": _SECOND, "sec": _SECOND, "secs": _SECOND, "second": _SECOND, "seconds": _SECOND,
    "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hrs": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "day": 86400.0, "days": 86400.0, "week": 604800.0, "weeks": 604800.0,
    "fortnight": 1209600.0, "month": 2592000.0, "months": 2592000.0,
    "year": 31536000.0, "years": 31536000.0,
}  # fmt: skip
_SIZES = {
    "b": 1.0, "byte": 1.0, "bytes": 1.0, "kb": 1024.0, "kib": 1024.0, "mb": 1024.0**2,
    "mib": 1024.0**2, "gb": 1024.0**3, "gib": 1024.0**3, "tb": 1024.0**4, "tib": 1024.0**4,
}  # fmt: skip
_RATES = {  # how often: once per this many seconds
    "hourly": 3600.0, "daily": 86400.0, "nightly": 86400.0, "weekly": 604800.0,
    "biweekly": 1209600.0, "fortnightly": 1209600.0, "monthly": 2592000.0,
    "quarterly": 7776000.0, "yearly": 31536000.0, "annually": 31536000.0,
}  # fmt: skip
#: A number: digits with optional thousands groups ("12,000", not "1,2,3") and decimals.
_DIGITS = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_TOKEN = re.compile(rf"[$€£]?(?:{_DIGITS})%?|°[cf]|[a-z]+", re.IGNORECASE)
_NUMERIC = re.compile(rf"([$€£]?)({_DIGITS})(%?)")
_CURRENCY = {"$": "usd", "€": "eur", "£": "gbp", "usd": "usd", "eur": "eur", "gbp": "gbp",
             "dollars": "usd", "euros": "eur", "pounds": "gbp"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Quantity:
    """One amount: its dimension (``duration``, ``size``, ``percent``, ``money:usd``,
    ``count``) and its value in the dimension's base unit."""

    dimension: str
    value: float


def _number(token: str) -> tuple[float, str, bool] | None:
    """The value of a numeric token, its currency sign and whether it ends in ``%``."""
    match = _NUMERIC.fullmatch(token)
    if match is None:
        return None
    try:
        return float(match.group(2).replace(",", "")), match.group(1), bool(match.group(3))
    except ValueError:
        return None


def _measured(value: float, unit: str, currency: str) -> Quantity | None:
    """The amount ``value`` of ``unit`` (the next word), or None when the word is no unit."""
    if not math.isfinite(value):
        return None
    if unit in _DURATIONS:
        return Quantity("duration", value * _DURATIONS[unit])
    if unit in _SIZES:
        return Quantity("size", value * _SIZES[unit])
    if unit in {"°c", "celsius"}:
        return Quantity("temperature", round(value))
    if unit in {"°f", "fahrenheit"}:
        return Quantity("temperature", round((value - 32) * 5 / 9))
    if unit in _CURRENCY:
        return Quantity(f"money:{_CURRENCY[unit]}", value)
    if currency:
        return Quantity(f"money:{_CURRENCY[currency]}", value)
    return None


@functools.lru_cache(maxsize=8192)
def quantities(text: str) -> tuple[Quantity, ...]:
    """Every amount in ``text``, in order of appearance, normalised to base units."""
    tokens = [t.casefold() for t in _TOKEN.findall(text)]
    found: list[Quantity] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        parsed = _number(token)
        if token in _RATES:
            found.append(Quantity("period", _RATES[token]))
        elif parsed is not None and parsed[2]:
            found.append(Quantity("percent", parsed[0]))
        elif parsed is not None or (token in _NUMBER_WORDS and i + 1 < len(tokens)):
            if parsed is None:
                value, currency = float(_NUMBER_WORDS[token]), ""
                # "half a minute", "a couple of days": the next words may repeat the amount
                while i + 1 < len(tokens) and tokens[i + 1] in {"a", "an", "of"}:
                    i += 1
            else:
                value, currency = parsed[0], parsed[1]
            unit = tokens[i + 1] if i + 1 < len(tokens) else ""
            measured = _measured(value, unit, currency)
            if measured is not None:
                found.append(measured)
                i += 0 if currency and unit not in _CURRENCY else 1
            elif parsed is not None:
                found.append(Quantity("count", value))  # a number word alone is no amount
        i += 1
    return tuple(found)


def amount_word(token: str) -> bool:
    """A token that can be part of how an amount is written: a number, a number word, a unit
    or a rate ("24", "one", "hours", "daily"); weekdays and months are values but no amounts."""
    word = token.casefold()
    return (
        any(c.isdigit() for c in word)
        or word in _NUMBER_WORDS
        or word in _DURATIONS
        or word in _SIZES
        or word in _RATES
        or word in _CURRENCY
        or f"{word}s" in _DURATIONS  # a stem: "hour" of "hours"
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


def _key(quantity: Quantity) -> tuple[str, float]:
    return quantity.dimension, round(quantity.value, 6)
