"""Check digits of identity numbers that ``python-stdnum`` has no module for.

Each function takes a candidate as written (separators included, where the format has them)
and says whether it is a well-formed number of that kind whose check digit holds. A random
string passes one of them about one time in ten, so the detectors use them only beside a
keyword or a layout distinctive on its own (:mod:`~engram.memory.gate.pii.documents`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from stdnum import luhn as _luhn
from stdnum import verhoeff as _verhoeff
from stdnum.ar import cuit as _ar_cuit
from stdnum.cl import rut as _cl_rut

from engram.memory.gate.pii.heuristics import passes_check

Check = Callable[[str], bool]


def sg_nric(value: str) -> bool:
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


def tw_id(value: str) -> bool:
    """Taiwan national id: a letter (the place of issue), 1 or 2, eight digits, the last a
    check digit."""
    value = value.upper()
    if not re.fullmatch(r"[A-Z][12]\d{8}", value):
        return False
    code = _TW_LETTERS.index(value[0]) + 10
    digits = [code // 10, code % 10, *map(int, value[1:])]
    weights = (1, 9, 8, 7, 6, 5, 4, 3, 2, 1, 1)
    return sum(d * w for d, w in zip(digits, weights, strict=True)) % 10 == 0


def hkid(value: str) -> bool:
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


def uk_licence(value: str) -> bool:
    """A British driving licence number: five letters of the surname (9 pads a short one),
    the birth date as decade, month (plus 50 for a woman), day and year, then initials, a
    digit and two check letters; OCR may split it with spaces."""
    digits = value.replace(" ", "")[5:11]
    month, day = int(digits[1:3]), int(digits[3:5])
    return (1 <= month <= 12 or 51 <= month <= 62) and 1 <= day <= 31


def personal_cuit(value: str) -> bool:
    """An Argentine CUIL or CUIT of a person (20, 23, 24, 27); 30, 33 and 34 are companies."""
    return bool(_ar_cuit.is_valid(value)) and re.sub(r"\D", "", value)[:2] in {
        "20",
        "23",
        "24",
        "27",
    }


def us_npi(value: str) -> bool:
    """A US National Provider Identifier: ten digits, Luhn over the 80840 prefix."""
    return bool(re.fullmatch(r"[12]\d{9}", value)) and bool(_luhn.is_valid("80840" + value))


def us_dea(value: str) -> bool:
    """A DEA registration number: two letters, six digits and a check digit."""
    if not re.fullmatch(r"[A-Z]{2}\d{7}", value):
        return False
    d = [int(c) for c in value[2:]]
    return (d[0] + d[2] + d[4] + 2 * (d[1] + d[3] + d[5])) % 10 == d[6]


def ir_melli(value: str) -> bool:
    """An Iranian national code (kod-e melli): ten digits, the last a mod-11 check."""
    if not re.fullmatch(r"\d{10}", value) or len(set(value)) == 1:
        return False
    total = sum(int(d) * (10 - i) for i, d in enumerate(value[:9])) % 11
    return int(value[9]) == (total if total < 2 else 11 - total)


def hu_taj(value: str) -> bool:
    """A Hungarian social security number (TAJ): nine digits, the last the sum of the first
    eight weighted 3 and 7 in turn, modulo 10."""
    digits = value.replace("-", "").replace(" ", "")
    if not re.fullmatch(r"\d{9}", digits) or len(set(digits)) == 1:
        return False
    total = sum(int(d) * (3 if n % 2 == 0 else 7) for n, d in enumerate(digits[:8]))
    return total % 10 == int(digits[8])


def any_of(*checks: Check) -> Check:
    def check(value: str) -> bool:
        return any(passes_check(c, value) for c in checks)

    return check


# The letters of a New Zealand NHI number's old format, valued 1 to 24 (no I, no O).
_NHI_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"


def nz_nhi(value: str) -> bool:
    """A New Zealand National Health Index number: three letters and four digits, the last a
    mod-11 check (the format issued until 2025)."""
    value = value.upper().replace(" ", "")
    if not re.fullmatch(r"[A-HJ-NP-Z]{3}\d{4}", value):
        return False
    values = [_NHI_LETTERS.index(c) + 1 for c in value[:3]] + [int(d) for d in value[3:6]]
    total = sum(v * w for v, w in zip(values, range(7, 1, -1), strict=True)) % 11
    return total != 0 and (11 - total) % 10 == int(value[6])


def sv_dui(value: str) -> bool:
    """A Salvadoran DUI: eight digits and a check digit (weights 9 to 2, modulo 10)."""
    digits = re.sub(r"[\s\-]", "", value)
    if not re.fullmatch(r"\d{9}", digits) or len(set(digits[:8])) == 1:
        return False
    total = sum(int(d) * w for d, w in zip(digits[:8], range(9, 1, -1), strict=True))
    return (10 - total % 10) % 10 == int(digits[8])


def gt_cui(value: str) -> bool:
    """A Guatemalan CUI (on the DPI): eight digits, a mod-11 check digit, and the department
    (01-22) and municipality of registration."""
    digits = re.sub(r"[\s\-]", "", value)
    if not re.fullmatch(r"\d{13}", digits) or not 1 <= int(digits[9:11]) <= 22:
        return False
    total = sum(int(d) * w for d, w in zip(digits[:8], range(2, 10), strict=True))
    return int(digits[11:13]) >= 1 and total % 11 == int(digits[8])


def jm_trn(value: str) -> bool:
    """A Jamaican Taxpayer Registration Number of a person: nine digits starting with 1
    (written 3-3-3); a company's starts with 0."""
    return re.fullmatch(r"1\d{2}[\- ]?\d{3}[\- ]?\d{3}", value) is not None


#: The capitals of the Mongolian Cyrillic alphabet (Russian's, with the barred O and straight U).
MN_LETTERS = r"[\u0410-\u042f\u0401\u04e8\u04ae]"


def mn_register(value: str) -> bool:
    """A Mongolian civil register number: two Cyrillic letters and eight digits starting with
    the birth date (YYMMDD, the month plus 20 for a birth from 2000)."""
    match = re.fullmatch(MN_LETTERS + r"{2}(\d{2})(\d{2})(\d{2})\d{2}", value)
    if match is None:
        return False
    month, day = int(match.group(2)), int(match.group(3))
    return (1 <= month <= 12 or 21 <= month <= 32) and 1 <= day <= 31


def _digits(value: str) -> str:
    return re.sub(r"[\s./\-]", "", value)


def br_cns(value: str) -> bool:
    """Brazil's Cartão Nacional de Saúde: fifteen digits, starting 1, 2, 7, 8 or 9, whose sum
    weighted 15 down to 1 is a multiple of eleven."""
    digits = _digits(value)
    if not re.fullmatch(r"[12789]\d{14}", digits):
        return False
    return sum(int(d) * w for d, w in zip(digits, range(15, 0, -1), strict=True)) % 11 == 0


def mx_nss(value: str) -> bool:
    """Mexico's número de seguridad social (IMSS): eleven digits, the last a Luhn check."""
    digits = _digits(value)
    return len(digits) == 11 and digits.isdigit() and bool(_luhn.is_valid(digits))


def es_nss(value: str) -> bool:
    """Spain's número de afiliación a la Seguridad Social: province (two digits), number
    (seven or eight) and two control digits, the rest of province and number divided by 97
    (the number's value without its leading zero when it is below ten million)."""
    digits = _digits(value)
    if not re.fullmatch(r"\d{12}", digits):
        return False
    province, number, control = int(digits[:2]), int(digits[2:10]), int(digits[10:])
    base = province * 10**8 + number if number >= 10**7 else province * 10**7 + number
    return base % 97 == control


def de_kvnr(value: str) -> bool:
    """Germany's Krankenversichertennummer: a letter and nine digits. The letter as its two
    digits of the alphabet (A = 01) and the first eight digits, weighed 1, 2, 1, 2, ... with
    each product's digits added, give the ninth digit as the sum's last digit."""
    value = value.upper()
    if not re.fullmatch(r"[A-Z]\d{9}", value):
        return False
    body = f"{ord(value[0]) - 64:02d}{value[1:9]}"
    total = sum(sum(divmod(int(d) * (1 + i % 2), 10)) for i, d in enumerate(body))
    return total % 10 == int(value[9])


def personal_rut(value: str) -> bool:
    """A Chilean RUT of a person: companies are numbered from fifty million up."""
    return bool(_cl_rut.is_valid(value)) and int(_cl_rut.compact(value)[:-1]) < 50_000_000


def lu_matricule(value: str) -> bool:
    """Luxembourg's national identification number (matricule): thirteen digits, the birth
    date (YYYYMMDD) and three more, then a Luhn and a Verhoeff check digit of those eleven."""
    digits = _digits(value)
    match = re.fullmatch(r"(?:19|20)\d{2}(\d{2})(\d{2})\d{5}", digits)
    if match is None or not (1 <= int(match.group(1)) <= 12 and 1 <= int(match.group(2)) <= 31):
        return False
    body = digits[:11]
    return bool(_luhn.is_valid(body + digits[11]) and _verhoeff.is_valid(body + digits[12]))


#: The states and regions of Myanmar numbered on a national registration card (1 to 14).
#: The township's code is written in syllables, each capitalised ("DaGaTa", "MaYaKa"), or all
#: in capitals: "1/abcdef(N)123456" or "12/Yangon(N)123456" is a ticket's or order's number.
_MM_NRC = re.compile(
    r"(1[0-4]|[1-9])/(?:(?:[A-Z][a-z]{0,3}){2,4}|[A-Z]{6,12})\((?:N|E|P|A|F|TH|S)\)\d{6}"
)


def mm_nrc(value: str) -> bool:
    """Myanmar's national registration card, in Latin letters: the state's number, the
    township's code, the citizenship letter in brackets and six digits
    (``12/DaGaTa(N)633176``). No check digit; the layout is the distinctive part."""
    return _MM_NRC.fullmatch(value) is not None
