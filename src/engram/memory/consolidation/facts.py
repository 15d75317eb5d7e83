"""Key facts and clauses: what consolidation must never lose, and the units it keeps or drops.

A *fact* is a token a reader could not rebuild from the rest of the text: a URL, a file path,
a version, an amount of money, a date or time, a number with or without its unit, an
identifier (``db-prod-2``, ``INC-4411``, ``ERR_CONN_RESET``) or a name (a capitalised word that
does not open its sentence). The extractive summariser keeps every clause that carries a fact
not kept already; a summary that loses one is refused (:func:`lost_facts`).

*Entities* are the facts that name things (identifiers, names, URLs, paths): the topic
clustering counts shared entities as evidence that two records are about the same thing;
numbers and dates are left out of that, because unrelated records share them by chance.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engram.memory.conflict.memo import per_text

_MONTHS = (
    "jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    "sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
_URL = r"https?://[^\s<>()\"']+[^\s<>()\"'.,;:!?]"
_PATH = r"(?:~|\.{1,2}|\b[\w.-]+)?(?:/[\w.@%+-]+){2,}/?|(?<![\w/])/[A-Za-z_][\w.-]+|[\w.-]+\.(?:ya?ml|json|toml|ini|conf|cfg|py|sh|sql|log|csv|txt|md|tf|env|lock|pdf|xlsx|docx)\b"  # noqa: E501
_VERSION = r"\bv?\d+(?:\.\d+){1,3}(?:-[\w.]+)?\b"
_MONEY = r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?(?:\s?[kKmM]\b)?|\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP|CHF|JPY|dollars|euros)\b"  # noqa: E501
_DATE = (
    r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?Z?)?\b"
    r"|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b"
    rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\b(?:\s+\d{{4}})?"
)
_TIME = r"\b\d{1,2}:\d{2}(?::\d{2})?\s?(?:[aApP][mM])?\b|\b\d{1,2}\s?[aApP][mM]\b"
_IDENT = r"\b(?=[\w-]*[A-Za-z])(?=[\w-]*(?:\d|[-_]))[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+\b|\b(?=\w*\d)(?=\w*[A-Za-z])\w{2,}\b|`[^`]+`"  # noqa: E501
_NUMBER = r"\b\d[\d,]*(?:\.\d+)?\s?(?:%|ms|s|sec|min|h|hrs?|hours?|days?|weeks?|[kKMGT]i?B|GB|MB|kg|g|km|m|cm|mm|°C|°F|x|rpm|ppm|mg|ml|L|kW|W|V)?(?!\w)"  # noqa: E501

_FACT = re.compile(
    "|".join(
        f"(?P<{name}>{pattern})"
        for name, pattern in (
            ("url", _URL),
            ("path", _PATH),
            ("money", _MONEY),
            ("date", _DATE),
            ("time", _TIME),
            ("version", _VERSION),
            ("number", _NUMBER),
            ("ident", _IDENT),
        )
    ),
    re.IGNORECASE,
)
_NAME = re.compile(
    r"\b(?:Dr|Mr|Mrs|Ms|Prof|St)\.\s+[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*\b"
    r"|\b(?!(?:Dr|Mr|Mrs|Ms|Prof|St)\.)[A-Z][a-z]+(?:[A-Z][a-z]+)*"
    r"(?:\s+(?!(?:Dr|Mr|Mrs|Ms|Prof|St)\.)[A-Z][a-z]+)*\b|\b[A-Z]{2,6}s?\b"
)
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|\n)\s*[\"'(]?([A-Z][a-z]+)")
ENTITY_KINDS = frozenset({"url", "path", "ident", "name"})
# Capitals that are units or currencies, not names ("3 GB", "30 USD").
_UNITS = frozenset({"GB", "MB", "KB", "TB", "GiB", "MiB", "USD", "EUR", "GBP", "CHF", "JPY", "UTC"})
# Capitalised words that are not names even inside a sentence.
_NOT_NAMES = frozenset(
    {
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "january",
        "february", "march", "april", "may", "june", "july", "august", "september", "october",
        "november", "december", "i", "i'm", "i've", "utc", "gmt", "the", "a", "an"
    }
)  # fmt: skip

# A sentence ends at . ! ? before a capital or digit, except after a title or abbreviation.
_NOT_AN_END = "".join(
    rf"(?<!\b{abbreviation})"
    for abbreviation in ("Dr.", "Mr.", "Ms.", "Mrs.", "St.", "Prof.", "vs.", "No.", "e.g.", "i.e.")
)
_CLAUSE_END = re.compile(
    rf"(?<=[.!?]){_NOT_AN_END}\s+(?=[\"'(\[]?[A-Z0-9])|;\s+|\n+|\s+[-\u2013\u2014]\s+(?=[A-Z])"
)
_WORD = re.compile(r"[a-z0-9]+(?:['\u2019-][a-z0-9]+)*")
STOPWORDS = frozenset(
    {
        "a", "an", "the", "and", "or", "but", "if", "then", "so", "of", "to", "in", "on", "at",
        "by", "for", "with", "from", "as", "is", "are", "was", "were", "be", "been", "being", "it",
        "its", "this", "that", "these", "those", "there", "here", "we", "i", "you", "he", "she",
        "they", "them", "our", "my", "your", "his", "her", "their", "me", "us", "up", "out", "over",
        "again", "also", "just", "very", "really", "quite", "about", "into", "than", "too", "not",
        "no", "do", "did", "does", "done", "has", "have", "had", "will", "would", "should", "could",
        "can", "may", "might", "must", "all", "any", "some", "each", "more", "most", "other",
        "such", "only", "own", "same", "both", "few", "what", "which", "who", "whom", "when",
        "where", "why", "how", "after", "before", "while", "during", "until", "once", "because",
        "through", "off", "under", "above", "below", "am", "pm"
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Fact:
    """One fact: its text as written and what kind it is."""

    text: str
    kind: str

    @property
    def key(self) -> str:
        """The form facts are compared in (case and inner spacing aside)."""
        return normalise(self.text)


def normalise(text: str) -> str:
    """Lower case, single spaces: how facts and clauses are compared."""
    return " ".join(text.casefold().split())


@per_text(16_384)  # a pass asks for the same clauses again; bounded for a server
def facts(text: str) -> tuple[Fact, ...]:
    """Every fact of ``text`` in order of appearance (names included)."""
    found: list[tuple[int, Fact]] = []
    for match in _FACT.finditer(text):
        kind = match.lastgroup or "number"
        value = match.group(0).strip().rstrip(".,;:!?")
        if kind == "number" and len(value) == 1:
            continue  # a lone digit ("1 of 3") carries little and is everywhere
        found.append((match.start(), Fact(value, kind)))
    starts = {m.start(1) for m in _SENTENCE_START.finditer(text)}
    for match in _NAME.finditer(text):
        word = match.group(0)
        if match.start() in starts and " " not in word:
            continue  # a capital that only opens a sentence
        if word.casefold() in _NOT_NAMES or word in _UNITS:
            continue
        found.append((match.start(), Fact(word, "name")))
    found.sort(key=lambda pair: pair[0])
    return tuple(fact for _, fact in found)


def fact_keys(text: str) -> frozenset[str]:
    """The compared forms of the facts of ``text``."""
    return frozenset(f.key for f in facts(text))


def entities(text: str) -> frozenset[str]:
    """The facts of ``text`` that name things (see the module docstring)."""
    return frozenset(f.key for f in facts(text) if f.kind in ENTITY_KINDS)


def clauses(text: str) -> list[str]:
    """``text`` cut into sentences and semicolon-separated clauses, stripped, none empty."""
    parts = _CLAUSE_END.split(text.strip())
    return [part.strip() for part in parts if part and part.strip(" .;,")]


def content_words(text: str) -> frozenset[str]:
    """The words of ``text`` that carry meaning (no stop words), lower case."""
    return frozenset(w for w in _WORD.findall(text.casefold()) if w not in STOPWORDS)


def lost_facts(sources: list[str], summary: str) -> list[str]:
    """The facts of ``sources`` that ``summary`` does not contain (as text, case aside)."""
    body = normalise(summary)
    seen: dict[str, str] = {}
    for text in sources:
        for fact in facts(text):
            seen.setdefault(fact.key, fact.text)
    return [text for key, text in seen.items() if not contains(body, key)]


def contains(body: str, key: str) -> bool:
    """True when ``key`` occurs in ``body`` as a whole token run ("80" is not in "800")."""
    return re.search(rf"(?<![\w.]){re.escape(key)}(?![\w]|\.\d)", body) is not None
