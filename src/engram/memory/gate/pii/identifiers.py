"""Identifiers validated by check digits: payment cards, IBANs, US SSNs and national ids."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator

from stdnum import iban as _iban
from stdnum import luhn
from stdnum.ca import sin as _ca_sin
from stdnum.de import idnr as _de_idnr
from stdnum.es import dni as _es_dni
from stdnum.es import nie as _es_nie
from stdnum.fr import nir as _fr_nir
from stdnum.in_ import aadhaar as _in_aadhaar
from stdnum.in_ import pan as _in_pan
from stdnum.iso7064 import mod_97_10 as _mod_97_10
from stdnum.it import codicefiscale as _it_cf
from stdnum.nl import bsn as _nl_bsn
from stdnum.us import itin as _us_itin
from stdnum.us import ssn as _us_ssn

from engram.memory.gate.pii.findings import PiiKind, Span, Text
from engram.memory.gate.pii.heuristics import preceded_by

# --------------------------------------------------------------------------- cards, IBAN

_CARD = re.compile(
    r"(?<![\w.\-/])"
    r"(?:\d{4}(?P<s1>[ \-.])\d{4}(?P=s1)\d{4}(?P=s1)\d{4}(?:(?P=s1)\d{1,3})?"
    r"|\d{4}(?P<s3> {1,2})\d{4} {1,2}\d{4} {1,2}\d{4}"  # a line wrapped inside it
    r"|\d{8}(?P<s4> {1,2})\d{8}"
    r"|\d{4}(?P<s2>[ \-]| {2})\d{6}(?P=s2)\d{4,5}"
    r"|\d{13,19})"
    r"(?![\w]|[.\-/]\d)"
)
# Issuer prefixes and the card lengths each issues (Visa, Mastercard, Amex, Diners, JCB,
# Discover, UnionPay, Maestro and Verve, TROY, Mir, UzCard and Humo).
_CARD_BRANDS: tuple[tuple[re.Pattern[str], frozenset[int]], ...] = (
    (re.compile(r"4"), frozenset({16, 19})),  # 13-digit Visa is retired; EAN-13 codes are not
    (re.compile(r"5[1-5]|2(?:22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720)"), frozenset({16})),
    (re.compile(r"3[47]"), frozenset({15})),
    (re.compile(r"3(?:0[0-5]|[689])"), frozenset(range(14, 20))),
    (re.compile(r"35(?:2[89]|[3-8])"), frozenset(range(16, 20))),
    (re.compile(r"6(?:011|4[4-9]|5|2)"), frozenset(range(16, 20))),
    (re.compile(r"5[06-8]|6(?:304|7)"), frozenset(range(13, 20))),
    (re.compile(r"9792"), frozenset({16})),  # TROY (Turkey)
    # Elo and Hipercard (Brazil)
    (
        re.compile(r"606282|636[23]|6277|650|6516|6550|509|4011|4312|4389|4514|4576"),
        frozenset({16}),
    ),
    (re.compile(r"220[0-4]"), frozenset({16})),  # Mir (Russia)
    (re.compile(r"8600|9860"), frozenset({16})),  # UzCard and Humo (Uzbekistan)
)
_GROUP_BEFORE = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{0,2}\d[A-Za-z0-9]{0,3}[ \-]$")


def card_ok(digits: str) -> bool:
    """Known issuer prefix, a length that issuer uses, and a valid Luhn check digit."""
    for prefix, lengths in _CARD_BRANDS:
        if prefix.match(digits):
            return len(digits) in lengths and luhn.is_valid(digits)
    return False


# Magnetic-stripe data: track 1 (``%B<number>^NAME^…``) and track 2 (``;<number>=…``).
_TRACK = re.compile(r"(?:%B|;)(?P<pan>\d{13,19})(?:\^|=\d{4})")


def find_cards(t: Text) -> Iterator[Span]:
    if t.digits < 13:
        return
    for m in _TRACK.finditer(t.raw):
        if card_ok(m.group("pan")):
            yield PiiKind.PAYMENT_CARD, m.start("pan"), m.end("pan")
    text = t.raw
    for m in _CARD.finditer(text):
        grouped = m.group("s1") or m.group("s2") or m.group("s3") or m.group("s4")
        if grouped and _GROUP_BEFORE.search(text, max(0, m.start() - 7), m.start()):
            continue  # the tail of a longer grouped run, such as an IBAN
        if card_ok(m.group(0).replace(" ", "").replace("-", "").replace(".", "")):
            yield PiiKind.PAYMENT_CARD, m.start(), m.end()


# Upper or lower case (typed by hand), groups apart by up to two spaces (a wrapped line).
_IBAN = re.compile(
    r"(?:(?<![A-Za-z0-9])|(?<=IBAN))(?:[A-Z]{2}|[a-z]{2})\d{2}(?: {0,2}[A-Za-z0-9]{4}){2,7}"
    r"(?: {0,2}[A-Za-z0-9]{1,3})?(?![A-Za-z0-9])"
)


# IBANs that banks of these countries issue and print, which the registry ``stdnum`` follows
# does not list yet (the BCEAO and BEAC zones, the Maghreb, Madagascar): their lengths.
_UNLISTED_IBAN_LENGTHS = {
    "MA": 28, "DZ": 26, "SN": 28, "CI": 28, "BF": 28, "ML": 28, "BJ": 28, "NE": 28, "GW": 25,
    "CM": 27, "CF": 27, "CG": 27, "GA": 27, "TD": 27, "GQ": 27, "MG": 27, "KM": 27,
}  # fmt: skip


def _iban_ok(candidate: str) -> bool:
    """A registered IBAN, or one of a country above: its length and the mod-97 check."""
    if _iban.is_valid(candidate):
        return True
    compact = candidate.replace(" ", "")
    if _UNLISTED_IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact.isalnum():
        return False
    return bool(_mod_97_10.is_valid(compact[4:] + compact[:4]))


def find_ibans(t: Text) -> Iterator[Span]:
    if t.digits < 2:  # the check digits: some countries' BBANs may be letters only
        return
    text = t.raw
    for m in _IBAN.finditer(text):
        candidate = m.group(0)
        for _ in range(3):  # a trailing word ("EUR") may have been swallowed; retry shorter
            if _iban_ok(candidate.upper()):
                yield PiiKind.IBAN, m.start(), m.start() + len(candidate)
                break
            cut = candidate.rfind(" ")
            if cut < 0:
                break
            candidate = candidate[:cut]


# --------------------------------------------------------------------------- SSN, national ids

_SSN = re.compile(r"(?<![\w\-/.])\d{3}(?P<sep>[\- ]?)\d{2}(?P=sep)\d{4}(?![\w\-/]|\.\d)")
_SSN_CONTEXT = re.compile(
    r"(?i)(?<![a-z])ssn|social[ \-]security|\bsoc\.? ?sec|\bsocial\b|(?<![a-z])ss ?(?:#|no\b)"
    r"|\b1099(?:-[a-z]{1,4})?\b|\bw-?9\b"  # the IRS forms that carry a payee's SSN
)


_ITIN_CONTEXT = re.compile(r"(?i)\bitin\b")


def find_ssns(t: Text) -> Iterator[Span]:
    if t.digits < 9:
        return
    text = t.raw
    for m in _SSN.finditer(text):
        if _us_itin.is_valid(m.group(0).replace(" ", "-")) and (
            m.group("sep") == "-" or preceded_by(_ITIN_CONTEXT, text, m.start(), 48)
        ):  # an ITIN, a taxpayer id the IRS issues to people without an SSN
            yield PiiKind.NATIONAL_ID, m.start(), m.end()
            continue
        if not _us_ssn.is_valid(m.group(0).replace(" ", "-")):
            continue
        if (
            m.group("sep") == "-"
            or preceded_by(_SSN_CONTEXT, text, m.start(), 64)
            or _SSN_CONTEXT.search(text, m.end(), m.end() + 32)  # "… is Tom's social"
        ):
            yield PiiKind.US_SSN, m.start(), m.end()


# Identity keywords: acronyms in upper case, phrases in any case (matched on the lowered text).
# An acronym also counts in lower case as the name of a field ("sin:120 420 724",
# "bsn=…", "steuer_id=…").
_ID_ACRONYMS = re.compile(
    r"\b(?:SIN|NAS|BSN|NIE|NIF|DNI|NIR|INSEE|PAN|NINO|UIDAI|IdNr|TIN|UID)\b"
    r"|(?<![\w\-])(?i:sin|nas|bsn|nie|nif|dni|nir|nino|tin|idnr)(?=[ \t]*[:=])"
    # an acronym in a snake_case name given a value: validate_bsn("…"), customer_sin = …
    r"|(?<=_)(?i:bsn|sin|nir|nino|dni|nie|nif|idnr)\b(?=[ \t\"'\]]*[:=(,])"
)
_ID_PHRASES = re.compile(
    r"social insurance|burgerservice|sofinummer|steuer[\-_ ]?id|steueridentifikation"
    r"|identifikationsnummer|tax[ \-]?id|taxpayer|aadhaa?r|s[ée]curit[ée] sociale|codice fiscale"
    r"|national insurance|national id|identity number|id number|citizen service number"
    r"|personal number|permanent account number|\bni[ \-]?(?:no|number)\b"
)
_ID_WINDOW = 48


class _IdKeywords:
    """End offsets of identity keywords in a text, found once, on first use."""

    __slots__ = ("_ends", "_text")

    def __init__(self, text: Text) -> None:
        self._text = text
        self._ends: list[int] | None = None

    def before(self, start: int) -> bool:
        """True if a keyword ends in the ``_ID_WINDOW`` characters before ``start``."""
        if self._ends is None:
            ends = [m.end() for m in _ID_ACRONYMS.finditer(self._text.raw)]
            if len(self._text.lower) == len(self._text.raw):
                ends.extend(m.end() for m in _ID_PHRASES.finditer(self._text.lower))
            self._ends = sorted(ends)
        # the first keyword ending at or after start - window, if it ends by start
        at = bisect.bisect_left(self._ends, start - _ID_WINDOW)
        return at < len(self._ends) and self._ends[at] <= start


def _nino_ok(value: str) -> bool:
    return value.replace(" ", "")[:2] not in {"BG", "GB", "KN", "NK", "NT", "TN", "ZZ"}


# Identifiers with letters in them: distinctive enough to need no keyword, except PAN, which
# has no check digit.
_LETTER_IDS = re.compile(
    r"(?<![A-Za-z0-9\-])(?:"
    r"(?P<nino>[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D])"
    r"|(?P<nino_typed>[a-ceghj-pr-tw-z][a-ceghj-npr-tw-z] ?\d{2} ?\d{2} ?\d{2} ?[a-d])"
    r"|(?P<dni>\d{8}-?[A-Z])"
    r"|(?P<nie>[XYZ]-?\d{7}-?[A-Z])"
    r"|(?P<cf>[A-Z]{6}[0-9LMNP-V]{2}[A-EHLMPR-T][0-9LMNP-V]{2}[A-Z][0-9LMNP-V]{3}[A-Z]"
    r"|[a-z]{6}[0-9lmnp-v]{2}[a-ehlmpr-t][0-9lmnp-v]{2}[a-z][0-9lmnp-v]{3}[a-z])"
    r"|(?P<pan>[A-Z]{3}[ABCFGHJLPT][A-Z]\d{4}[A-Z])"
    r")(?![A-Za-z0-9])"
)
_LETTER_ID_RULES: dict[str, tuple[Callable[[str], bool], bool]] = {
    # shape group: (validator, needs an identity keyword before it)
    "nino": (_nino_ok, False),
    "nino_typed": (lambda v: _nino_ok(v.upper()), True),  # lower case, as a tenant typed it
    "dni": (_es_dni.is_valid, False),
    "nie": (_es_nie.is_valid, False),
    "cf": (lambda v: bool(_it_cf.is_valid(v.upper())), False),
    "pan": (_in_pan.is_valid, True),
}
# Identifiers made of digits only, told apart by their length once separators are removed.
# The run is taken whole (possessive): a card number does not hide a 12-digit id inside it.
_DIGIT_IDS = re.compile(r"(?<![\w.\-])\d(?:[ .\-]?\d){8,}+(?![\w\-]|\.\d)")
_NON_DIGIT = re.compile(r"\D")
_DOTTED_QUAD = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")


def _ipv4(token: str) -> bool:
    """An IPv4 address ("10.0.105.221"): its nine to twelve digits are no id."""
    return _DOTTED_QUAD.fullmatch(token) is not None and all(
        int(octet) <= 255 for octet in token.split(".")
    )


_DIGIT_ID_RULES: dict[int, tuple[tuple[Callable[[str], bool], ...], bool]] = {
    # digit count: (validators, any one of which must pass; needs an identity keyword)
    9: ((_ca_sin.is_valid, _nl_bsn.is_valid), True),
    11: ((_de_idnr.is_valid,), True),
    12: ((_in_aadhaar.is_valid,), True),
    15: ((_fr_nir.is_valid,), False),
}


def find_national_ids(t: Text) -> Iterator[Span]:
    text = t.raw
    if t.digits < 4:
        return
    keywords = _IdKeywords(t)
    for m in _LETTER_IDS.finditer(text):
        group = m.lastgroup or ""
        validator, needs_keyword = _LETTER_ID_RULES[group]
        if needs_keyword and not keywords.before(m.start()):
            continue
        if validator(m.group(0)):
            yield PiiKind.NATIONAL_ID, m.start(), m.end()
    if t.digits < 9:
        return
    for m in _DIGIT_IDS.finditer(text):
        digits = _NON_DIGIT.sub("", m.group(0))
        rule = _DIGIT_ID_RULES.get(len(digits))
        if rule is None or _ipv4(m.group(0)):
            continue
        validators, needs_keyword = rule
        if len(digits) == 15 and digits[0] not in "12":
            continue  # a NIR starts with the sex digit
        if needs_keyword and not keywords.before(m.start()):
            continue
        if any(validator(digits) for validator in validators):
            yield PiiKind.NATIONAL_ID, m.start(), m.end()
