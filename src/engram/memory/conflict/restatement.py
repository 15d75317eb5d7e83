"""Whether a newer statement only says again what an older one says.

The advisor's NOOP asks this of a proposal and its closest record. A wrong "yes" drops new
information, so every sign of something new counts against it: a word of change, a negation
flipped, a word swapped for its opposite or for another value of the same slot ("aisle" /
"window"), another subject in an otherwise kept sentence ("the standard agent's ledger" /
"the restricted agent's ledger"), a name or code on one side only ("Inés Vidal" / "Pablo
Sanz", "us-east-1" / "eu-west-1", "Xcode"; a month's name outside a date), a value (number,
date, version) the older lacks unless the amounts are the same in other units ("25 km" /
"25,000 metres") and every other value is written alike ("3.10" is not "3.1", "10K" not "10",
"5 million" not "5 billion"), or clearly more words added than taken away.
"""

from __future__ import annotations

import re

from engram.memory.conflict.cues import (
    FUNCTION_WORDS,
    MAX_SWAP,
    compare,
    differing_spans,
    is_value,
    statement_tokens,
)
from engram.memory.conflict.features import change_language
from engram.memory.conflict.memo import per_text
from engram.memory.conflict.quantities import amount_word, month_word, readings
from engram.memory.types import MemoryRecord

#: Most hyphenated parts a code's letters run through before its digit ("us-east-1": 2).
#: Unbounded, every part of a long hyphenated word without a digit ("ab-ab-ab-…") started a
#: match that walked every part after it, and a record of 16,000 such characters held the
#: Gate over a second (hostile pass R).
MAX_CODE_PARTS = 16
#: Names (capitalised words not opening a sentence, acronyms) and codes ("us-east-1", "v8");
#: a sentence's first word is a name only as the first half of one (:data:`_OPENING_NAME`).
_MARKS = re.compile(
    r"(?<![.!?;:]\s)(?<!^)\b[A-Z][\w&]+|\b[A-Z]{2,}\w*"
    rf"|\b[a-z]+(?:-[a-z0-9]+){{0,{MAX_CODE_PARTS}}}-?\d[\w-]*"
)


#: A capitalised word opening a sentence, followed by another capitalised word: the first
#: half of a name ("Tariq Okafor took over …") unless it is a word that opens sentences.
_OPENING_NAME = re.compile(r"(?:^|(?<=[.!?;:]\s))([^\W\d_]+)(?=\s+([^\W\d_][\w&]*))")
_OPENERS = frozenset(
    {
        "the", "a", "an", "our", "this", "that", "these", "those", "each", "every", "its",
        "his", "her", "their", "my", "your", "we", "it", "on", "in", "at", "for", "from",
        "since", "after", "before", "when", "if", "all", "no", "some", "any", "as", "by",
        "during", "until", "with", "per", "only", "both", "either", "neither", "they", "he",
        "she", "you", "i", "then", "next", "now", "currently", "today", "yesterday",
        "tomorrow", "please", "use", "also", "but", "and", "so", "there", "here", "new", "old",
    }
)  # fmt: skip


@per_text(8192)  # the features, the scope rules and restates ask alike
def marks(text: str) -> frozenset[str]:
    """The names and codes of a statement, casefolded. A month's name inside a date is no
    name: the amounts compare the date ("3 April 2024" / "2024-04-03"); outside one it is
    ("3 April" / "3 June")."""
    stripped = text.strip()
    dates = [(r.start, r.end) for r in readings(stripped) if r.quantity.dimension == "date"]
    found = {
        m.group(0).casefold()
        for m in _MARKS.finditer(stripped)
        if not (month_word(m.group(0)) and any(a <= m.start() < b for a, b in dates))
    }
    for m in _OPENING_NAME.finditer(stripped):
        word, following = m.group(1), m.group(2)
        if word.istitle() and following[0].isupper() and word.casefold() not in _OPENERS:
            found.add(word.casefold())
    return frozenset(found)


#: Names and codes of a statement looked for in the other: each is a scan of the other text,
#: and a crafted record of 1,500 names took a second per comparison.
MAX_MARKS = 48


def _one_sided(text: str, other: str) -> bool:
    """A name or code of ``text`` (of its first :data:`MAX_MARKS`, in sorted order) that
    ``other`` does not mention anywhere."""
    mentioned = other.casefold()
    return any(
        not re.search(rf"(?<!\w){re.escape(mark)}(?!\w)", mentioned)
        for mark in sorted(marks(text))[:MAX_MARKS]
    )


def names_other_things(old: MemoryRecord, new: MemoryRecord) -> bool:
    """Each statement names a thing (a name or code) the other never mentions: "clusters in
    us-east-1" / "in eu-west-1", "the fraud model v7" / "v8"."""
    return _one_sided(old.content, new.content) and _one_sided(new.content, old.content)


#: Share of the older statement's words kept in order above which a changed subject makes
#: one sentence about two things ("the standard agent's ledger" / "the restricted agent's
#: ledger"), not the same claim in other words.
SAME_SENTENCE = 0.5

#: Words a restatement may add beyond those it drops ("the", a synonym of two words, …);
#: more is detail the older did not have.
EXTRA_WORDS = 4


#: Words that bound a claim or make an exception to it ("at least 5 minutes", "every 6 hours
#: except weekends", "up to 40", "only on weekdays"): a few words that narrow what is said.
_BOUND = re.compile(
    r"\b(?:at\s+(?:least|most)|up\s+to|only|except|excluding|unless|minimum|maximum"
    r"|(?:more|less|fewer|greater|higher|lower|later|earlier|longer|shorter)\s+than)\b",
    re.IGNORECASE,
)


#: Prepositions that say who does what to whom, or which way something goes.
_ROLES = frozenset({"to", "from", "by", "for", "with", "without", "into", "against", "via"})


def _one_word_swapped(old_text: str, new_text: str) -> bool:
    """The one difference between the statements is a short word group swapped for another,
    each with a word that names something (not an article, preposition, auxiliary or amount),
    or a preposition of direction or role for another: a sentence kept word for word around a
    swapped verb, noun or role says another thing ("signed" / "expires", "a hotel in" /
    "flights to", "to Acme" / "by Acme"), where a paraphrase rewords more than one place."""
    spans = differing_spans(old_text, new_text)
    if len(spans) != 1:
        return False
    before, after, _ = spans[0]
    if any(is_value(w) or amount_word(w) for w in before + after):
        return False  # an amount rewritten as well ("prefers the 6 pm" / "likes the 18:00")

    def names(words: list[str]) -> bool:
        return any(w not in FUNCTION_WORDS for w in words)

    if set(before) & _ROLES and set(after) & _ROLES and set(before) != set(after):
        return True  # "sent to Acme" / "sent by Acme", "works with Bob" / "works for Bob"
    return (
        0 < len(before) <= MAX_SWAP
        and 0 < len(after) <= MAX_SWAP
        and names(before)
        and names(after)
    )


#: Words that open a phrase saying where, when, for whom or on what condition a claim holds.
_QUALIFIER_OPENERS = frozenset(
    {"in", "on", "at", "for", "with", "without", "during", "within", "per", "across", "under",
     "over", "outside", "inside", "from", "via", "through", "except", "excluding", "unless",
     "if", "when", "whenever", "while", "until", "before", "after"}
)  # fmt: skip


#: Words that count what follows them, as a number does ("every sprint").
_COUNTING = frozenset({"every", "each", "per"})


def _qualified(old_text: str, new_text: str) -> bool:
    """The newer keeps the older word for word and inserts a phrase opened by a preposition
    or a condition that names something ("in production", "on school nights", "unless
    cancelled"), or a word between a number and what it counts ("thirty business days",
    "every other sprint"): the claim now holds in a narrower scope or counts another thing,
    which is new. A paraphrase that also rewords elsewhere is left to the other tests."""
    spans = differing_spans(old_text, new_text)
    if len(spans) != 1:
        return False
    before, after, preceding = spans[0]
    if before or not any(w not in FUNCTION_WORDS for w in after):
        return False
    if is_value(preceding) or preceding in _COUNTING:
        return True  # what is counted changed: "thirty business days", "every other sprint"
    return len(after) > 1 and after[0] in _QUALIFIER_OPENERS


def _bounds(text: str) -> list[str]:
    """The bounds and exceptions a statement states, normalised, in sorted order."""
    return sorted(" ".join(m.group(0).casefold().split()) for m in _BOUND.finditer(text))


def restates(old: MemoryRecord, new: MemoryRecord) -> bool:
    """Nothing in ``new`` is new over ``old``, as far as the statements' words can tell."""
    diff = compare(old.content, new.content)
    if change_language(old, new) or diff.negation_flipped or diff.antonym or diff.alternative:
        return False
    if diff.subject_changed and diff.kept >= SAME_SENTENCE:
        return False  # one sentence about another subject
    if _one_sided(old.content, new.content) or _one_sided(new.content, old.content):
        return False
    if _one_word_swapped(old.content, new.content):
        return False  # "Alice approved the budget" / "Alice requested the budget"
    if _qualified(old.content, new.content):
        return False  # "uses Slack for alerts" / "… for alerts in production"
    if _bounds(new.content) != _bounds(old.content):
        return False  # a limit or an exception stated on one side only
    old_words, new_words = set(statement_tokens(old.content)), set(statement_tokens(new.content))
    added, removed = new_words - old_words, old_words - new_words
    if not _no_new_values(old.content, new.content):
        return False
    return len(added) - len(removed) < EXTRA_WORDS


def _joins(text: str, at: int, step: int) -> bool:
    """The character at ``at`` continues the word on its other side (seen going ``step``):
    a letter or digit, or "/", ".", ":" or "-" followed by one ("10K", "04/03/2024", "v2",
    "5-10"); a hyphen before a word joins a compound ("4-year-old"), not a code."""
    if not 0 <= at < len(text):
        return False
    char, beyond = text[at], text[at + step] if 0 <= at + step < len(text) else " "
    if char.isalnum() or char == "_":
        return True
    if char == "-" and step > 0:
        return beyond.isdigit()
    return char in "/.:-" and beyond.isalnum()


def _whole(text: str, start: int, end: int) -> tuple[int, int]:
    """The whole word or code that the amount ``text[start:end]`` is written in."""
    while _joins(text, start - 1, -1):
        start -= 1
    while _joins(text, end, 1):
        end += 1
    return start, end


def _values(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The amounts a statement states, each as a key that compares it, and the values
    (:func:`is_value`) left once the amounts are taken out: a month without a date, a scale
    word ("million"). An amount written inside a longer code ("10K", "$5M", "04/03/2024") is
    compared as the code is written, not as the number read from it."""
    keys: list[tuple[str, str]] = []
    chars = list(text)
    covered = 0  # the end of the last code: its other amounts were compared with it
    for reading in readings(text):
        if reading.start < covered:
            continue
        start, end = _whole(text, reading.start, reading.end)
        exact = (start, end) == (reading.start, reading.end)
        keys.append(reading.written if exact else ("code", text[start:end].casefold()))
        chars[start:end] = " " * (end - start)
        covered = end
    rest = sorted(t for t in statement_tokens("".join(chars)) if is_value(t))
    return sorted(keys), rest


def _no_new_values(old_text: str, new_text: str) -> bool:
    """Every value the newer states the older states too: each amount in whatever units
    ("25 km" / "25,000 metres", "6 pm" / "18:00"; not "9 am" / "9 pm"), and every other
    value written alike."""
    old_keys, old_rest = _values(old_text)
    new_keys, new_rest = _values(new_text)
    return set(new_keys) <= set(old_keys) and set(new_rest) <= set(old_rest)
