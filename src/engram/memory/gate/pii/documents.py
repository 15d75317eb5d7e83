"""More ``national_id`` findings: identity documents named in the text, and formats of many
countries that a check digit and their layout make distinctive.

:mod:`~engram.memory.gate.pii.identifiers` knows a handful of ids by shape. Text written by
people in other countries names many more, and usually says what it is: "passport no.
K4821937", "PESEL 92071590225", "My Number for the tax adjustment: 9720 0789 8470". Three
rules:

* **A document named before its number.** An identity keyword (passport, driving licence,
  identity card, national or personal id number, social security or tax number, and the
  local names: PESEL, personnummer, CPF, CURP, RRN, NRIC, IRD, TFN, …) followed within
  ``_AFTER`` characters by an id-shaped token: letters and digits, at least five digits (four
  in a token of eight or more characters that also has letters), not a date, an amount or a
  version. Where the keyword names a format with a check digit, the token must pass it.
* **A checked id named after its number** ("344495011412 — that's the Aadhaar"): the same,
  looking back, only for keywords whose format has a check digit.
* **Distinctive layouts**, checked, with no keyword: a Korean resident registration number
  (``840527-1468275``), a Brazilian CPF (``123.456.789-09``), a Swedish personnummer
  (``19910227-1203``), a Swiss AHV number (``756.1234.5678.97``), a Belgian national number
  (``85.07.30-033.28``), a Portuguese citizen card (``22218177 2 KV2``), an Irish PPS number,
  a Malaysian NRIC, a Chinese resident id, a Singapore NRIC/FIN, a Finnish henkilötunnus and
  Mexican CURPs and personal RFCs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from stdnum import luhn as _luhn
from stdnum.ar import cuit as _ar_cuit
from stdnum.at import vnr as _at_vnr
from stdnum.au import tfn as _au_tfn
from stdnum.be import nn as _be_nn
from stdnum.bg import egn as _bg_egn
from stdnum.br import cpf as _br_cpf
from stdnum.ca import bc_phn as _ca_bc_phn
from stdnum.ch import ssn as _ch_ssn
from stdnum.cl import rut as _cl_rut
from stdnum.cn import ric as _cn_ric
from stdnum.cz import rc as _cz_rc
from stdnum.dk import cpr as _dk_cpr
from stdnum.ee import ik as _ee_ik
from stdnum.fi import hetu as _fi_hetu
from stdnum.gb import nhs as _gb_nhs
from stdnum.gr import amka as _gr_amka
from stdnum.gr import vat as _gr_vat
from stdnum.hr import oib as _hr_oib
from stdnum.id import nik as _id_nik
from stdnum.id import npwp as _id_npwp
from stdnum.ie import pps as _ie_pps
from stdnum.il import idnr as _il_idnr
from stdnum.in_ import aadhaar as _in_aadhaar
from stdnum.in_ import pan as _in_pan
from stdnum.jp import in_ as _jp_in
from stdnum.kr import rrn as _kr_rrn
from stdnum.lt import asmens as _lt_asmens
from stdnum.lv import pvn as _lv_pvn
from stdnum.mx import curp as _mx_curp
from stdnum.mx import rfc as _mx_rfc
from stdnum.my import nric as _my_nric
from stdnum.no import fodselsnummer as _no_fnr
from stdnum.nz import ird as _nz_ird
from stdnum.pk import cnic as _pk_cnic
from stdnum.pl import pesel as _pl_pesel
from stdnum.pt import cc as _pt_cc
from stdnum.pt import nif as _pt_nif
from stdnum.ro import cnp as _ro_cnp
from stdnum.ru import inn as _ru_inn
from stdnum.se import personnummer as _se_pnr
from stdnum.si import emso as _si_emso
from stdnum.th import pin as _th_pin
from stdnum.tr import tckimlik as _tr_tck
from stdnum.ua import rntrc as _ua_rntrc
from stdnum.ve import rif as _ve_rif
from stdnum.za import idnr as _za_idnr

from engram.memory.gate.pii.findings import PiiKind, Span, Text
from engram.memory.gate.pii.heuristics import folded, passes_check

Check = Callable[[str], bool]


def _sg_nric(value: str) -> bool:
    """Singapore NRIC / FIN: a prefix letter, seven digits and a check letter."""
    value = value.upper()
    if not re.fullmatch(r"[STFGM]\d{7}[A-Z]", value):
        return False
    total = sum(int(d) * w for d, w in zip(value[1:8], (2, 7, 6, 5, 4, 3, 2), strict=True))
    total += {"T": 4, "G": 4, "M": 3}.get(value[0], 0)
    table = "JZIHGFEDCBA" if value[0] in "ST" else "XWUTRQPNMLK"
    if value[0] == "M":
        table = "KLJNPQRTUWX"
    return table[total % 11] == value[-1]


_TW_LETTERS = "ABCDEFGHJKLMNPQRSTUVXYWZIO"  # A=10 … in the order the ids assign them


def _tw_id(value: str) -> bool:
    """Taiwan national id: a letter (the place of issue), 1 or 2, eight digits, the last a
    check digit."""
    value = value.upper()
    if not re.fullmatch(r"[A-Z][12]\d{8}", value):
        return False
    code = _TW_LETTERS.index(value[0]) + 10
    digits = [code // 10, code % 10, *map(int, value[1:])]
    weights = (1, 9, 8, 7, 6, 5, 4, 3, 2, 1, 1)
    return sum(d * w for d, w in zip(digits, weights, strict=True)) % 10 == 0


def _hkid(value: str) -> bool:
    """Hong Kong identity card: one or two letters, six digits and a check digit (0-9 or A),
    often written in brackets."""
    match = re.fullmatch(r"([A-Z]{1,2})(\d{6})\(?([0-9A])\)?", value.upper())
    if match is None:
        return False
    letters, digits, check = match.groups()
    letters = letters.rjust(2, " ")
    values = [36 if c == " " else ord(c) - 55 for c in letters] + [int(d) for d in digits]
    total = sum(v * w for v, w in zip(values, range(9, 1, -1), strict=True))
    expected = (11 - total % 11) % 11
    return check == ("A" if expected == 10 else str(expected))


def _uk_licence(value: str) -> bool:
    """A British driving licence number: five letters of the surname (9 pads a short one),
    the birth date as decade, month (plus 50 for a woman), day and year, then initials, a
    digit and two check letters; OCR may split it with spaces."""
    digits = value.replace(" ", "")[5:11]
    month, day = int(digits[1:3]), int(digits[3:5])
    return (1 <= month <= 12 or 51 <= month <= 62) and 1 <= day <= 31


def _personal_cuit(value: str) -> bool:
    """An Argentine CUIL or CUIT of a person (20, 23, 24, 27); 30, 33 and 34 are companies."""
    return bool(_ar_cuit.is_valid(value)) and re.sub(r"\D", "", value)[:2] in {
        "20",
        "23",
        "24",
        "27",
    }


def _us_npi(value: str) -> bool:
    """A US National Provider Identifier: ten digits, Luhn over the 80840 prefix."""
    return bool(re.fullmatch(r"[12]\d{9}", value)) and bool(_luhn.is_valid("80840" + value))


def _us_dea(value: str) -> bool:
    """A DEA registration number: two letters, six digits and a check digit."""
    if not re.fullmatch(r"[A-Z]{2}\d{7}", value):
        return False
    d = [int(c) for c in value[2:]]
    return (d[0] + d[2] + d[4] + 2 * (d[1] + d[3] + d[5])) % 10 == d[6]


def _ir_melli(value: str) -> bool:
    """An Iranian national code (kod-e melli): ten digits, the last a mod-11 check."""
    if not re.fullmatch(r"\d{10}", value) or len(set(value)) == 1:
        return False
    total = sum(int(d) * (10 - i) for i, d in enumerate(value[:9])) % 11
    return int(value[9]) == (total if total < 2 else 11 - total)


def _hu_taj(value: str) -> bool:
    """A Hungarian social security number (TAJ): nine digits, the last the sum of the first
    eight weighted 3 and 7 in turn, modulo 10."""
    digits = value.replace("-", "").replace(" ", "")
    if not re.fullmatch(r"\d{9}", digits) or len(set(digits)) == 1:
        return False
    total = sum(int(d) * (3 if n % 2 == 0 else 7) for n, d in enumerate(digits[:8]))
    return total % 10 == int(digits[8])


def _any(*checks: Check) -> Check:
    def check(value: str) -> bool:
        return any(_safe(c, value) for c in checks)

    return check


_safe = passes_check


# Keywords whose format has a check digit: the token must pass it (tried as written and
# without separators). Matched on the lowered text, as whole words.
_CHECKED: tuple[tuple[str, Check], ...] = (
    (r"pesel", _pl_pesel.is_valid),
    (r"aadhaa?r", _in_aadhaar.is_valid),
    (r"personnummer|person(?:al)? number|pnr", _se_pnr.is_valid),
    (r"f[øo]dselsnummer|fnr", _no_fnr.is_valid),
    (r"hetu|henkil[öo]tunnus", _fi_hetu.is_valid),
    (r"cpf", _br_cpf.is_valid),
    (r"curp", _mx_curp.is_valid),
    (r"rfc", _mx_rfc.is_valid),
    (r"rut", _cl_rut.is_valid),
    (r"rrn|resident registration(?: number)?|주민등록번호", _kr_rrn.is_valid),
    (r"my[ _]?number|individual number|マイナンバー|個人番号", _jp_in.is_valid),
    (r"nric|fin", _any(_sg_nric, _my_nric.is_valid)),
    (r"ird(?: number)?", _nz_ird.is_valid),
    (r"tfn|tax file number", _au_tfn.is_valid),
    (r"ppsn?|personal public service", _ie_pps.is_valid),
    (r"nhs(?: number)?", _gb_nhs.is_valid),
    (r"ahv|avs", _ch_ssn.is_valid),
    (r"sv[\- ]?nummer|sozialversicherungsnummer|versicherungsnummer", _at_vnr.is_valid),
    (r"cnp", _ro_cnp.is_valid),
    (
        r"sa id|south african id|id ?number|id",
        _any(_za_idnr.is_valid, _kr_rrn.is_valid, _th_pin.is_valid),
    ),
    (r"nif|contribuinte", _pt_nif.is_valid),
    (r"cart[ãa]o de cidad[ãa]o|citizen card", _pt_cc.is_valid),
    (r"rijksregisternummer|national (?:register|registry) number", _be_nn.is_valid),
    (r"resident identity|居民身份证", _cn_ric.is_valid),
    (r"cuil|cuit", _personal_cuit),
    (r"teudat zehut|t\.z\.|israeli id(?: number)?|תעודת זהות|ת\.ז", _il_idnr.is_valid),
    (r"rodn[ée] [čc][íi]slo|r\.[čc]\.", _cz_rc.is_valid),
    (r"t\.?c\.? kimlik(?: no)?|kimlik no", _tr_tck.is_valid),
    (r"cpr(?:-nummer| number| nr\.?)?", _dk_cpr.is_valid),
    (r"amka", _gr_amka.is_valid),
    (r"afm|αφμ", _gr_vat.is_valid),
    (r"oib", _hr_oib.is_valid),
    (r"nik|ktp", _id_nik.is_valid),
    (r"npwp", _id_npwp.is_valid),
    (r"taj(?:[ \-]?sz[áa]m)?", _hu_taj),
    (r"no\.? kp|mykad|kad pengenalan", _my_nric.is_valid),
    (r"cnic|nadra", _pk_cnic.is_valid),
    (r"asmens kodas", _lt_asmens.is_valid),
    (r"emšo|emso", _si_emso.is_valid),
    (r"егн|egn", _bg_egn.is_valid),
    (r"personas kods", _lv_pvn.is_valid),
    (r"isikukood", _ee_ik.is_valid),
    (r"rif", _ve_rif.is_valid),
    (r"инн|inn(?: физлица)?", lambda v: len(v) == 12 and bool(_ru_inn.is_valid(v))),
    (r"рнокпп|рнокпп|ипн|іпн|rnokpp", _ua_rntrc.is_valid),
    (r"thai (?:pin|id)|เลขประจำตัวประชาชน|บัตรประชาชน", _th_pin.is_valid),
    (r"taiwan id|身分證", _tw_id),
    (r"hkid|hong kong id(?:entity card)?", _hkid),
    (r"pan(?: card| no\.?| number)?", lambda v: bool(_in_pan.is_valid(v.upper()))),
    (r"کد ملی|melli code|code melli|kod-?e? melli|iranian national code", _ir_melli),
    (r"npi(?: number| no\.?)?|national provider identifier", _us_npi),
    (r"dea(?: number| no\.?| registration(?: number)?| #)?", _us_dea),
    (r"(?:bc )?phn|personal health number", _ca_bc_phn.is_valid),
)
_US_STATES = (
    "alabama|alaska|arizona|arkansas|california|colorado|connecticut|delaware|florida|georgia"
    "|hawaii|idaho|illinois|indiana|iowa|kansas|kentucky|louisiana|maine|maryland"
    "|massachusetts|michigan|minnesota|mississippi|missouri|montana|nebraska|nevada"
    "|new hampshire|new jersey|new mexico|new york|north carolina|north dakota|ohio|oklahoma"
    "|oregon|pennsylvania|rhode island|south carolina|south dakota|tennessee|texas|utah"
    "|vermont|virginia|washington|west virginia|wisconsin|wyoming"
)
# Keywords of documents without a published check digit: the token's shape must do.
_SHAPED = (
    r"passport|passeport|pasaporte|passaporto|reisepass|paspoort|passnummer|pass-?nr"
    r"|driver'?s? licen[cs]e|driving licen[cs]e|driver licen[cs]e|dl|f[üu]hrerschein"
    r"|permis de conduire|carnet de conducir|licencia de conducir|patente di guida|rijbewijs"
    r"|k[öo]rkort|prawo jazdy|carta de condu[cç][ãa]o|licen[cs]e (?:no|number)"
    r"|identity card|id card|national id(?:entity)?(?: card| number| no)?|identity number"
    r"|identity document|personalausweis|carte d'identit[ée]|carta d'identit[àa]"
    r"|documento de identidad|dowód osobisty|dowod osobisty|cédula|cedula|medicare"
    r"|health card|ohip|ramq|social security|social insurance|national insurance"
    r"|k[øo]rekort|ajokortti|řidičský průkaz|ehliyet|permis|nin|kra pin|dni|cédula de identidad"
    r"|philsys(?: card)?(?: number)?|căn cước(?: công dân)?|cccd|umid|sss number"
    r"|emirates id|ghana card|matricule|numéro d'identification national|iqama|cin|tin"
    r"|national identity card|id-kaart|asmens tapatybės kortelė|cédula de ciudadanía"
    r"|nic|nid|iin|снилс|snils|citizenship (?:certificate )?(?:no|number)"
    r"|tax (?:id|number|identification number|code)|taxpayer"
    r"|voter'?s? (?:id|card)|voter id card|epic (?:no|number)"
    r"|паспорт|护照|護照|여권|パスポート|דרכון|hộ chiếu|หนังสือเดินทาง|جواز سفر"
    r"|αριθμός ταυτότητας|δελτίο ταυτότητας|身份证|身分證|주민등록증|удостоверение личности"
    r"|bvn|bank verification number|t[íi]tulo de eleitor|clave de elector|cnh|rg"
    r"|rijbewijsnummer|f[üu]hrerscheinnummer|num[ée]ro de permis"
    r"|(?:kenyan|ugandan|tanzanian|nigerian|ghanaian|zambian|rwandan|ethiopian) id(?: number| no)?"
    r"|dmv (?:client )?id|dod id|edipi|a-?number|alien (?:registration )?number|uscis"
    r"|(?:" + _US_STATES + r") (?:dl|driver'?s? licen[cs]e|licen[cs]e|id card|state id)"
)
_CHECKED_RE = re.compile(folded(r"\b(?:" + "|".join(f"(?:{k})" for k, _ in _CHECKED) + r")\b"))
_CHECKED_PARTS = tuple((re.compile(folded(rf"(?:{k})\Z")), check) for k, check in _CHECKED)
_SHAPED_RE = re.compile(folded(r"\b(?:" + _SHAPED + r")\b"))
_AFTER = 40
_BEFORE = 32
# Short names that are also ordinary words or abbreviations ("DL" for deep learning): they
# count in capitals only, and the number must follow within a "no." or a colon.
_ABBREVIATIONS = frozenset({"dl", "nin", "cin", "tin", "nic", "nid", "iin", "cnh", "rg", "bvn"})
# A tax number of a company, not a person: "company tax number", "VAT / business tax id".
_NOT_PERSONAL = re.compile(r"\b(?:company|business|corporate|vat|supplier|firm|employer)\b")
_ABBREVIATION_AFTER = 8
# A company named beside a tax number: "εταιρεία" and its forms, Greek "A.E.", "Ltd", "GmbH".
_COMPANY = re.compile(r"εταιρ|\b(?:company|ltd|gmbh|llc|inc)\b|\N{GREEK SMALL LETTER ALPHA}\.ε\.")
_ORGANISATION = re.compile(r"\b(?:group|type 2|organi[sz]ation(?:al)?|facility|billing)\b")
_LONG_RUN = re.compile(r"(?<![\w\-./])\d{9,17}(?![\w\-]|[.,]\d)")
#: Keywords read per text; a text naming more ids than this is reported unread (fail-safe).
MAX_KEYWORDS = 64
# An id-shaped token: letters and digits joined by single separators; a part after a space
# must hold a digit ("5989 200399", "22218177 2 KV2"), so words do not join.
_TOKEN = re.compile(
    r"(?<![A-Za-z0-9\-./])[A-Za-z0-9]+(?:[.\-/][A-Za-z0-9]+|[ ](?=[A-Za-z]*\d)[A-Za-z0-9]+)*"
    r"(?![A-Za-z0-9]|[.\-/][A-Za-z0-9])"
)
_DATE = re.compile(r"\d{4}[\-/.]\d{1,2}[\-/.]\d{1,2}|\d{1,2}[\-/.]\d{1,2}[\-/.]\d{2,4}")
# A version ("v2", "1.4.2"), not a number grouped in thousands ("38.654.371", an Argentine
# DNI) nor a "v" inside a document number ("60AV15955").
_VERSION = re.compile(r"(?i)(?:^|[^a-z])v\d|^(?!\d{1,3}(?:\.\d{3})+$)\d{1,3}\.\d{1,3}\.\d{1,4}$")


def _shape_ok(token: str) -> bool:
    alnum = re.sub(r"[^A-Za-z0-9]", "", token)
    digits = sum(c.isdigit() for c in alnum)
    letters = len(alnum) - digits
    if not 6 <= len(alnum) <= 20 or _DATE.fullmatch(token) or _VERSION.search(token):
        return False
    if letters and not any(c.isupper() for c in alnum):
        return False  # an id written with letters uses capitals; prose words do not join
    if alnum.isupper() and letters and len(alnum) >= 8 and digits >= 2:
        return True  # a document number of capitals and digits ("JR6NRYT6R")
    return digits >= 5 or (digits >= 4 and letters >= 1 and len(alnum) >= 8)


def _passes(check: Check, token: str) -> bool:
    compact = re.sub(r"[ .\-/]", "", token)
    return _safe(check, token) or _safe(check, compact) or _safe(check, compact.upper())


def _check_of(keyword: str) -> Check:
    for pattern, check in _CHECKED_PARTS:
        if pattern.fullmatch(keyword):
            return check
    raise LookupError(keyword)  # pragma: no cover - every keyword comes from _CHECKED


def _tokens(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """Spans of the id-shaped tokens starting in ``[start, end)``; a word joined to a number
    by a space ("number 288500645") is cut off the front."""
    for m in _TOKEN.finditer(text, start, min(len(text), end + 30)):
        if m.start() >= end:
            return
        first = m.start()
        for part in m.group(0).split(" "):
            if any(c.isdigit() for c in part):
                break
            first += len(part) + 1
        if first < m.end():
            yield first, m.end()


def _first_token(
    text: str, start: int, end: int, *, any_case: bool = False
) -> tuple[int, int] | None:
    for span in _tokens(text, start, end):
        token = text[span[0] : span[1]]
        if _shape_ok(token) or (any_case and _shape_ok(token.upper())):
            return span
    return None


# Layouts distinctive enough to need no keyword once their check digit passes.
_LAYOUTS = re.compile(
    r"(?<![A-Za-z0-9\-./])(?:"
    r"(?P<rrn>\d{6}-[1-8]\d{6})"
    r"|(?P<cpf>\d{3}\.\d{3}\.\d{3}-\d{2})"
    r"|(?P<pnr>(?:19|20)\d{6}-\d{4}|\d{6}[\-+]\d{4})"
    r"|(?P<ahv>756\.\d{4}\.\d{4}\.\d{2})"
    r"|(?P<nn>\d{2}\.\d{2}\.\d{2}-\d{3}\.\d{2})"
    r"|(?P<cc>\d{8} ?\d ?[A-Z]{2}\d)"
    r"|(?P<pps>\d{7}[A-W][A-IW]?)"
    r"|(?P<mynric>\d{6}-\d{2}-\d{4})"
    r"|(?P<ric>\d{17}[\dX])"
    r"|(?P<sgnric>[STFGM]\d{7}[A-Z])"
    r"|(?P<hetu>\d{6}[\-+A-FU-Y]\d{3}[0-9A-Y])"
    r"|(?P<curp>[A-Za-z]{4}\d{6}[HMXhmx][A-Za-z]{5}[A-Za-z0-9]\d)"
    r"|(?P<rfc>[A-Z&]{4}\d{6}[A-Z0-9]{3})"
    r"|(?P<rut>\d{1,2}\.\d{3}\.\d{3}-[\dkK])"
    r"|(?P<cuil>(?:20|2[3-7]|30|33|34)-\d{8}-\d)"
    r"|(?P<rc>\d{6}/\d{3,4})"
    r"|(?P<rif>[VEJPG]-\d{8}-\d)"
    r"|(?P<tw>[A-Za-z][12]\d{8})"
    r"|(?P<hk>[A-Z]{1,2}\d{6}\([0-9A]\))"
    r"|(?P<cnic>\d{5}-\d{7}-\d)"
    r"|(?P<ukdl>[A-Z9]{5} ?\d{6} ?[A-Z9]{2}\d[A-Z]{2})"
    r")(?![A-Za-z0-9]|[.\-/][A-Za-z0-9])"
)
_LAYOUT_CHECKS: dict[str, Check] = {
    "rrn": _kr_rrn.is_valid,
    "cpf": _br_cpf.is_valid,
    "pnr": _se_pnr.is_valid,
    "ahv": _ch_ssn.is_valid,
    "nn": _be_nn.is_valid,
    "cc": _pt_cc.is_valid,
    "pps": _ie_pps.is_valid,
    "mynric": _my_nric.is_valid,
    "ric": _cn_ric.is_valid,
    "sgnric": _sg_nric,
    "hetu": _fi_hetu.is_valid,
    "curp": lambda v: _mx_curp.is_valid(v.upper()),
    "rfc": _mx_rfc.is_valid,
    "rut": _cl_rut.is_valid,
    "cuil": _personal_cuit,
    "rc": _cz_rc.is_valid,
    "rif": _ve_rif.is_valid,
    "tw": _tw_id,
    "hk": _hkid,
    "cnic": _pk_cnic.is_valid,
    "ukdl": _uk_licence,
}


# A person's Kenyan KRA PIN (a company's starts with P), anywhere in a text naming the KRA:
# "KRA PIN for withholding tax on Kamau's invoices: A017423403P" is too far for the keyword.
_KRA_PIN = re.compile(r"(?<![A-Za-z0-9])A\d{9}[A-Z](?![A-Za-z0-9])")


def find_documents(t: Text) -> Iterator[Span]:
    if t.digits < 4:  # an Indian PAN holds four digits
        return
    text, lower = t.raw, t.lower
    if "kra" in lower:
        yield from ((PiiKind.NATIONAL_ID, m.start(), m.end()) for m in _KRA_PIN.finditer(text))
    for m in _LAYOUTS.finditer(text):
        group = m.lastgroup or ""
        if _safe(_LAYOUT_CHECKS[group], m.group(0)):
            yield PiiKind.NATIONAL_ID, m.start(), m.end()
    if len(lower) != len(text):
        return  # lower-casing moved offsets (rare scripts): keywords are not looked for
    checked, shaped = list(_CHECKED_RE.finditer(lower)), list(_SHAPED_RE.finditer(lower))
    keywords = [*checked, *shaped]
    if len(keywords) > MAX_KEYWORDS:
        last = keywords[MAX_KEYWORDS]
        yield PiiKind.NATIONAL_ID, last.start(), last.end()
        return
    for k in checked:
        if k.group(0) in ("afm", "αφμ") and _COMPANY.search(
            lower, max(0, k.start() - 40), k.end() + 40
        ):
            continue  # a company's tax number names no person
        if k.group(0).startswith(("npi", "national provider")) and _ORGANISATION.search(
            lower, max(0, k.start() - 24), k.end() + 40
        ):
            continue  # an organisation's NPI (type 2) names no person
        check = _check_of(k.group(0))
        # a checked format may be written in lower case ("pan is jqxpr9902e"): its check holds
        after = _first_token(text, k.end(), k.end() + _AFTER, any_case=True)
        if after is not None and _passes(check, text[after[0] : after[1]]):
            yield PiiKind.NATIONAL_ID, after[0], after[1]
            continue
        for start, end in _tokens(text, max(0, k.start() - _BEFORE), k.start()):
            token = text[start:end]
            if end <= k.start() and _shape_ok(token) and _passes(check, token):
                yield PiiKind.NATIONAL_ID, start, end
    yield from _named_documents(text, lower, shaped)


_DIGIT_OR_BREAK = re.compile(r"\d|[;.!?](?:\s|$)")


def _first_digits(text: str, start: int, end: int) -> re.Match[str] | None:
    """A run of nine digits or more that is the first digit written after ``start`` (before
    ``end``), with no end of a sentence or clause before it."""
    first = _DIGIT_OR_BREAK.search(text, start, end)
    if first is None or not first.group(0).isdigit():
        return None
    return _LONG_RUN.match(text, first.start())


def _named_documents(text: str, lower: str, shaped: list[re.Match[str]]) -> Iterator[Span]:
    """Numbers after the name of a document without a check digit, by shape."""
    for k in shaped:
        window = _AFTER
        if k.group(0) in _ABBREVIATIONS:
            if text[k.start() : k.end()] != k.group(0).upper():
                continue  # "dl", "nin" only as capitalised abbreviations
            # followed at once by the number ("DL F98…"), or by nine digits or more a few
            # words on ("NIN slip came thru: 22068514356", "NID (smart card) 6956685463"):
            # the first digits after the word, in its clause ("NIC bond0 rx_bytes 1234…",
            # "NID daemon restarted; uptime 3456789012 ms" name a network card, a daemon)
            long_run = _first_digits(text, k.end(), k.end() + _AFTER)
            if long_run is not None:
                yield PiiKind.NATIONAL_ID, long_run.start(), long_run.end()
                continue
            window = _ABBREVIATION_AFTER
        if k.group(0).startswith("tax") and _NOT_PERSONAL.search(
            lower, max(0, k.start() - 32), k.start()
        ):
            continue
        found = _first_token(text, k.end(), k.end() + window)
        if found is None:
            continue
        if k.group(0) == "kra pin" and text[found[0]] in "Pp":
            continue  # a KRA PIN starting with P is a company's
        yield PiiKind.NATIONAL_ID, found[0], found[1]
