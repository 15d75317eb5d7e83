"""Values written so a pattern does not see them, though a reader does.

Agents store what they are told, and people dictate, type around spam filters and paste
scans. Three rewritings give the detectors a second reading of such text:

* **Scanned digits** (:func:`unscanned`): in a run of digits and separators, ``l``/``I``
  read as 1 and ``O`` as 0 ("MC 222l 4257 3997 6353"), when the run holds at least six real
  digits. The rewriting keeps every character's place, so spans stay valid.
* **Obfuscated e-mail addresses** (:func:`find_obfuscated_emails`): ``name[at]host[dot]org``,
  ``name(at)host(dot)com``, ``name @ host.com`` (spaces around the at sign), ``name%40host``
  in a URL, and the spoken ``name dot surname at host dot co dot uk`` after a word about
  mail or sending.
* **Spoken digits** (:func:`spoken_runs`): seven or more number words in a row ("three one
  two, five five five, oh one four two", "forty, eleven, sixty-two") become digits, grouped
  as they were spoken; ``scan`` reads that digit string with the words before it (so "my cell
  is", "social is" or "card number" still count) and reports a finding over the spoken words.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from engram.memory.gate.pii.findings import PiiKind, Span, Text

# --------------------------------------------------------------------------- scanned digits

_SCANNED = re.compile(r"(?<![A-Za-z0-9])[\dlIO](?:[\dlIO]|[ .\-](?=[\dlIO])){6,30}(?![A-Za-z0-9])")
_SCANNED_MAP = str.maketrans({"l": "1", "I": "1", "O": "0"})


def unscanned(text: str) -> str | None:
    """``text`` with scanning errors in digit runs read as digits, or None if it has none."""
    changed = False
    parts: list[str] = []
    last = 0
    for m in _SCANNED.finditer(text):
        run = m.group(0)
        if sum(c.isdigit() for c in run) < 6 or run.isdigit() or not any(c in "lIO" for c in run):
            continue
        parts.extend((text[last : m.start()], run.translate(_SCANNED_MAP)))
        last = m.end()
        changed = True
    if not changed:
        return None
    parts.append(text[last:])
    return "".join(parts)


# --------------------------------------------------------------------------- e-mail

_AT = r"(?:\s*[\[({]\s*(?:at|arroba|arobase)\s*[\])}]\s*|\s{1,3}@\s{1,3})"
_DOT = r"(?:\s*[\[({]\s*(?:dot|punto|ponto|point|punkt)\s*[\])}]\s*|\.)"
_BRACKETED = re.compile(
    rf"(?i)(?<![\w.%+\-])[a-z0-9][\w.%+\-]{{0,63}}{_AT}[a-z0-9][\w\-]{{0,62}}"
    rf"(?:{_DOT}[a-z0-9][\w\-]{{0,62}})*{_DOT}[a-z]{{2,24}}(?![\w\-])"
)
_PERCENT = re.compile(r"(?i)(?<![\w.%+\-])[a-z0-9][\w.+\-]{0,63}%40[a-z0-9][\w\-]*(?:\.[\w\-]+)+")
_SPOKEN_EMAIL = re.compile(
    r"(?i)\b[a-z0-9](?:[\w\-]|\.(?=\w)){0,30}(?: dot [a-z0-9][\w\-]{0,30}){0,3}"
    r" at [a-z0-9][\w\-]{0,40}"
    r"(?: dot [a-z0-9][\w\-]{0,30}){0,3} dot (?:com|org|net|edu|gov|io|co|uk|de|fr|es|it|nl"
    r"|au|ca|in|br|mx|jp|ch|se|no|dk|fi|ie|be|at|pl|pt|nz|sg|za)\b"
)
# The same, said in other languages ("rita ponto carvalho arroba sapo ponto pt", "marco punto
# esposito chiocciola libero punto it"): the mailbox may be several words ("javier guion bajo
# ruiz setenta y seis"), so only the words for "at" that name nothing else make a match, or
# "at" itself with a word about mail before it or a mailbox-like name.
_DOT_WORDS = r"(?:dot|punto|ponto|point|punkt|punt|kropka|nokta)"
_AT_WORDS = (
    r"(?:arroba|arobase|chiocciola|chiocciolina|małpa|malpa|et işareti|et isareti"
    r"|at the rate(?: of)?|klammeraffe|apenstaartje|at)"
)
_SPOKEN_EMAIL_ANY = re.compile(
    rf"(?i)\b[a-z0-9][\w\-]{{0,30}}(?: [\w\-]{{1,20}}){{0,6}}? (?P<at>{_AT_WORDS})"
    rf" [a-z0-9][\w\-]{{0,40}}(?: {_DOT_WORDS} [a-z0-9][\w\-]{{0,30}}){{0,3}} {_DOT_WORDS}"
    r" (?:com|org|net|edu|gov|io|co|uk|de|fr|es|it|nl|au|ca|in|br|mx|jp|ch|se|no|dk|fi|ie|be"
    r"|at|pl|pt|nz|sg|za|tr|ar|cl|pe|ru|ua|cz|sk|hu|ro|gr|lu|info|biz)\b"
)
_AT_WORD_ANY = re.compile(rf"(?i)\b{_AT_WORDS}\b")
_MAILBOX = re.compile(r"[a-z0-9][._][a-z0-9]|\d", re.IGNORECASE)
_AT_WORD = re.compile(r"[\[({]\s*at\s*[\])}]")
_MAIL_WORDS = re.compile(
    r"(?i)\b(?:e-?mail|mail|address|send|sent|write|reply|contact|inbox|correo|courriel"
    r"|e-?posta|adres|adresse|endereço|identifiant)"
)


def find_obfuscated_emails(t: Text) -> Iterator[Span]:
    text, lower = t.raw, t.lower
    if (
        "@" in text
        or "arroba" in lower
        or "arobase" in lower
        or ("at" in lower and ("dot" in lower or _AT_WORD.search(lower)))
    ):
        for m in _BRACKETED.finditer(text):
            if "@" in m.group(0) and not re.search(r"\s@|@\s|[\[({]", m.group(0)):
                continue  # a plain address: the email detector's
            yield PiiKind.EMAIL, m.start(), m.end()
    if "%40" in text:
        for m in _PERCENT.finditer(text):
            yield PiiKind.EMAIL, m.start(), m.end()
    if " dot " in lower and " at " in lower:
        for m in _SPOKEN_EMAIL.finditer(text):
            if _mail_like(text, m.start(), m.start() + m.group(0).lower().find(" at ")):
                yield PiiKind.EMAIL, m.start(), m.end()
    if _AT_WORD_ANY.search(lower):
        for m in _SPOKEN_EMAIL_ANY.finditer(text):
            at = m.group("at").lower()
            if at == "at" and " dot " in m.group(0).lower():
                continue  # said in English: the rule above reads it, with its tighter span
            if at != "at" or _mail_like(text, m.start(), m.start("at")):
                yield PiiKind.EMAIL, m.start(), m.end()


def _mail_like(text: str, start: int, at: int) -> bool:
    """A mailbox name (``start`` to the word for "at", at ``at``) with a dot, an underscore or
    a digit ("h.keller at bluewin dot ch") is no phrase of prose; other words need a word
    about mail before the "at" (in the match or just before it)."""
    return bool(
        _MAILBOX.search(text, start, at) or _MAIL_WORDS.search(text, max(0, start - 60), at)
    )


# --------------------------------------------------------------------------- spoken digits

_UNITS = {
    "zero": "0", "oh": "0", "o": "0", "one": "1", "two": "2", "three": "3", "four": "4",
    "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9",
}  # fmt: skip
_TEENS = {
    "ten": "10", "eleven": "11", "twelve": "12", "thirteen": "13", "fourteen": "14",
    "fifteen": "15", "sixteen": "16", "seventeen": "17", "eighteen": "18", "nineteen": "19",
}  # fmt: skip
_TENS = {
    "twenty": "2", "thirty": "3", "forty": "4", "fifty": "5", "sixty": "6", "seventy": "7",
    "eighty": "8", "ninety": "9",
}  # fmt: skip
#: English number words and their values (the tables above, tens as tens).
NUMBER_WORDS: dict[str, int] = {
    **{word: int(digit) for word, digit in _UNITS.items()},
    **{word: int(value) for word, value in _TEENS.items()},
    **{word: int(tens) * 10 for word, tens in _TENS.items()},
}
_WORD = "|".join(sorted([*_UNITS, *_TEENS, *_TENS, "double", "triple"], key=len, reverse=True))
_SPOKEN = re.compile(
    rf"(?i)\b(?:{_WORD})(?:-(?:{_WORD}))?(?:[ ,;\-]{{1,3}}(?:{_WORD})(?:-(?:{_WORD}))?\b){{5,40}}"
)
_TOKEN = re.compile(rf"(?i)(?:{_WORD})(?:-(?:{_WORD}))?|[,;]")


def _digits(words: str) -> str:
    """The digits a run of number words stands for, groups apart by a space at a comma."""
    out: list[str] = []
    repeat = 1
    for word in _TOKEN.findall(words.lower()):
        if word in ",;":
            out.append(" ")
            continue
        if word in ("double", "triple"):
            repeat = 2 if word == "double" else 3
            continue
        head, _, tail = word.partition("-")
        if head in _TENS:
            value = _TENS[head] + (_UNITS.get(tail, "0") if tail else "0")
        else:
            value = _UNITS.get(head) or _TEENS.get(head, "")
        out.append(value * repeat)
        repeat = 1
    return re.sub(r" +", " ", "".join(out)).strip()


def spoken_runs(text: str) -> Iterator[tuple[int, int, str]]:
    """Each run of at least seven number words: its span and the digits it stands for."""
    if not any(word in text.lower() for word in ("one", "two", "five", "nine", "oh", "zero")):
        return
    for m in _SPOKEN.finditer(text):
        digits = _digits(m.group(0))
        if sum(c.isdigit() for c in digits) >= 7:
            yield m.start(), m.end(), digits
