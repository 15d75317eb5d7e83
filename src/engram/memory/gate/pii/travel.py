"""Personal data in airline reservation records (PNRs), as travel agents paste them.

A global distribution system writes a passenger's details as special service requests in a
fixed layout, and its own separators hide them from the other detectors:

* ``SSR DOCS YY HK1 P/CHE/X4821937/CHE/14MAR86/F/…``: the travel document's number
  (``national_id``), after its type (passport, identity card, …) and issuing country;
* ``SSR CTCM YY HK1/33612457890/FR``: the passenger's mobile number, its country code
  written without ``+`` (``phone``, when valid as such);
* ``SSR CTCE YY HK1/LUC.BERTRAND//ORANGE.FR``: the passenger's e-mail address, ``//``
  standing for ``@`` (``email``);
* ``FP CCVI4539734099911113/0827``: the form of payment, a card after its brand code and
  before its expiry (``payment_card``, when its Luhn digit and issuer hold).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import phonenumbers

from engram.memory.gate.pii.findings import PiiKind, Span, Text
from engram.memory.gate.pii.identifiers import card_ok

# An element opens a line, or follows a pasted line break written as "\n".
_PREFIX = r"(?:(?<![A-Za-z0-9])|(?<=\\n))S?SR ?(?:{})\b[^/\n]{{0,24}}/"
_DOCS = re.compile(
    r"(?:(?<![A-Za-z0-9])|(?<=\\n))S?SR ?DOCS\b[^/\n]{0,24}?(?<![A-Za-z0-9])[PIACFM]/"
    r"[A-Z]{3}/(?P<v>[A-Z0-9]{5,15})(?=/)",
    re.IGNORECASE,
)
_MOBILE = re.compile(_PREFIX.format("CTCM") + r"(?P<v>\d{8,15})(?![\w])", re.IGNORECASE)
_MAIL = re.compile(
    _PREFIX.format("CTCE") + r"(?P<v>[A-Z0-9._\-]{1,64}//[A-Z0-9\-]{1,63}(?:\.[A-Z0-9\-]{1,63})+)",
    re.IGNORECASE,
)
_PAYMENT = re.compile(r"\bFP[ \t]*CC[A-Z]{2}(?P<v>\d{13,19})(?=/\d{4})")


def find_travel_records(t: Text) -> Iterator[Span]:
    text, lower = t.raw, t.lower  # the lowered text every detector shares: no copy per scan
    if "docs" in lower:
        for m in _DOCS.finditer(text):
            yield PiiKind.NATIONAL_ID, m.start("v"), m.end("v")
    if "ctcm" in lower:
        for m in _MOBILE.finditer(text):
            if _valid_abroad(m.group("v")):
                yield PiiKind.PHONE, m.start("v"), m.end("v")
    if "ctce" in lower:
        for m in _MAIL.finditer(text):
            yield PiiKind.EMAIL, m.start("v"), m.end("v")
    if "FP" in text:
        for m in _PAYMENT.finditer(text):
            if card_ok(m.group("v")):
                yield PiiKind.PAYMENT_CARD, m.start("v"), m.end("v")


def _valid_abroad(digits: str) -> bool:
    try:
        return phonenumbers.is_valid_number(phonenumbers.parse("+" + digits, None))
    except phonenumbers.NumberParseException:
        return False
