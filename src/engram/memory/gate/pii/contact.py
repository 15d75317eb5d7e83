"""Contact details: e-mail addresses and phone numbers (``email``, ``phone``)."""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator

import phonenumbers

from engram.memory.gate.pii.findings import PiiKind, Span, Text
from engram.memory.gate.pii.heuristics import folded

# --------------------------------------------------------------------------- email

_EMAIL = re.compile(
    r"(?<![\w.%+\-])[^\W_](?:[\w.%+\-]{0,62}[\w%+\-])?"
    r"@(?:[^\W_](?:[\w\-]{0,61}[^\W_])?\.)+[^\W\d_]{2,24}(?![\w\-])"
)


def is_address(text: str) -> bool:
    """Whether ``text`` is one e-mail address, as :func:`find_emails` reads one."""
    return _EMAIL.fullmatch(text) is not None


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
_PHONE_RUN = re.compile(r"(?:(?<=[A-Za-z])\+|(?<![\w+])\+?)\(?\d[\d \t().\-/]{5,24}\d")
# An order or a waybill in German, Turkish, Spanish, Portuguese, Polish, Italian, French.
_FOREIGN_ORDERS = (
    r"bestellnummer|bestellung|bestell-?nr|sipari[sş]|gu[ií]a|pedido|zam[oó]wieni[ae]"
    r"|ordine|commande"
)
_NOT_PHONE_LABEL = re.compile(
    r"(?i)(?:\b(?:order|ticket|invoice|inv|build|issue|pr|case|ref|reference|tracking|acct"
    r"|account|po|job|run|batch|txn|transaction|confirmation|serial|sku|version|release|id"
    r"|item|part|incident|request|req|pipeline|commit|cve|patent|isbn|seed|port|pin|vat"
    r"|wid|withdrawal|deposit id|txid|tx|block|height|бик|bik"
    r"|auftrag|pr[óo]bka|probe|sample|specimen|accession|processo(?: hospitalar)?"
    r"|epis[óo]dio(?: de urg[êe]ncia)?|zlecenia|kod kreskowy|barcode"
    r"|imei|meid|imsi|iccid|sin|meter|consumer|routing|aba|rtn|transit|qq(?:号码|号)?"
    r"|(?<!area )(?<!country )code|awb|loyalty|member(?:ship)?|membre|mitglied|frequent flyer"
    r"|miles ?& ?more|flying blue|aeroplan|bonvoy|eurobonus|skywards"
    rf"|{_FOREIGN_ORDERS})"
    r"(?:[ \t]*(?:no\.?|number|num|id|#))?[ \t]*[#:=]?|#)[ \t]*$"
)
_GLUE = frozenset("-_/#.@=\\")
#: Digit runs read per text; past this many, the next one is reported unread (fail-safe).
MAX_PHONE_RUNS = 48
#: Runs read in national formats per text (each tries every region in _NATIONAL_REGIONS).
MAX_NATIONAL_TRIES = 6
_PHONE_WORDS = (
    "phone", "tel", "mobile", "cell", "call", "fax", "whatsapp", "signal", "landline", "handy",
    "portable", "ring", "text", "sms", "dial", "contact", "kakao", "wechat", "viber",
    "telegram", "imessage", "facetime", "voicemail", "hotline", "helpline", "reach me",
    "celular", "cel", "movil", "móvil", "telefone", "tlf", "tfno", "telemóvel",
    "telemovel", "κινητό", "τηλ", "手机",
    "手機", "電話", "携帯", "전화", "휴대폰", "핸드폰", "טלפון", "נייד", "โทร", "điện thoại", "sđt",
    "моб", "мобильный", "جوال", "موبايل",
    "reach her", "reach him", "reach them", "тел", "телефон", "tél", "téléphone", "telefon",
    "telefono", "teléfono", "puhelin", "sími", "síma", "símanúmer", "farsími", "farsíma",
    "هاتف", "toestel", "doorkiesnummer",
    "durchwahl", "mob", "telefonu", "telefonem", "telefonico", "telefonica", "telefonum",
    "festnetz", "komórki", "recapito", "wsp", "whats", "zap", "wpp", "wasap", "watsap",
    "llamará", "llámame", "llamame", "llame",
)  # fmt: skip
# Regions tried for a number in national format near a phone keyword (trunk prefix 0, or a
# national number without one, as Indian and Chinese mobiles are written).
_NATIONAL_REGIONS = (
    "GB", "DE", "FR", "IT", "NL", "BE", "AT", "CH", "IE", "AU", "IN", "JP", "BR", "ES", "PT",
    "PL", "SE", "NO", "DK", "FI", "NZ", "ZA", "KR", "SG", "MX", "CN", "CZ", "GR", "TR", "IL",
    "US", "CA", "ID", "PH", "VN", "PK", "HU", "HR", "AR", "CL", "EG", "KE", "NG", "BG", "RS",
    "SK", "SI", "LT", "LV", "EE", "IS", "LU", "MA", "GH", "AE", "SA", "UA", "HK", "TW", "TH",
    "MY", "KZ", "RU", "QA", "CY", "IR", "CR", "GT", "HN", "SV", "PA",
)  # fmt: skip


# An HL7 v2 segment (its three-character name, then a field separator), and the type codes
# of a telecommunication field (XTN): a phone's use and equipment.
_HL7_SEGMENT = re.compile(r"(?m)^[A-Z][A-Z0-9]{2}\|")
_XTN_CODES = re.compile(r"\^(?:PRN|ORN|WPN|VHN|ASN|EMR|NET|BPN|PH|CP|FX|BP|MD|SAT)\b")


def _in_hl7_field_of_no_phone(text: str, start: int, end: int) -> bool:
    """Digits in a field of an HL7 message that is no telecommunication field: an order,
    a specimen, a timestamp (a phone in HL7 is written with its use code, ``^PRN^PH^``)."""
    if not _HL7_SEGMENT.search(text):
        return False
    field_start = text.rfind("|", 0, start) + 1
    field_end = text.find("|", end)
    field = text[field_start : len(text) if field_end < 0 else field_end]
    return _XTN_CODES.search(field) is None and text[start:end].isdigit()


def _phone_span_ok(text: str, start: int, end: int) -> bool:
    """False when the digits are glued to another token or follow an order-like label (a
    number with its ``+`` may be assigned: ``SMS_TO=+46704821963``)."""
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    plus = text[start : start + 1] == "+"
    assigned = before in "=:" and plus
    if (before.isalnum() and not plus) or (before in _GLUE and not assigned):
        return False  # "try+4915…": a number with its + may be glued to a word by a typo
    if after.isalnum() or after in "-_/@=" or (after in ".:" and text[end + 1 : end + 2].isdigit()):
        return False
    order = _NOT_PHONE_LABEL.search(text, max(0, start - 32), start)
    if order is not None and not plus and not _phone_of(text, order):
        return False  # "Pedido 4155550132"; not "+34 …" nor "Teléfono del guía: 612 …"
    if _TAX_NUMBER.search(text, max(0, start - 40), start) is not None:
        return False
    if _VAT_NUMBER.search(text, max(0, start - 24), start) is not None:
        return False  # "Practice VAT: BE 0676.014.773": a company's VAT number
    if before in "|^~&" and _in_hl7_field_of_no_phone(text, start, end):
        return False
    if _YEAR_FIRST.match(text, start):
        return False  # 2026.02.0988, 2024-05-118734: a build or case number that opens on a date
    if _ODD_GROUPS.fullmatch(text, start, end) or (
        _ZIP4.fullmatch(text, start, end) and _STATE_BEFORE.search(text, max(0, start - 8), start)
    ):
        return False  # "23456789-01" (a meter or an account); "MA 02139-4307" (a ZIP+4 code)
    label = _NUMBER_LABEL.search(text, max(0, start - 32), start)
    return label is None or any(stem in label.group(1).lower() for stem in _PHONE_STEMS)


# An order or a waybill named in another language (also a guide, "guía"): a phone word in
# its clause before it names whose phone follows ("Teléfono del guía:").
_OWNER = re.compile(f"(?i){_FOREIGN_ORDERS}")


def _phone_of(text: str, label: re.Match[str]) -> bool:
    """Whether a phone word before one of those labels says the digits are its phone."""
    if _OWNER.search(label.group(0)) is None:
        return False
    return _PHONE_WORD.search(_clause_before(text, label.start()).casefold()) is not None


# A whole word, an inflection ("phones", "phoned", "calling") or a compound ("telephone",
# "telco", "Telefonnummer"): not the first letters of a longer name ("mobilesdk_app_id").
_PHONE_WORD = re.compile(
    r"\b(?:" + "|".join(map(folded, _PHONE_WORDS)) + r")"
    r"(?:s|es|d|ed|ing|co|ephony|e?phone|nummer|nr|number|no)?(?![a-z])"
)
_DATE_RUN = re.compile(r"\d{1,4}[/.\-]\d{1,2}[/.\-]\d{1,4}")


def names_a_phone(text: str) -> bool:
    """Whether ``text`` holds a phone word (``phone``, ``Handynummer``, ``teléfono``, ...)."""
    return _PHONE_WORD.search(text.casefold()) is not None


def _national_phone_ok(candidate: str) -> bool:
    """True if some common region reads ``candidate`` as a valid national number, or (without
    a trunk 0) its digits read as a valid number with the country code written without
    ``+`` ("6421 903 6678")."""
    digits = "".join(c for c in candidate if c.isdigit())
    if _DATE_RUN.fullmatch(candidate.strip()):
        return False
    if not digits.startswith("0"):
        if len(digits) < 10 and not _SHORT_LAYOUT.fullmatch(candidate.strip()):
            return False  # eight or nine bare digits are too often a code or a count
        try:
            if phonenumbers.is_valid_number(phonenumbers.parse("+" + digits, None)):
                return True
        except phonenumbers.NumberParseException:
            pass
    return any(phonenumbers.is_valid_number(n) for n in _national_readings(candidate))


def _national_readings(candidate: str) -> Iterator[phonenumbers.PhoneNumber]:
    """``candidate`` read as a national number of each region of ``_NATIONAL_REGIONS``. The
    library's ``parse`` normalises the text again for every region (about 70 µs each); the
    digits are the same, so the number is built once per country code: the trunk 0 dropped,
    except in Italy, where the 0 belongs to the number."""
    digits = "".join(c for c in candidate if c.isdigit())
    if not digits or len(digits) > 17:
        return
    for region in _NATIONAL_REGIONS:
        keep_zero = region == "IT"
        national = digits if keep_zero or not digits.startswith("0") else digits[1:]
        if not national or (national.startswith("0") and not keep_zero):
            continue  # "0000-0002-…" (an ORCID): a national number never opens on 0 here
        number = phonenumbers.PhoneNumber(
            country_code=phonenumbers.country_code_for_region(region),
            national_number=int(national),
            italian_leading_zero=(keep_zero and national.startswith("0")) or None,
        )
        yield number


# The run continues a code: a group of four capitals and digits ("NL91 ABNA 0417 1643 01") or
# a token mixing letters and digits ("Tracking 1Z 999 A1E 01 2345 678 4").
_GROUP_BEFORE = re.compile(
    r"(?<![A-Za-z0-9])(?:[A-Z0-9]{4}|(?=[A-Za-z0-9]*\d)(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{2,})"
    r"[ \-]$"
)
# "Sagsnr. 2024-118734", "Kunden-Nr. 4155550132": a number label in any language; unless the
# word before it is a phone word ("Tel.-Nr.", "Handynr.").
_NUMBER_LABEL = re.compile(r"(?i)(\w*)[ .\-]*(?:nr|no|n[º°])\.?[ \t]*[:#]?[ \t]*$")
_PHONE_STEMS = ("tel", "phone", "fon", "handy", "mobil", "cell", "fax")
# Eight digits in pairs ("20 63 18 54"): how Danish and Norwegian numbers are written.
_PAIRS = re.compile(r"\d{2} \d{2} \d{2} \d{2}")
# Nine digits in threes ("912 384 601", "618.213.597") or as three and three pairs ("912 48
# 33 07"): Portuguese and Spanish numbers; eight as three, two, three ("912 34 567"):
# Norwegian mobiles.
_SHORT_LAYOUT = re.compile(
    r"\d{2} \d{2} \d{2} \d{2}|\d{3}([ .])\d{3}\1\d{3}|\d{3} \d{2} \d{3}|\d{3} \d{2} \d{2} \d{2}"
)
# Eight digits in fours count only with a phone word in their own clause (before them, or
# just after: "8845-2210 (WhatsApp)"), and not as a conference bridge's code ("dial-in").
_FOURS = re.compile(r"\d{4}[ \-]\d{4}")
_BRIDGE = re.compile(r"(?i)dial-?in[ \t:]*$")
# A tax or business registration number, named a few words before the digits.
_TAX_NUMBER = re.compile(
    r"(?i)(?:mã số thuế|\bmst\b|tax (?:code|id|number)|사업자등록번호|business registration"
    r"|inscri[çc][ãa]o|αφμ|\bafm\b|\bинн\b|\bогрн\b|\bкпп\b|\binn\b|\bogrn\b"  # noqa: RUF001 - Russian
    r"|\bkbo\b|\bbce\b|ondernemingsnummer|enterprise number|company (?:number|no))"
    r"[^\n\d]{0,24}$"
)
# A VAT number after its name, its country's two letters between: "VAT: BE 0676.014.773".
_VAT_NUMBER = re.compile(
    r"(?i)\b(?:vat|btw|tva|mwst|iva)(?:[ \-]?(?:no|nr|number|id)\.?)?[ \t]*[:#]?[ \t]*"
    r"[a-z]{2}[ \t]?$"
)
_DECIMAL = re.compile(r"\d+[.,]\d+")
# A long group and a short one after it: no numbering plan groups its digits so.
_ODD_GROUPS = re.compile(r"\d{6,}[\-.]\d{1,2}")
_ZIP4 = re.compile(r"\d{5}-\d{4}")
_STATE_BEFORE = re.compile(r"\b[A-Z]{2},?[ \t]+$")
_YEAR_FIRST = re.compile(r"(?:19|20)\d{2}[.\-/](?:0[1-9]|1[0-2])[.\-/]")
_MOBILE = frozenset(
    {phonenumbers.PhoneNumberType.MOBILE, phonenumbers.PhoneNumberType.FIXED_LINE_OR_MOBILE}
)


def _national_mobile(candidate: str) -> bool:
    """A trunk-0 number of nine digits or more that some common region reads as a valid
    mobile number ("082 617 4490", "06-28417730"): written that way, it needs no phone word."""
    digits = sum(c.isdigit() for c in candidate)
    if digits < 9 or not candidate.startswith("0") or _DATE_RUN.fullmatch(candidate.strip()):
        return False
    return any(
        phonenumbers.is_valid_number(n) and phonenumbers.number_type(n) in _MOBILE
        for n in _national_readings(candidate)
    )


def _dialled_abroad(candidate: str) -> bool:
    """A number written with ``00`` for ``+`` and a country code, in groups ("00226 70 48 21
    93"), that is valid as such: the international prefix of most of the world."""
    digits = "".join(c for c in candidate if c.isdigit())
    if not candidate.startswith("00") or len(digits) < 10 or digits == candidate:
        return False  # ungrouped, it is as often a meter or supply number ("PDR 0088…")
    try:
        return phonenumbers.is_valid_number(phonenumbers.parse("+" + digits[2:], None))
    except phonenumbers.NumberParseException:
        return False


def _international_possible(candidate: str) -> bool:
    """A number written with its ``+`` and a country code, of a length that country uses, but
    in a range not assigned (films' ``555-01xx``, Ofcom's drama numbers): still a phone
    number as written."""
    if not candidate.startswith("+"):
        return False
    try:
        number = phonenumbers.parse(candidate, None)
    except phonenumbers.NumberParseException:
        return False
    return len(str(number.national_number)) >= 8 and phonenumbers.is_possible_number(number)


class _Covered:
    """Spans already found, asked whether a run overlaps one in logarithmic time (a text
    of thousands of ids has thousands of runs, each once compared with every span)."""

    def __init__(self, taken: list[Span]) -> None:
        spans = sorted((start, end) for _, start, end in taken)
        self._starts = [start for start, _ in spans]
        self._reach = list(itertools.accumulate((end for _, end in spans), max))

    def overlaps(self, start: int, end: int) -> bool:
        """Whether a span that begins before ``end`` ends after ``start``."""
        before = bisect.bisect_left(self._starts, end)
        return before > 0 and self._reach[before - 1] > start


def _runs(t: Text, taken: list[Span]) -> Iterator[tuple[re.Match[str], bool]]:
    """Digit runs of seven digits or more that no other finding covers, each with whether it
    is one too many: past ``MAX_PHONE_RUNS`` (more candidate numbers than any memory holds),
    rather than spend the Gate's time reading them all, or skip what may hide behind them,
    the next run is a finding unread."""
    read = 0
    covered = _Covered(taken)
    for run in _PHONE_RUN.finditer(t.raw):
        start, end = run.span()
        if covered.overlaps(start, end):
            continue
        if sum(c.isdigit() for c in run.group(0)) < 7:
            continue
        read += 1
        yield run, read > MAX_PHONE_RUNS
        if read > MAX_PHONE_RUNS:
            return


def _matched(text: str, start: int, end: int) -> list[Span]:
    """What the library's matcher finds in a run (it looks one character around a candidate:
    letters, time suffixes)."""
    left, right = max(0, start - 1), min(len(text), end + 3)
    matcher = phonenumbers.PhoneNumberMatcher(
        text[left:right], "US", leniency=phonenumbers.Leniency.VALID
    )
    return [
        (PiiKind.PHONE, left + m.start, left + m.end)
        for m in matcher
        if _phone_span_ok(text, left + m.start, left + m.end)
    ]


# A chat link that opens a conversation with a number ("wa.me/971552615494").
_CHAT_LINK = re.compile(r"(?i)\b(?:wa\.me/|whatsapp\.com/send/?\?phone=)\+?(\d{8,15})\b")
# An Indian mobile as it is written there, five digits and five ("99509 34676").
# A Brazilian mobile as it is written there: "(11) 97842-5749".
_BR_MOBILE = re.compile(r"\(\d{2}\) 9\d{4}-\d{4}")
# A number in international form without "+", given to a key or as a path segment
# ("dst=447700977557", "sms/outbound/254722953285") in a text that speaks of phones.
_GLUED_INTERNATIONAL = re.compile(r"(?<=[=/:])(?P<n>[1-9]\d{10,14})(?![\w\-])")
_IN_MOBILE = re.compile(r"[6-9]\d{4} \d{5}")
# Where a run of digits and punctuation joins two things: "(DHA ph 6) - 0300-9424276".
_JOIN = re.compile(r"\)?[ \t]+-[ \t]+\(?")


def _chat_links(text: str) -> Iterator[Span]:
    if "wa.me" not in text and "whatsapp" not in text.lower():
        return
    for m in _CHAT_LINK.finditer(text):
        try:
            number = phonenumbers.parse("+" + m.group(1), None)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_possible_number(number):
            yield PiiKind.PHONE, m.start(1), m.end(1)


# How a number is handed to someone without a phone word: "Suresh is at 99509 34676".
_GIVEN = re.compile(r"(?i)\b(?:at|on)[ \t]+$")


def _given(text: str, start: int) -> bool:
    """The words before ``start`` hand a number over ("at", "on"): two groups of five digits
    are as often two counts or two postcodes ("Zip codes 94105 94107")."""
    return _GIVEN.search(text, max(0, start - 8), start) is not None


# A local number without its area code, as people give one across a desk: "555-0143".
_LOCAL = re.compile(r"\d{3}[\- ]\d{4}")
_CLAUSE_END = re.compile(r"[.;!?\n]")
#: How far before a local number its phone word may stand ("text Kadri directly at 518 6463").
_LOCAL_WORD_BEFORE = 48


def _local_number(text: str, start: int, end: int) -> bool:
    """Seven digits written as three and four, with a phone word just before them in the
    same sentence: a number given as a phone number, even one in no region's plan."""
    if not _LOCAL.fullmatch(text[start:end]):
        return False
    return _PHONE_WORD.search(_clause_before(text, start).casefold()) is not None


def _clause_before(text: str, start: int) -> str:
    """The words of the clause a number at ``start`` is in, before it."""
    return _CLAUSE_END.split(text[max(0, start - _LOCAL_WORD_BEFORE) : start])[-1]


def _fours_given(text: str, start: int, end: int) -> bool:
    """A phone word in the clause of a number written in fours, before it or just after it,
    and no conference bridge's code."""
    if _BRIDGE.search(text, max(0, start - 12), start):
        return False
    after = _CLAUSE_END.split(text[end : end + 24])[0]
    return _PHONE_WORD.search(f"{_clause_before(text, start)} {after}".casefold()) is not None


def _br_mobile(candidate: str) -> bool:
    if not _BR_MOBILE.fullmatch(candidate):
        return False
    number = phonenumbers.parse(candidate, "BR")
    return phonenumbers.is_valid_number(number) and phonenumbers.number_type(number) in _MOBILE


def _glued(text: str) -> Iterator[Span]:
    """International numbers given to a key or in a path, read as their "+" form."""
    for m in _GLUED_INTERNATIONAL.finditer(text):
        try:
            number = phonenumbers.parse("+" + m.group("n"), None)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number(number):
            yield PiiKind.PHONE, m.start("n"), m.end("n")


def _in_mobile(candidate: str) -> bool:
    if not _IN_MOBILE.fullmatch(candidate):
        return False
    number = phonenumbers.parse(candidate, "IN")
    return phonenumbers.is_valid_number(number) and phonenumbers.number_type(number) in _MOBILE


def _pieces(run: re.Match[str]) -> Iterator[tuple[int, int]]:
    """The parts of a run that a dash between spaces joined, each of
    seven digits or more (the run itself when nothing joined two parts)."""
    start = run.start()
    for part in _JOIN.split(run.group(0)):
        at = run.string.index(part, start) if part else start
        if sum(c.isdigit() for c in part) >= 7:
            yield at, at + len(part)
        start = at + len(part)


def _piece_is_phone(text: str, start: int, end: int, national: bool) -> bool | None:
    """Whether a piece of a run that the library's matcher did not read is a phone number;
    None when it was not read in national formats (so it does not count as a try)."""
    candidate = text[start:end]
    if _DECIMAL.fullmatch(candidate):
        return None  # 0.70710678: a number with a fraction, not a phone
    if _international_possible(candidate) or _dialled_abroad(candidate):
        return _phone_span_ok(text, start, end) or None
    if not _phone_span_ok(text, start, end):
        return None
    if national and _local_number(text, start, end):
        return True
    if national and _FOURS.fullmatch(candidate):  # Central America, Singapore, Hong Kong
        return _fours_given(text, start, end) and any(
            phonenumbers.is_valid_number(n) for n in _national_readings(candidate)
        )
    return (national and _national_phone_ok(candidate)) or (
        (
            _national_mobile(candidate)
            or _br_mobile(candidate)
            or (_in_mobile(candidate) and _given(text, start))
        )
        and not _GROUP_BEFORE.search(text, 0, start)
    )


def find_phones(t: Text, taken: list[Span]) -> Iterator[Span]:
    """Phone numbers in digit runs that no more specific finding already covers."""
    text = t.raw
    if t.digits < 7:
        return
    yield from _chat_links(text)
    national = _PHONE_WORD.search(t.lower) is not None
    if national or "msisdn" in t.lower:
        yield from _glued(text)
    tried = 0  # runs read in national formats (each tries every region)
    for run, unread in _runs(t, taken):
        if unread or tried > MAX_NATIONAL_TRIES:
            yield PiiKind.PHONE, run.start(), run.end()  # more than a memory holds: fail-safe
            return
        found = _matched(text, run.start(), run.end())
        if found:
            yield from found
            continue
        for start, end in _pieces(run):  # the run itself, unless a joint splits it
            if (start, end) != run.span() and (found := _matched(text, start, end)):
                yield from found
                continue
            verdict = _piece_is_phone(text, start, end, national)
            if verdict is None:
                continue
            tried += 1
            if verdict:
                yield PiiKind.PHONE, start, end
