"""More ``national_id`` findings: identity documents named in the text, and formats of many
countries that a check digit and their layout make distinctive.

:mod:`~engram.memory.gate.pii.identifiers` knows a handful of ids by shape. Text written by
people in other countries names many more, and usually says what it is: "passport no.
K4821937", "PESEL 92071590225", "My Number for the tax adjustment: 9720 0789 8470". Three
rules:

* **A document named before its number.** An identity keyword (passport, driving licence,
  identity card, national or personal id number, social security or tax number, and the
  local names: PESEL, personnummer, CPF, CURP, RRN, NRIC, IRD, TFN, JMBG, IDNP, a seafarer's
  book, SSS, PhilHealth, …) followed within
  ``_AFTER`` characters by an id-shaped token: letters and digits, at least five digits (four
  in a token of eight or more characters that also has letters), not a date, an amount or a
  version. Where the keyword names a format with a check digit, the token must pass it.
* **A checked id named after its number** ("344495011412 — that's the Aadhaar"): the same,
  looking back, only for keywords whose format has a check digit.
* **Distinctive layouts**, checked, with no keyword: a Korean resident registration number
  (``840527-1468275``), a Brazilian CPF (``123.456.789-09``), a Swedish personnummer
  (``19910227-1203``), a Swiss AHV number (``756.1234.5678.97``), a Belgian national number
  (``85.07.30-033.28``), a Portuguese citizen card (``22218177 2 KV2``), an Irish PPS number,
  a Malaysian NRIC, a Chinese resident id, a Singapore NRIC/FIN, a Finnish henkilötunnus,
  Mexican CURPs and personal RFCs and a Myanmar NRC (``12/DaGaTa(N)633176``).

A pet's or a horse's passport names no person, and a number of one digit repeated or of digits
counted up (``P0000000A``, ``12-345678901-2``) is a form's stand-in.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from stdnum.ad import nrt as _ad_nrt
from stdnum.at import vnr as _at_vnr
from stdnum.au import tfn as _au_tfn
from stdnum.be import nn as _be_nn
from stdnum.bg import egn as _bg_egn
from stdnum.br import cpf as _br_cpf
from stdnum.ca import bc_phn as _ca_bc_phn
from stdnum.ch import ssn as _ch_ssn
from stdnum.cn import ric as _cn_ric
from stdnum.cz import rc as _cz_rc
from stdnum.dk import cpr as _dk_cpr
from stdnum.ee import ik as _ee_ik
from stdnum.fi import hetu as _fi_hetu
from stdnum.fr import nif as _fr_nif
from stdnum.gb import nhs as _gb_nhs
from stdnum.gr import amka as _gr_amka
from stdnum.gr import vat as _gr_vat
from stdnum.gt import nit as _gt_nit
from stdnum.hr import oib as _hr_oib
from stdnum.id import nik as _id_nik
from stdnum.id import npwp as _id_npwp
from stdnum.ie import pps as _ie_pps
from stdnum.il import idnr as _il_idnr
from stdnum.in_ import aadhaar as _in_aadhaar
from stdnum.in_ import pan as _in_pan
from stdnum.is_ import kennitala as _is_kennitala
from stdnum.jp import in_ as _jp_in
from stdnum.kr import rrn as _kr_rrn
from stdnum.lt import asmens as _lt_asmens
from stdnum.lv import pvn as _lv_pvn
from stdnum.md import idno as _md_idno
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

from engram.memory.gate.pii.checks import (
    MN_LETTERS,
    Check,
    any_of,
    br_cns,
    de_kvnr,
    es_nss,
    gt_cui,
    hkid,
    hu_taj,
    ir_melli,
    jm_trn,
    lu_matricule,
    mm_nrc,
    mn_register,
    mx_nss,
    nz_nhi,
    personal_cuit,
    personal_rut,
    sg_nric,
    sv_dui,
    tw_id,
    uk_licence,
    us_dea,
    us_npi,
)
from engram.memory.gate.pii.findings import PiiKind, Span, Text
from engram.memory.gate.pii.heuristics import folded, passes_check

_safe = passes_check


# Keywords whose format has a check digit: the token must pass it (tried as written and
# without separators). Matched on the lowered text, as whole words.
_CHECKED: tuple[tuple[str, Check], ...] = (
    (r"pesel", _pl_pesel.is_valid),
    (r"aadhaa?r", _in_aadhaar.is_valid),
    (r"personnummer|personnr|person(?:al)? number|pnr", _se_pnr.is_valid),
    (r"f[øo]dselsnummer|f[øo]dselsnr|fnr", _no_fnr.is_valid),
    (r"hetu|henkil[öo]tunnus", _fi_hetu.is_valid),
    (r"cpf", _br_cpf.is_valid),
    (r"curp", _mx_curp.is_valid),
    (r"rfc", _mx_rfc.is_valid),
    (r"rut", personal_rut),
    (r"rrn|resident registration(?: number)?|주민등록번호", _kr_rrn.is_valid),
    (r"my[ _]?number|individual number|マイナンバー|個人番号", _jp_in.is_valid),
    (r"nric|fin", any_of(sg_nric, _my_nric.is_valid)),
    (r"ird(?: number)?", _nz_ird.is_valid),
    (r"tfn|tax file number", _au_tfn.is_valid),
    (r"ppsn?|personal public service", _ie_pps.is_valid),
    (r"nhs(?: number)?|nhsnumber|nhsno", _gb_nhs.is_valid),
    (r"ahv|avs", _ch_ssn.is_valid),
    (r"sv[\- ]?nummer|sozialversicherungsnummer|versicherungsnummer|svnr|vsnr", _at_vnr.is_valid),
    (r"cnp", _ro_cnp.is_valid),
    (
        r"sa id|south african id|id ?number|id",
        any_of(_za_idnr.is_valid, _kr_rrn.is_valid, _th_pin.is_valid, _si_emso.is_valid),
    ),
    (r"nif|contribuinte", _pt_nif.is_valid),
    (r"num[ée]ro fiscal|n[°º] fiscal|identifiant fiscal", _fr_nif.is_valid),
    (r"cart[ãa]o de cidad[ãa]o|citizen card", _pt_cc.is_valid),
    (
        (
            r"rijksregisternummer|rijksreg\. ?nr|national (?:register|registry) number"
            r"|num[ée]ro national|registre national"
        ),
        _be_nn.is_valid,
    ),
    (r"matricule|s[ée]curit[ée] sociale|luxembourg", lu_matricule),
    (r"idnp", _md_idno.is_valid),
    (r"resident identity|居民身份证", _cn_ric.is_valid),
    (r"cuil|cuit", personal_cuit),
    (r"teudat zehut|t\.z\.|israeli id(?: number)?|תעודת זהות|ת\.ז", _il_idnr.is_valid),
    (r"rodn[ée] [čc][íi]slo|r\.[čc]\.", _cz_rc.is_valid),
    (r"t\.?c\.? kimlik(?: no)?|kimlik no|tckn|tckno|t\.c\. no", _tr_tck.is_valid),
    (r"cpr(?:-nummer| number| nr\.?)?", _dk_cpr.is_valid),
    (r"amka", _gr_amka.is_valid),
    (r"afm|αφμ", _gr_vat.is_valid),
    (r"oib", _hr_oib.is_valid),
    (r"nik|ktp", _id_nik.is_valid),
    (r"npwp", _id_npwp.is_valid),
    (r"taj(?:[ \-]?sz[áa]m)?", hu_taj),
    (r"no\.? kp|mykad|kad pengenalan", _my_nric.is_valid),
    (r"cnic|nadra", _pk_cnic.is_valid),
    (r"asmens kodas", _lt_asmens.is_valid),
    (r"emšo|emso|jmbg", _si_emso.is_valid),
    (r"егн|egn", _bg_egn.is_valid),
    (r"personas kods", _lv_pvn.is_valid),
    (r"isikukood", _ee_ik.is_valid),
    (r"rif", _ve_rif.is_valid),
    (r"инн|inn(?: физлица)?", lambda v: len(v) == 12 and bool(_ru_inn.is_valid(v))),
    (r"рнокпп|рнокпп|ипн|іпн|rnokpp", _ua_rntrc.is_valid),
    (r"thai (?:pin|id)|เลขประจำตัวประชาชน|บัตรประชาชน", _th_pin.is_valid),
    (r"taiwan id|身分證", tw_id),
    (r"hkid|hong kong id(?:entity card)?", hkid),
    (r"pan(?: card| no\.?| number)?", lambda v: bool(_in_pan.is_valid(v.upper()))),
    (r"کد ملی|melli code|code melli|kod-?e? melli|iranian national code", ir_melli),
    (r"npi(?: number| no\.?)?|national provider identifier", us_npi),
    (r"dea(?: number| no\.?| registration(?: number)?| #)?", us_dea),
    (r"(?:bc )?phn|personal health number", _ca_bc_phn.is_valid),
    (r"nhi(?: number| no\.?)?|national health index(?: number)?", nz_nhi),
    (r"dui", sv_dui),
    (r"dpi|cui|dpi/cui", gt_cui),
    (r"trn", jm_trn),
    (r"nit(?: personal)?", _gt_nit.is_valid),
    (r"kennitala|kt\.", _is_kennitala.is_valid),
    (r"nrt", _ad_nrt.is_valid),
    (r"niss|insz|inss", _be_nn.is_valid),
    (r"cns|cart[ãa]o nacional de sa[úu]de|cart[ãa]o sus", br_cns),
    (r"nss|imss|afiliaci[óo]n(?: a la seguridad social)?", any_of(mx_nss, es_nss)),
    (r"kvnr|(?:kranken)?versichertennummer|egk", de_kvnr),
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
    r"|social card|personal no|cni(?: ivoirienne| s[ée]n[ée]galaise| burkinab[ée])?|cnib"
    r"|jawaz(?: as-safar| safar)?|(?:al-)?bitaqa(?: al-wataniya| wataniya)?"
    r"|paspoortnummer|dowodu osobistego|tessera sanitaria|rentenversicherungsnummer"
    r"|(?:personal)?ausweisnummer|(?:personal)?ausweis-?nr|eat-karten?(?:nummer)?"
    r"|(?:n[º°.]? de |n[úu]mero de )?utente(?: sns)?"
    r"|osebn[ae] izkaznic[ae]|osobn[ae] iskaznic[ae]|li[čc]na karta"
    # a seafarer's book and record: the Philippine SIRB, the Indian CDC and INDoS number
    r"|seam[ae]n'?s? book|seafarer'?s? (?:book|record book|identity document)|sirb|buku pelaut"
    r"|cdc (?:no|number)|continuous discharge certificate|indos(?: no)?"
    r"|sss(?: no)?|philhealth(?: no| number| pin)?|pag-?ibig(?: mid)?(?: no)?|hdmf"
)
# A keyword starts a word, or follows a character of a script written without spaces
# ("アイコのマイナンバー", "김민수의 주민등록번호"): there no word boundary parts them.
_START = r"(?:\b|(?<=[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]))"
_CHECKED_RE = re.compile(
    folded(_START + r"(?:" + "|".join(f"(?:{k})" for k, _ in _CHECKED) + r")\b")
)
_CHECKED_PARTS = tuple((re.compile(folded(rf"(?:{k})\Z")), check) for k, check in _CHECKED)
_SHAPED_RE = re.compile(folded(_START + r"(?:" + _SHAPED + r")\b"))
_AFTER = 40
_BEFORE = 32
# Short names that are also ordinary words or abbreviations ("DL" for deep learning): they
# count in capitals only, and the number must follow within a "no." or a colon.
_ABBREVIATIONS = frozenset({"dl", "nin", "cin", "tin", "nic", "nid", "iin", "cnh", "rg", "bvn"})
_ABBREVIATIONS |= {"cni", "cnib", "sss"}
# A passport of an animal (an EU pet passport, a horse's): it names no person.
_ANIMAL = re.compile(r"\b(?:pets?|animal|horse|equine|dog|cat)(?:'s)? $")
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
# Digits counted up in order, as a form's example writes them ("12-345678901-2").
_COUNTING = "01234567890123456789"
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
    numerals = "".join(c for c in alnum if c.isdigit())
    counted = not letters and digits >= 9 and numerals in _COUNTING
    if digits >= 5 and (len(set(numerals)) == 1 or counted):
        return False  # a form's stand-in ("P0000000A", "12-345678901-2"), not a number
    if alnum.isupper() and letters and len(alnum) >= 8 and digits >= 2:
        return True  # a document number of capitals and digits ("JR6NRYT6R")
    # four digits need letters beside them: eight characters, or seven in capitals ("BJU4458")
    long_enough = len(alnum) >= 8 or (len(alnum) == 7 and alnum.isupper())
    return digits >= 5 or (digits >= 4 and letters >= 1 and long_enough)


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
    r"|(?P<hndni>(?:0[1-9]|1[0-8])(?:0[1-9]|[12]\d)-(?:19|20)\d{2}-\d{5})"
    r"|(?<![\u0400-\u04ff])(?P<mn>" + MN_LETTERS + r"{2}\d{8})"
    r"|(?P<mmnrc>(?:1[0-4]|[1-9])/[A-Za-z]{6,12}\((?:N|E|P|A|F|TH|S)\)\d{6})"
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
    "sgnric": sg_nric,
    "hetu": _fi_hetu.is_valid,
    "curp": lambda v: _mx_curp.is_valid(v.upper()),
    "rfc": _mx_rfc.is_valid,
    "rut": personal_rut,
    "cuil": personal_cuit,
    "rc": _cz_rc.is_valid,
    "rif": _ve_rif.is_valid,
    "tw": tw_id,
    "hk": hkid,
    "cnic": _pk_cnic.is_valid,
    "ukdl": uk_licence,
    "hndni": lambda v: True,  # a Honduran DNI: department, municipality, year of registration
    "mn": mn_register,
    "mmnrc": mm_nrc,
}


# A South African id (birth date, citizenship digit, Luhn) by its thirteen digits alone, in a
# text that names the country: a bare run of thirteen digits is too often a barcode elsewhere.
_ZA_ID = re.compile(r"(?<![\w\-])\d{13}(?![\w\-])")
_ZA_TEXT = re.compile(r"\b(?:za|rsa|south africa\w*)\b|\+27")
# A person's Kenyan KRA PIN (a company's starts with P), anywhere in a text naming the KRA:
# "KRA PIN for withholding tax on Kamau's invoices: A017423403P" is too far for the keyword.
_KRA_PIN = re.compile(r"(?<![A-Za-z0-9])A\d{9}[A-Z](?![A-Za-z0-9])")


def _by_country(t: Text, text: str, lower: str) -> Iterator[Span]:
    """Ids found by their layout in a text that names their country (ZA) or office (KRA)."""
    if t.digits >= 13 and _ZA_TEXT.search(lower):
        for m in _ZA_ID.finditer(text):
            if _safe(_za_idnr.is_valid, m.group(0)):
                yield PiiKind.NATIONAL_ID, m.start(), m.end()
    if "kra" in lower:
        yield from ((PiiKind.NATIONAL_ID, m.start(), m.end()) for m in _KRA_PIN.finditer(text))


def find_documents(t: Text) -> Iterator[Span]:
    if t.digits < 4:  # an Indian PAN holds four digits
        return
    # a field name's underscores read as spaces ("passport_no", "aadhaar_no"): same offsets
    text, lower = t.raw, t.lower.replace("_", " ")
    yield from _by_country(t, text, lower)
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
        if k.group(0).startswith(("tax", "tin")) and _NOT_PERSONAL.search(
            lower, max(0, k.start() - 32), k.start()
        ):
            continue  # "company TIN", "business tax id": a company's, not a person's
        if k.group(0).startswith("cdc ") and text[k.start() : k.start() + 3] != "CDC":
            continue  # a seafarer's CDC is written in capitals; "cdc" is change data capture
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
        found = _first_token(text, k.end(), k.end() + window)
        if found is None:
            continue
        if _ANIMAL.search(lower, max(0, k.start() - 10), k.start()):
            continue  # "EU pet passport no. BE-1931424", "horse passport UELN …"
        if k.group(0) == "kra pin" and text[found[0]] in "Pp":
            continue  # a KRA PIN starting with P is a company's
        yield PiiKind.NATIONAL_ID, found[0], found[1]
