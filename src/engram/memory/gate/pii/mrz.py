"""``national_id`` in machine-readable zones and HL7 messages, ``bank_account`` in NACHA
entry records.

A passport's or identity card's machine-readable zone (ICAO 9303) is pasted into KYC notes
as the scanner or OCR read it: ``P<GBRSMITH<<JOHN<<<…`` and a line of the document number,
nationality, birth date, sex and expiry, each number followed by its check digit (weights 7,
3, 1; letters count 10 to 35, ``<`` zero). A line whose check digits all hold is reported
whole, with or without a keyword: a passport's second line (TD3) and an identity card's first
and second lines (TD1). Three check digits that hold by chance are one in a thousand, and
the layout around them rarely occurs otherwise.

A NACHA (ACH) entry detail record, line type ``6``, carries the receiving bank's routing
number (eight digits and an ABA check digit) and the account number in the next seventeen
characters; the account is reported when the routing number's check holds and the text
names ACH or NACHA as a word.

An HL7 v2 message names the kind of each identifier it carries (an extended composite id:
the id, then after the fourth ``^`` its identifier type code). The codes of a person's state
ids are reported: ``NN`` (a national person identifier, often with its country, ``NNNLD``),
``SS`` (social security), ``PPN`` (passport), ``DL`` (driver's licence), ``NI`` (national
unique individual id), ``NH`` (national health plan) and ``JHN`` (jurisdictional health
number); a hospital's own numbers (``MR``, ``PI``, ``AN``, ``VN``) are not.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from stdnum.us import rtn as _us_rtn

from engram.memory.gate.pii.findings import PiiKind, Span, Text

_WEIGHTS = (7, 3, 1)
_TD3_SECOND = re.compile(
    r"(?<![A-Z0-9<])(?P<doc>[A-Z0-9<]{9})(?P<dc>\d)[A-Z<]{3}(?P<dob>\d{6})(?P<bc>\d)[MFX<]"
    r"(?P<exp>\d{6})(?P<ec>\d)[A-Z0-9<]{14}[\d<]\d(?![A-Z0-9<])"
)
_TD1_FIRST = re.compile(
    r"(?<![A-Z0-9<])[ACI][A-Z<][A-Z<]{3}(?P<doc>[A-Z0-9<]{9})(?P<dc>\d)[A-Z0-9<]{15}(?![A-Z0-9<])"
)
_TD1_SECOND = re.compile(
    r"(?<![A-Z0-9<])(?P<dob>\d{6})(?P<bc>\d)[MFX<](?P<exp>\d{6})(?P<ec>\d)[A-Z<]{3}"
    r"[A-Z0-9<]{11}\d(?![A-Z0-9<])"
)
#: The file's name as a word: "ach" inside "cached", "each" or "reach" names no ACH file.
_NACHA_WORD = re.compile(r"\b(?:nacha|ach)\b")
_HL7_STATE_ID = re.compile(
    r"(?<![^|~^\s])(?P<id>[A-Za-z0-9\-]{5,24})(?:\^[^|~^\n]*){3}\^(?:NN[A-Z]{0,3}|SS|PPN|DL|NI|NH|JHN)"
    r"(?=[|~^\s]|$)"
)
_NACHA_ENTRY = re.compile(
    r"(?<!\d)6(?:2[2-9]|3[2-9]|4[12]|5[1-5])(?P<rtn>\d{9})(?P<account>[0-9A-Za-z\-]{4,17})"
)


def _check_digit(field: str) -> int:
    total = 0
    for i, char in enumerate(field):
        value = 0 if char == "<" else int(char) if char.isdigit() else ord(char) - 55
        total += value * _WEIGHTS[i % 3]
    return total % 10


def _holds(match: re.Match[str], *pairs: tuple[str, str]) -> bool:
    return all(_check_digit(match.group(f)) == int(match.group(c)) for f, c in pairs)


def find_machine_readable(t: Text) -> Iterator[Span]:
    """MRZ lines whose check digits hold, state ids in HL7 messages, and NACHA entry
    records' accounts."""
    text = t.raw
    if "<" in text and t.digits >= 7:
        for m in _TD3_SECOND.finditer(text):
            if _holds(m, ("doc", "dc"), ("dob", "bc"), ("exp", "ec")):
                yield PiiKind.NATIONAL_ID, m.start(), m.end()
        for m in _TD1_FIRST.finditer(text):
            if _holds(m, ("doc", "dc")) and m.group("doc").strip("<"):
                yield PiiKind.NATIONAL_ID, m.start(), m.end()
        for m in _TD1_SECOND.finditer(text):
            if _holds(m, ("dob", "bc"), ("exp", "ec")):
                yield PiiKind.NATIONAL_ID, m.start(), m.end()
    if "^" in text and "|" in text:
        yield from _hl7_state_ids(text)
    if "ach" in t.lower and _NACHA_WORD.search(t.lower):
        for m in _NACHA_ENTRY.finditer(text):
            if _us_rtn.is_valid(m.group("rtn")) and any(c.isdigit() for c in m.group("account")):
                yield PiiKind.BANK_ACCOUNT, m.start("account"), m.end("account")


def _hl7_state_ids(text: str) -> Iterator[Span]:
    for m in _HL7_STATE_ID.finditer(text):
        if any(c.isdigit() for c in m.group("id")):
            yield PiiKind.NATIONAL_ID, m.start("id"), m.end("id")
