"""Contact details: e-mail addresses and phone numbers (``email``, ``phone``)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import phonenumbers

from engram.memory.gate.pii.findings import PiiKind, Span, Text

# --------------------------------------------------------------------------- email

_EMAIL = re.compile(
    r"(?<![\w.%+\-])[^\W_](?:[\w.%+\-]{0,62}[\w%+\-])?"
    r"@(?:[^\W_](?:[\w\-]{0,61}[^\W_])?\.)+[^\W\d_]{2,24}(?![\w\-])"
)


def find_emails(t: Text) -> Iterator[Span]:
    text = t.raw
    if "@" not in text:
        return
    for m in _EMAIL.finditer(text):
        start, end = m.span()
        token_start = max(text.rfind(" ", 0, start), text.rfind("\n", 0, start)) + 1
        if "://" in text[token_start:start]:
            continue  # user info of a URL, not an address
        if end + 1 < len(text) and text[end] == ":" and not text[end + 1].isspace():
            continue  # SSH remote: git@host:org/repo
        yield PiiKind.EMAIL, start, end


# --------------------------------------------------------------------------- phone numbers

# A run of digits and phone punctuation that may hold a number; the matcher reads each run.
_PHONE_RUN = re.compile(r"(?<![\w+])\+?\(?\d[\d \t().\-/]{5,24}\d")
_NOT_PHONE_LABEL = re.compile(
    r"(?i)(?:\b(?:order|ticket|invoice|inv|build|issue|pr|case|ref|reference|tracking|acct"
    r"|account|po|job|run|batch|txn|transaction|confirmation|serial|sku|version|release|id"
    r"|item|part|incident|request|req|pipeline|commit|cve|patent|isbn|seed|port|pin)"
    r"(?:[ \t]*(?:no\.?|number|num|id|#))?[ \t]*[#:=]?|#)[ \t]*$"
)
_GLUE = frozenset("-_/#.@=\\")
_PHONE_WORDS = (
    "phone", "tel", "mobile", "cell", "call", "fax", "whatsapp", "signal", "landline", "handy",
    "portable", "ring", "text", "sms", "dial", "contact",
)  # fmt: skip
# Regions tried for a number in national format (trunk prefix 0) near a phone keyword.
_NATIONAL_REGIONS = ("GB", "DE", "FR", "IT", "NL", "BE", "AT", "CH", "IE", "AU", "IN", "JP", "BR")


def _phone_span_ok(text: str, start: int, end: int) -> bool:
    """False when the digits are glued to another token or follow an order-like label."""
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    if before.isalnum() or before in _GLUE:
        return False
    if after.isalnum() or after in "-_/@=" or (after in ".:" and text[end + 1 : end + 2].isdigit()):
        return False
    return _NOT_PHONE_LABEL.search(text, max(0, start - 32), start) is None


def _national_phone_ok(candidate: str) -> bool:
    """True if some common region reads ``candidate`` as a valid national number."""
    for region in _NATIONAL_REGIONS:
        try:
            number = phonenumbers.parse(candidate, region)
        except phonenumbers.NumberParseException:
            return False
        if phonenumbers.is_valid_number(number):
            return True
    return False


def find_phones(t: Text, taken: list[Span]) -> Iterator[Span]:
    """Phone numbers in digit runs that no more specific finding already covers."""
    text = t.raw
    if t.digits < 7:
        return
    national: bool | None = None  # whether a phone keyword occurs; computed on first need
    for run in _PHONE_RUN.finditer(text):
        start, end = run.span()
        if any(s < end and start < e for _, s, e in taken):
            continue
        if sum(c.isdigit() for c in run.group(0)) < 7:
            continue
        # The matcher looks one character around a candidate (letters, time suffixes).
        left, right = max(0, start - 1), min(len(text), end + 3)
        found = False
        matcher = phonenumbers.PhoneNumberMatcher(
            text[left:right], "US", leniency=phonenumbers.Leniency.VALID
        )
        for match in matcher:
            m_start, m_end = left + match.start, left + match.end
            if _phone_span_ok(text, m_start, m_end):
                found = True
                yield PiiKind.PHONE, m_start, m_end
        if found or not run.group(0).lstrip("(").startswith("0"):
            continue
        if national is None:
            national = any(word in t.lower for word in _PHONE_WORDS)
        if national and _phone_span_ok(text, start, end) and _national_phone_ok(run.group(0)):
            yield PiiKind.PHONE, start, end
