"""Numbers dictated as words in other languages than English, as speech-to-text writes them.

A caller reads out a phone number, an IBAN or an id word by word: "null eins sieben sechs,
dreiundsiebzig", "F R sept six, deux zéro zéro quatre", "treinta y uno, noventa y uno". Each
run of such words is read as the digits it stands for (and the capital letters spelled in it,
an IBAN's country code), and the scan reads those digits with the words before the run, as it
does for English (:func:`~engram.memory.gate.pii.disguised.spoken_runs`).

- Spanish, French, German, Italian, Portuguese and Dutch numbers, compounds included
  ("quatre-vingt-dix-neuf", "dreiundsiebzig", "sessantasette", "vinte e um"), are read by
  the ``text2num`` package (``alpha2digit``), language by language; a word counts as a number
  word of a language when ``text2num`` reads it so. Polish and Turkish numbers, and Hindi
  digits as written in Latin letters, are read from the tables below: a smaller part after a
  larger one is added to it ("yedi yüz elli yedi" 757, "sześćset cztery" 604), a digit after
  a digit starts a new number (digit-by-digit dictation).
- A run is at least ``MIN_WORDS`` number words in a row, joined by spaces, commas, hyphens,
  the words that join a compound ("y", "e", "et", "und", "en"), hesitations ("eh", "ähm")
  and a check key's name ("clé"), with single capital letters and digits among them; a word
  for a dash ("traço", "tiret", "guion") is a dash.
- Each run is given to the scan twice: its groups apart (a comma, a space) and all together,
  so a number said in groups is read as the one number it is.
- A letter spelled with a word ("I come Imola", "C wie Cäsar", "S van Simon", "P for papa")
  is read as the letter.
- Self-corrections ("osiem... nie, dziewięć") are not undone: the digits are read as said.
"""

# ruff: noqa: RUF001 - the Turkish words are written with their dotless i

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from text_to_num import alpha2digit, text2num

from engram.memory.gate.pii.contact import names_a_phone

#: Fewest number words that make a run (a phone number is at least seven digits; compounds
#: say two digits in a word).
MIN_WORDS = 5
#: Most number words in one run: a longer one is read in parts (the reading of a run costs
#: more than linear time in its length, and no identifier is said in more words).
MAX_RUN_WORDS = 40
#: Most digits and letters a run is read to (an IBAN has at most 34 characters).
MAX_CHARS = 48
_LANGUAGES = ("es", "fr", "de", "it", "pt", "nl")
# Words that join the parts of a compound number, by language.
_JOINERS = {
    "es": {"y"}, "fr": {"et"}, "de": {"und"}, "it": {"e"}, "pt": {"e"}, "nl": {"en"},
}  # fmt: skip
# Words a language's dictation uses for a digit that text2num does not read as one.
_EXTRA = {
    "pt": {"meia": "6"}, "de": {"zwo": "2", "sex": "6"}, "fr": {}, "es": {}, "it": {}, "nl": {},
}  # fmt: skip
# Values of the number words of languages text2num has no grammar for (Latin letters; both
# spellings where people drop the diacritics). Turkish "yüz" multiplies what is before it.
_DIGIT_WORDS: dict[str, dict[str, int]] = {
    "pl": {
        "zero": 0, "jeden": 1, "dwa": 2, "trzy": 3, "cztery": 4, "pięć": 5, "piec": 5,
        "sześć": 6, "szesc": 6, "siedem": 7, "osiem": 8, "dziewięć": 9, "dziewiec": 9,
        "dziesięć": 10, "jedenaście": 11, "dwanaście": 12, "trzynaście": 13,
        "czternaście": 14, "piętnaście": 15, "szesnaście": 16, "siedemnaście": 17,
        "osiemnaście": 18, "dziewiętnaście": 19, "dwadzieścia": 20, "trzydzieści": 30,
        "czterdzieści": 40, "pięćdziesiąt": 50, "sześćdziesiąt": 60, "siedemdziesiąt": 70,
        "osiemdziesiąt": 80, "dziewięćdziesiąt": 90, "sto": 100, "dwieście": 200,
        "trzysta": 300, "czterysta": 400, "pięćset": 500, "sześćset": 600, "siedemset": 700,
        "osiemset": 800, "dziewięćset": 900,
    },
    "tr": {
        "sıfır": 0, "sifir": 0, "bir": 1, "iki": 2, "üç": 3, "uc": 3, "dört": 4, "dort": 4,
        "beş": 5, "bes": 5, "altı": 6, "alti": 6, "yedi": 7, "sekiz": 8, "dokuz": 9,
        "on": 10, "yirmi": 20, "otuz": 30, "kırk": 40, "kirk": 40, "elli": 50,
        "altmış": 60, "altmis": 60, "yetmiş": 70, "yetmis": 70, "seksen": 80, "doksan": 90,
        "yüz": 100, "yuz": 100,
    },
    "id": {
        "nol": 0, "kosong": 0, "satu": 1, "dua": 2, "tiga": 3, "empat": 4, "lima": 5,
        "enam": 6, "tujuh": 7, "delapan": 8, "sembilan": 9,
    },
    "hi": {
        "shunya": 0, "sunya": 0, "ek": 1, "do": 2, "teen": 3, "chaar": 4, "char": 4,
        "paanch": 5, "panch": 5, "chhe": 6, "chhah": 6, "saat": 7, "aath": 8, "nau": 9,
    },
}  # fmt: skip
_MULTIPLIERS = frozenset({"yüz", "yuz"})
# Words said inside a number without being part of it, and words for its dash.
_HESITATIONS = frozenset({"eh", "ehm", "euh", "ähm", "äh", "hmm", "uhm", "yyy", "mmm", "este"})
_KEY_WORDS = frozenset({"clé", "cle", "chiave", "clave"})
_DASH_WORDS = frozenset({"traço", "traco", "tiret", "guion", "guión", "trattino", "myślnik"})
# A capital letter spelled with a word of a spelling alphabet: read as the letter alone.
_SPELLED = re.compile(
    r"\b([A-Z])[ \t]+(?:come|wie|van|voor|for|as in|como|comme|de|jak)[ \t]+[A-Z][^\W\d_]{1,12}\b"
)
_TOKEN = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*|\d+|[,;.]|-")
# Cheap test before any language is tried: some digit word of some language.
_ANY_DIGIT_WORD = re.compile(
    r"(?i)\b(?:cero|uno|dos|tres|cuatro|cinco|seis|siete|ocho|nueve|z[ée]ro|un|deux|trois"
    r"|quatre|cinq|six|sept|huit|neuf|null|eins|zwei|zwo|drei|vier|f[üu]nf|sechs|sieben|acht"
    r"|neun|uno|due|tre|quattro|cinque|sette|otto|nove|um|dois|tr[êe]s|quatro|meia|oito|nul"
    r"|een|twee|drie|vijf|zes|zeven|negen|jeden|dwa|trzy|cztery|osiem|s[ıi]f[ıi]r|bir|iki"
    r"|yedi|sekiz|dokuz|ek|teen|chaar|paanch|saat|aath|nau|nol|satu|dua|tiga|empat|lima"
    r"|delapan|sembilan)\b"
)


@lru_cache(maxsize=8192)
def _number_word(word: str, language: str) -> bool:
    """Whether ``word`` (lower case) is a number word of ``language``."""
    if word in _EXTRA.get(language, {}) or word in _DIGIT_WORDS.get(language, {}):
        return True
    if language not in _LANGUAGES:
        return False
    try:
        text2num(word, language)
    except ValueError:
        return False
    return True


def _added(words: list[str], table: dict[str, int]) -> str:
    """Number words read by adding a smaller part to a larger one (see the module)."""
    out: list[str] = []
    current: int | None = None
    magnitude = 0
    for word in words:
        if word in _MULTIPLIERS:
            if current is not None and current < 10:
                current, magnitude = current * 100, 100
                continue
            value, size = 100, 100
        else:
            value = table[word]
            size = 100 if value >= 100 else 10 if value >= 10 else 1
        if current is not None and size < magnitude and current % magnitude == 0:
            current, magnitude = current + value, size
            continue
        if current is not None:
            out.append(str(current))
        current, magnitude = value, size
    if current is not None:
        out.append(str(current))
    return "".join(out)


def _plain_words(run: str, language: str) -> str:
    """``run`` with its hesitations and key names dropped, dashes as ``-`` and, for the
    languages of the tables, each group of number words as its digits."""
    parts: list[str] = []
    pending: list[str] = []
    table = _DIGIT_WORDS.get(language)
    for piece in _TOKEN.findall(run):
        word = piece.lower()
        if word in _HESITATIONS or word in _KEY_WORDS:
            continue
        if table is not None and (word in table or word in _MULTIPLIERS):
            pending.append(word)
            continue
        if pending:
            parts.append(_added(pending, table or {}))
            pending = []
        parts.append("-" if word in _DASH_WORDS else piece)
    if pending:
        parts.append(_added(pending, table or {}))
    return " ".join(parts).replace(" ,", ",")


def _readings(run: str, language: str) -> tuple[str, str]:
    """The digits and spelled capitals of one run: its groups apart (a space where a comma
    or a pause ended one), and all together."""
    plain = _plain_words(run, language)
    if language in _LANGUAGES:
        for word, digit in _EXTRA[language].items():
            plain = re.sub(rf"(?i)\b{word}\b", digit, plain)
        plain = alpha2digit(plain, language)
    out: list[str] = []
    for piece in _TOKEN.findall(plain.replace("-", " - ")):
        if piece in ",;.":
            out.append(" ")
        elif piece.isdigit() or (len(piece) == 1 and piece.isupper()):
            out.append(piece)
        elif piece == "-":
            out.append("-")
    grouped = re.sub(r" +", " ", "".join(out)).strip()[:MAX_CHARS]
    return grouped, grouped.replace(" ", "")


def _runs(tokens: list[re.Match[str]], language: str) -> Iterator[tuple[int, int]]:
    """Spans of at least ``MIN_WORDS`` number words of ``language`` in a row."""
    joiners = _JOINERS.get(language, set())
    start = end = -1
    count = 0
    for m in tokens:
        piece = m.group(0)
        word = piece.lower()
        if _number_word(word, language):
            start = m.start() if start < 0 else start
            end, count = m.end(), count + 1
            if count == MAX_RUN_WORDS:
                yield start, end
                start, count = -1, 0
            continue
        if start >= 0 and (
            piece in ",;"
            or word in joiners
            or piece.isdigit()
            or word in _HESITATIONS
            or word in _KEY_WORDS
            or word in _DASH_WORDS
            or (len(piece) == 1 and piece.isupper())
        ):
            continue  # inside a run: a group's end, a compound's joiner, a digit, a letter
        if count >= MIN_WORDS:
            yield start, end
        start, count = -1, 0
        if len(piece) == 1 and piece.isupper():
            start, end = m.start(), m.end()  # a spelled letter may open a run ("F R sept")
    if count >= MIN_WORDS:
        yield start, end


def spoken_runs_other(text: str) -> Iterator[tuple[int, int, str]]:
    """Each run of number words of one language: its span and the digits it stands for."""
    if not _ANY_DIGIT_WORD.search(text):
        return
    seen: set[tuple[int, int]] = set()
    # the spelled letters as letters, the text's length kept (spans stay those of ``text``)
    text = _SPELLED.sub(lambda m: m.group(1).ljust(len(m.group(0))), text)
    tokens = list(_TOKEN.finditer(text))
    for language in (*_LANGUAGES, *_DIGIT_WORDS):
        for start, end in _runs(tokens, language):
            if (start, end) in seen:
                continue
            seen.add((start, end))
            grouped, together = _readings(text[start:end], language)
            if sum(c.isdigit() for c in grouped) >= 7:
                yield start, end, grouped
                if together != grouped:
                    yield start, end, together


def dictated_phone(context: str, digits: str) -> bool:
    """A run of eight to fifteen digits said right after a phone word ("mi teléfono es …",
    "die Handynummer, null eins sieben …"): a phone number, whether or not a region's plan
    reads it (dictation drops and splits digits that a written number keeps)."""
    count = sum(c.isdigit() for c in digits)
    return 8 <= count <= 15 and not any(c.isalpha() for c in digits) and names_a_phone(context)
