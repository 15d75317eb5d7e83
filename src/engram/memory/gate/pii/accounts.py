"""``bank_account``: account numbers other than cards and IBANs.

Most national account numbers are digits with no check a reader could rely on, so a number
counts only where the text says it is a bank account:

* **Account words**: ``account``, ``acct``, ``acc``, ``a/c``, ``account_number``, ``CLABE``,
  ``NUBAN``, ``kontonummer``, ``cuenta``, ``compte``, ``conto``, ``rekening``, ``no rek``,
  ``checking``, ``savings``, the Russian ``счёт`` and its abbreviation for a current account
  … followed
  within ``_AFTER`` characters by a run of 6 to 20 digits (single spaces, dashes or dots may
  group it), in a text that also speaks of banking: a routing, sort, transit, branch, BSB,
  IFSC or CLABE code, ACH, EFT, a wire, a payout, a direct deposit, a bank, a cheque or
  savings account, a refund or an IBAN. "AWS account 123456789012" or "customer account
  ACC-00918273" is therefore not one. The word may also follow the number ("07762247 is the
  account") within ``_BEFORE`` characters.
* **Bank codes**: a US routing number (ABA, checked) after ``routing``, ``ABA`` or ``RTN``;
  a UK sort code (``20-45-77``) after ``sort code``; an Australian BSB (``062-914``) after
  ``BSB``; a Canadian transit number after ``transit``. Each is reported: with the account
  beside it, it locates the money.
* **Layouts with a check**: a New Zealand account (``01-1188-0687661-01``), a Norwegian
  kontonummer (``9710.78.07016``), an Argentine CBU (22 digits), a Czech account with its
  bank code (``19-4515726386/0800``) and a Hungarian giro number (``12034194-88226763``),
  each by its own check digits.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

from stdnum.ar import cbu as _ar_cbu
from stdnum.cz import bankaccount as _cz_account
from stdnum.no import kontonr as _no_kontonr
from stdnum.nz import bankaccount as _nz_account
from stdnum.us import rtn as _us_rtn

from engram.memory.gate.pii.findings import PiiKind, Span, Text
from engram.memory.gate.pii.heuristics import folded, passes_check

_BANKING = re.compile(
    folded(
        r"(?:bank|\b(?:banking|routing|sort {1,3}code|bsb|ifsc|clabe|swift|bic|iban|ach|eft|wire"
        r"|payouts?"
        r"|payroll|direct deposit|deposit|transit|branch|cheque|checking|savings|current account"
        r"|refund|reimburse\w*|kontonummer|kontonr|konto|postkonto|futsu|giro|rib|bankleitzahl|blz"
        r"|reg\.? ?nr|registreringsnummer|cbu|nuban|udbetaling|utbetalning|transfers?"
        r"|račun|tekući|rachunek|sąskaitos|reikningsnúmer|сч[её]т|рахунок|бик|bik|реквизиты|rib|banco\w*|ahorros|pix"
        r"|corriente|corrente|ag[eê]ncia|cci|rekening|bankszámla\w*|účet|účtu"
        # banks and money apps named in chats: Indonesia, the Philippines, Nigeria, Kenya, US
        r"|mandiri|bca|bni|bri|bdo|bpi|metrobank|gtb|gtbank|zenith|uba|opay|palmpay|kuda"
        r"|equity|kcb|chime|cash ?app|dbs|posb|ocbc|uob)\b"
        r"|銀行|银行|振込|은행|банк|בנק|ธนาคาร|ngân hàng|帳號|账号|帳戶|账户|口座)"
    )
)
_ACCOUNT_WORDS = re.compile(
    folded(
        r"(?:\b(?:account|acct|acc|a/c|ac no|clabe|nuban|kontonummer|kontonr|konto|cuenta(?:rut)?"
        r"|compte|bank(?=[ \t]{0,2}[:#]?[ \t]{0,2}\d)|folio|postkonto|compte postal|conto postale"
        r"|conto|conta|rekening|checking|savings|cheque account|stk|số tài khoản|rekening|no\.? rek"
        r"|račun|rachunek|sąskaitos nr|reikningsnúmer|сч[её]т|рахунок|rib|cci|giro(?: number)?"
        r"|р/с"  # noqa: RUF001 - Russian, a current account (расчётный счёт)
        r"|bankgiro|plusgiro"
        r"|bankszámla(?:szám)?|számlaszám|účet|číslo účtu)s?\b"  # not "contact", "access"
        r"|帳號|账号|帳戶|账户|口座|普通|当座|계좌(?:번호)?|номер сч[её]та|חשבון|บัญชี|số tài khoản"
        r"|은행(?=[ \t]{0,2}\d)"  # a Korean bank's name and its account: "신한은행 110-…"
        r"|account_?(?:number|no|num)\b)"
    )
)
_NOT_BANK = re.compile(
    r"\b(?:aws|gcp|azure|customer|client|user|member|loyalty|billing|service|cloud|admin"
    r"|twilio|stripe|google|github|slack|email|e-mail|storage|sid|id)[ _\-]*$"
)
_IBAN_NEXT = re.compile(r"[ \t:#.\-]{0,4}[A-Za-z]{2}\d{2}[ ]?[A-Za-z0-9]{4}")
_NUMBER = re.compile(r"(?<![\w.\-/])\d(?:[ .\-]?\d){5,29}(?![\w\-]|[.,]\d)")
_DATE = re.compile(r"\d{4}[\-.]\d{2}[\-.]\d{2}|\d{2}[\-.]\d{2}[\-.]\d{4}")
_AFTER = 40
_BEFORE = 24
_CODES = re.compile(
    r"\b(?P<kind>routing(?:[ _](?:number|no))?|aba|rtn|sort(?:[ \-]{0,3})code|bsb|transit)"
    r"\b[^0-9\n]{0,16}?(?P<code>\d[\d \-]{4,10}\d)(?![\w\-]|[.,]\d)"
)
_CODE_SHAPES = {
    "routing": re.compile(r"\d{9}"),
    "aba": re.compile(r"\d{9}"),
    "rtn": re.compile(r"\d{9}"),
    "sort": re.compile(r"\d{2}[ \-]?\d{2}[ \-]?\d{2}"),
    "bsb": re.compile(r"\d{3}[ \-]?\d{3}"),
    "transit": re.compile(r"\d{5}"),
}
# A text that says the account itself is not given: a bank code alone locates no money.
_NO_ACCOUNT = re.compile(
    r"\b(?:no|without|need|needs|needed|missing|awaiting|waiting|pending|still need)\b[^.\n]{0,24}"
    r"\baccount(?: number| no\.?| details)?\b"
    r"|\baccount (?:number|details) (?:will|to) (?:come|follow)"
    r"|\b(?:will|to) (?:send|give|provide|share)\b[^.\n]{0,24}\baccount(?: number| details)?\b"
)
_LAYOUTS = re.compile(
    r"(?<![\w.\-/])(?:(?P<nz>\d{2}-\d{4}-\d{7}-\d{2,3})|(?P<no>\d{4}\.\d{2}\.\d{5})"
    r"|(?P<cbu>\d{22})|(?P<cz>(?:\d{1,6}-)?\d{2,10}/\d{4})|(?P<hu>\d{8}-\d{8}(?:-\d{8})?))"
    r"(?![\w\-/])"
)


_CURRENCIES = (
    "USD|EUR|GBP|JPY|CHF|CAD|AUD|NZD|SEK|NOK|DKK|PLN|CZK|HUF|INR|PKR|IDR|PHP|VND|CNY|HKD|SGD"
    "|MXN|BRL|ARS|CLP|ZAR|TRY|ILS|EGP|KES|NGN|KRW|RON|HRK|BGN|AED|SAR"
)
_AMOUNT_AFTER = re.compile(
    rf"[ \t]*(?:(?:{_CURRENCIES})\b|(?i:dollars?|euros?|pounds?|rupees?|pesos?|yen|kr\b|zł)|%)"
)
_AMOUNT_BEFORE = re.compile(rf"(?:[$€£¥₹]|\b(?:{_CURRENCIES}))[ \t]*$")


def _account_like(text: str, number: re.Match[str]) -> bool:
    """Not a date, and not an amount ("1500000 USD", "€ 250000")."""
    if _DATE.fullmatch(number.group(0)):
        return False
    if _AMOUNT_AFTER.match(text, number.end()):
        return False
    return not _AMOUNT_BEFORE.search(text, max(0, number.start() - 6), number.start())


def _code_ok(kind: str, code: str) -> bool:
    key = kind.split(maxsplit=1)[0].split("_", maxsplit=1)[0].split("-", maxsplit=1)[0]
    shape = _CODE_SHAPES.get(key)
    if shape is None or not shape.fullmatch(code):
        return False
    if key in ("routing", "aba", "rtn"):
        return bool(_us_rtn.is_valid(code))
    return True


def _hu_giro(value: str) -> bool:
    """A Hungarian account (giro) number: blocks of eight digits; the first block (bank and
    branch) and the rest each check out with the weights 9, 7, 3, 1 modulo 10."""
    digits = value.replace("-", "")
    if len(digits) not in (16, 24) or not digits.isdigit() or len(set(digits)) < 4:
        return False

    def weighted(block: str) -> int:
        return sum(int(d) * (9, 7, 3, 1)[n % 4] for n, d in enumerate(block)) % 10

    return weighted(digits[:8]) == 0 and weighted(digits[8:]) == 0


_LAYOUT_CHECKS = {
    "nz": _nz_account.is_valid,
    "cz": _cz_account.is_valid,  # Czech prefix-number/bank code, mod-11 checks, known banks
    "hu": _hu_giro,
    "cbu": _ar_cbu.is_valid,  # Argentina's 22 digits, two check digits
    "no": _no_kontonr.is_valid,
}


def _checked_layout(group: str, value: str) -> bool:
    return passes_check(_LAYOUT_CHECKS[group], value)


# A PIX random key (chave aleatória): a UUID that routes payments to one person's account.
_PIX_KEY = re.compile(
    r"(?i)\bpix\b[^\n]{0,40}?(?<![\w\-])(?P<key>[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}"
    r"-[89ab][0-9a-f]{3}-[0-9a-f]{12})(?![\w\-])"
)


def find_bank_accounts(t: Text) -> Iterator[Span]:
    if t.digits < 6:
        return
    # a field name's underscores read as spaces ("routing_number", "account_no"): same offsets
    text, lower = t.raw, t.lower.replace("_", " ")
    if "pix" in lower:
        for m in _PIX_KEY.finditer(text):
            yield PiiKind.BANK_ACCOUNT, m.start("key"), m.end("key")
    for m in _LAYOUTS.finditer(text):
        if _checked_layout(m.lastgroup or "", m.group(0)):
            yield PiiKind.BANK_ACCOUNT, m.start(), m.end()
    if len(lower) != len(text) or not _BANKING.search(lower):
        return
    missing = [m.span() for m in _NO_ACCOUNT.finditer(lower)]  # disjoint, in text order
    missing_starts = [start for start, _ in missing]
    for m in _CODES.finditer(lower):
        if _code_ok(m.group("kind"), m.group("code").strip()) and not missing:
            yield PiiKind.BANK_ACCOUNT, m.start("code"), m.end("code")
    for word in _ACCOUNT_WORDS.finditer(lower):
        if _NOT_BANK.search(lower, max(0, word.start() - 16), word.start()):
            continue
        at = bisect.bisect_right(missing_starts, word.start()) - 1
        # "no account number yet", "account details will come by post": the number before
        # the word is a bank code, not the account; one written after it still is one
        said_missing = at >= 0 and word.start() < missing[at][1]
        # "fnr 030791 09516, konto NO0777…": the account is the IBAN after the word
        said_missing = said_missing or _IBAN_NEXT.match(text, word.end()) is not None
        after = [
            n
            for n in _NUMBER.finditer(text, word.end(), min(len(text), word.end() + _AFTER))
            if _account_like(text, n)
        ]
        before = [
            n
            for n in _NUMBER.finditer(text, max(0, word.start() - _BEFORE), word.start())
            if _account_like(text, n)
        ]
        for number in after[:1] or ([] if said_missing else before[-1:]):
            yield PiiKind.BANK_ACCOUNT, number.start(), number.end()
