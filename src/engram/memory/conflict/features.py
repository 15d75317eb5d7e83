"""The numbers the conflict model reads about a pair of statements (ADR-010).

:func:`pair_features` turns an older and a newer record of one type, with the cosine
similarity of their embeddings, into a fixed vector named by :data:`FEATURES`. The signals
are general rather than fitted word lists: embedding similarity, how the two statements align
(shared words, what the differing words are: subject, value, negation, an antonym from
WordNet, a swapped word group), amounts normalised across units, explicit subjects and
locators, and the record type. Time order and confidence are deliberately *not* features:
they decide between supersession, contradiction and unresolvable by the documented rules in
:mod:`engram.memory.conflict.detection`, so a model can never learn "later means replaced".
Pure functions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from engram.memory.conflict.anchors import anchors, observation
from engram.memory.conflict.cues import (
    NOT,
    compare,
    first_swap,
    is_value,
    statement_parts,
    statement_tokens,
    word_swaps,
)
from engram.memory.conflict.lexicon import CHANGE_MARKERS, change_phrases, lexicon
from engram.memory.conflict.memo import per_text
from engram.memory.conflict.quantities import changed_amounts, quantities, same_amounts
from engram.memory.types import MemoryRecord, MemoryType

_TYPES = tuple(MemoryType)
_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][A-Za-z0-9]+|\b[A-Z]{2,}[A-Za-z0-9]*")
_ALSO = frozenset({"also", "too", "additionally", "addition", "besides", "another"})
_EXCLUSIVE = frozenset({"only", "exclusively", "solely", "sole", "single", "just", "instead"})
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
#: Words that say how things stand now or will be: a state, or a plan ("was rescheduled to
#: Friday" is a plan however it is told), which a later record can end.
_STANDING = frozenset(
    {"is", "are", "am", "isn't", "aren't", "has", "have", "hasn't", "haven't", "does",
     "doesn't", "do", "don't", "will", "won't", "remains", "stays", "owns", "uses", "runs",
     "lives", "works", "prefers", "wants", "needs", "keeps", "holds", "scheduled", "booked",
     "planned", "rescheduled", "arranged", "postponed", "reserved", "due", "currently",
     "usually", "always", "every", "each"}
)  # fmt: skip
#: Irregular past forms (regular ones end in "ed"): an account of what happened.
_PAST = frozenset(
    {"was", "were", "wasn't", "weren't", "had", "did", "didn't", "went", "came", "found",
     "got", "made", "took", "said", "saw", "sent", "told", "gave", "left", "kept", "ran",
     "began", "brought", "bought", "thought", "paid", "held", "wrote", "broke", "chose",
     "drove", "fell", "felt", "flew", "grew", "knew", "led", "lost", "met", "rose", "sold",
     "spoke", "spent", "taught", "threw", "woke", "won", "became", "caught", "fought",
     "forgot", "hung", "rang", "sang", "sat", "slept", "stood", "struck", "swung", "tore",
     "understood", "overran", "rebuilt", "withdrew", "upheld", "undid", "reran"}
)  # fmt: skip
_NOT_PAST = frozenset(
    {"need", "speed", "feed", "seed", "bed", "red", "shed", "hundred", "embed", "indeed",
     "proceed", "exceed", "succeed", "breed", "weed", "greed", "creed", "steed", "deed",
     "heed", "reed", "ted", "ned", "med", "fed"}
)  # fmt: skip

FEATURES: tuple[str, ...] = (
    "similarity",
    "similarity_high",
    "similarity_very_high",
    "overlap",
    "subject_overlap",
    "predicate_overlap",
    "kept",
    "first_swap_at",
    "swap_at_start",
    "differing_spans",
    "new_covered",
    "length_ratio",
    "same_words",
    "subject_changed",
    "negation_flipped",
    "negation_either",
    "antonym",
    "wordnet_antonym",
    "value_changed",
    "amounts_changed",
    "amounts_same",
    "amounts_only_one",
    "other_change",
    "alternative",
    "change_marker",
    "change_markers_new",
    "change_phrase_new",
    "wordnet_change_new",
    "dated",
    "adds_detail",
    "also_new",
    "exclusive",
    "names_differ",
    "names_only_new",
    "subject_explicit_same",
    "subject_explicit_differ",
    "locator_differ",
    "old_past",
    "old_standing",
    "new_past",
    "new_standing",
    "swap_same_kind",
    "swap_name_name",
    "swap_one_word",
    "swap_len_max",
    "old_anchored",
    "new_anchored",
    "anchors_differ",
    "old_observation",
    *(f"type_{kind.value}" for kind in _TYPES),
)


def _explicit(record: MemoryRecord, key: str) -> str | None:
    value = record.metadata.get(key)
    return value.strip().casefold() if isinstance(value, str) and value.strip() else None


@per_text(8192)  # a stored neighbour's side is read again on every write
def _names(text: str) -> frozenset[str]:
    """Capitalised words and acronyms not opening a sentence: names of things, cased."""
    return frozenset(m.group(0).casefold() for m in _CAPITALISED.finditer(text))


def _jaccard(left: frozenset[str], right: frozenset[str]) -> float:
    return len(left & right) / len(left | right) if left or right else 1.0


@per_text(8192)  # a stored neighbour's side is read again on every write
def _tense(text: str) -> tuple[float, float]:
    """How many words of ``text`` tell of the past ("was", "rolled back") and how many say
    how things stand or will be ("is", "owns", "booked for"), each at most 3: an account of
    a moment stays true after a later change; a standing state or plan does not."""
    words = _WORD.findall(text.casefold())
    past = sum(
        1 for w in words if w in _PAST or (w.endswith("ed") and len(w) > 3 and w not in _NOT_PAST)
    )
    standing = sum(1 for w in words if w in _STANDING)
    return min(3.0, float(past)), min(3.0, float(standing))


_WEEKDAYS = frozenset(
    {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "mondays",
     "tuesdays", "wednesdays", "thursdays", "fridays", "saturdays", "sundays", "weekday",
     "weekdays", "weekend", "weekends"}
)  # fmt: skip
_MONTHS = frozenset(
    {"january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"}
)  # fmt: skip


def _kinds(words: Sequence[str], names: frozenset[str]) -> frozenset[str]:
    """What kinds of value a word group holds: a number, a weekday, a month, a name."""
    found = set()
    for word in words:
        if any(c.isdigit() for c in word):
            found.add("number")
        elif word in _WEEKDAYS:
            found.add("weekday")
        elif word in _MONTHS:
            found.add("month")
        elif word in names:
            found.add("name")
    return frozenset(found)


def _slots(old_text: str, new_text: str, names: frozenset[str]) -> dict[str, float]:
    """The slot view of a pair: the word groups swapped one for another, and how many put a
    value of one kind where the other had a value of the same kind ("Tuesday" /
    "Thursday", "Python" / "Go", "3" / "5"): one attribute given two values."""
    swaps = word_swaps(old_text, new_text)
    same = [_kinds(old, names) & _kinds(new, names) for old, new in swaps]
    return {
        "swap_same_kind": float(sum(1 for kinds in same if kinds)),
        "swap_name_name": float(any("name" in kinds for kinds in same)),
        "swap_one_word": float(sum(1 for old, new in swaps if len(old) == 1 == len(new))),
        "swap_len_max": float(max((max(len(old), len(new)) for old, new in swaps), default=0)),
    }


def _wordnet_antonym(old: Sequence[str], new: Sequence[str]) -> bool:
    """A word only in one statement is WordNet's antonym of a word only in the other."""
    lex = lexicon()
    only_old, only_new = set(old) - set(new), set(new) - set(old)
    return any(lex.opposites(word) & only_new for word in only_old)


def read_side(text: str) -> None:
    """Parse one side of a future pair now, into the caches :func:`pair_features` reads (the
    Gate reads a proposal's text while its neighbour query runs; ADR-016)."""
    statement_parts(text)
    quantities(text)
    _names(text)
    _tense(text)
    change_phrases(text)
    observation(text)


def pair_features(old: MemoryRecord, new: MemoryRecord, similarity: float) -> list[float]:
    """The feature vector of one (older, newer) pair, in the order of :data:`FEATURES`."""
    diff = compare(old.content, new.content)
    old_tokens, new_tokens = statement_tokens(old.content), statement_tokens(new.content)
    old_set, new_set = set(old_tokens), set(new_tokens)
    added = new_set - old_set
    old_amounts, new_amounts = quantities(old.content), quantities(new.content)
    old_names, new_names = _names(old.content), _names(new.content)
    subjects = (
        _explicit(old, "subject") or _explicit(old, "name"),
        _explicit(new, "subject") or _explicit(new, "name"),
    )
    locators = _explicit(old, "locator"), _explicit(new, "locator")
    old_subject, old_predicate = statement_parts(old.content)
    new_subject, new_predicate = statement_parts(new.content)
    swap_at, spans, _ = first_swap(old.content, new.content)
    (old_past, old_standing), (new_past, new_standing) = _tense(old.content), _tense(new.content)
    values = {
        "old_past": old_past,
        "old_standing": old_standing,
        "new_past": new_past,
        "new_standing": new_standing,
        "first_swap_at": swap_at,
        "swap_at_start": float(swap_at < 0.2),
        "differing_spans": min(6.0, float(spans)),
        "subject_overlap": _jaccard(old_subject, new_subject),
        "predicate_overlap": _jaccard(old_predicate, new_predicate),
        "similarity": similarity,
        "similarity_high": float(similarity >= 0.7),
        "similarity_very_high": float(similarity >= 0.85),
        "overlap": diff.overlap,
        "kept": diff.kept,
        "new_covered": len(new_set & old_set) / len(new_set) if new_set else 1.0,
        "length_ratio": math.log((len(new_tokens) + 1) / (len(old_tokens) + 1)),
        "same_words": float(diff.same_words),
        "subject_changed": float(diff.subject_changed),
        "negation_flipped": float(diff.negation_flipped),
        "negation_either": float((NOT in old_set) != (NOT in new_set)),
        "antonym": float(diff.antonym),
        "wordnet_antonym": float(_wordnet_antonym(old_tokens, new_tokens)),
        "value_changed": float(diff.value_changed),
        "amounts_changed": float(changed_amounts(old.content, new.content)),
        "amounts_same": float(same_amounts(old.content, new.content)),
        "amounts_only_one": float(bool(old_amounts) != bool(new_amounts)),
        "other_change": float(diff.other_change),
        "alternative": float(diff.alternative),
        "change_marker": float(diff.change_marker),
        "change_markers_new": min(3.0, float(len(added & CHANGE_MARKERS))),
        "change_phrase_new": float(change_language(old, new)),
        "wordnet_change_new": min(3.0, float(len(added & lexicon().change_verbs))),
        "dated": float(diff.dated),
        "adds_detail": float(diff.adds_detail),
        "also_new": float(bool(added & _ALSO)),
        "exclusive": float(bool((old_set ^ new_set) & _EXCLUSIVE)),
        "names_differ": float(bool(old_names) and bool(new_names) and old_names != new_names),
        "names_only_new": min(3.0, float(len(new_names - old_names))),
        "subject_explicit_same": float(None not in subjects and subjects[0] == subjects[1]),
        "subject_explicit_differ": float(None not in subjects and subjects[0] != subjects[1]),
        "locator_differ": float(None not in locators and locators[0] != locators[1]),
    }
    values.update(_slots(old.content, new.content, old_names | new_names))
    old_moments, new_moments = anchors(old.content), anchors(new.content)
    values["old_anchored"] = float(bool(old_moments))
    values["new_anchored"] = float(bool(new_moments))
    values["anchors_differ"] = float(
        bool(old_moments) and bool(new_moments) and old_moments != new_moments
    )
    values["old_observation"] = float(observation(old.content))
    for kind in _TYPES:
        values[f"type_{kind.value}"] = float(new.type is kind)
    return [values[name] for name in FEATURES]


def change_language(old: MemoryRecord, new: MemoryRecord) -> bool:
    """Whether the newer statement says the world changed: a phrase of change the older one
    lacks ("moved to", "no longer", "from now on", "rescheduled";
    :data:`~engram.memory.conflict.lexicon.CHANGE_PHRASES`), or a higher version of a
    versioned thing ("v2.0" -> "v2.1", "2025" -> "2026")."""
    if change_phrases(new.content) - change_phrases(old.content):
        return True
    diff = compare(old.content, new.content)
    return not diff.other_change and _version_raised(old.content, new.content)


#: Bounded digit runs: a version is short, and int() of a huge run would raise. A dotted
#: number is a version when it names one: after "v", "version", "release", "edition" or
#: "build", after a capitalised name that does not open the sentence and is not a short code
#: ("Python 3.12", "iOS 17.1", not "About 1.5 GB" or "EUR 1.5 million"), or with two dots or
#: more ("2.4.1"); "costs 1.5 GBP" and "1.2 million cells" are amounts. A year is a version too.
_NUMBER = re.compile(r"(?:\b|(?<=[vV]))(\d{1,9}(?:\.\d{1,9}){1,3}|(?:19|20)\d\d)\b")
_MARKED = re.compile(r"\b(?:v|version|release|edition|build)\s*$", re.IGNORECASE)
_NAMED = re.compile(r"(?<!\w)([A-Z][A-Za-z0-9]*)\s+$")
_YEAR = re.compile(r"(?:19|20)\d\d")
#: Characters before a number that are read to tell whether it names a version.
_LOOK_BACK = 32


def _named_before(before: str, *, at_start: bool) -> bool:
    """A capitalised name ends ``before`` (the text just before a number), not opening a
    sentence and not a short code; ``at_start``: ``before`` begins the text."""
    found = _NAMED.search(before)
    if found is None:
        return False
    word, head = found.group(1), before[: found.start(1)].rstrip()
    opening = (at_start and not head) or head.endswith((".", "!", "?", ":", ";"))
    return not opening and not (word.isupper() and len(word) <= 3)


def _versions(text: str) -> dict[str, tuple[int, ...]]:
    """The versions ``text`` names, as written and as numbers."""
    found = {}
    for match in _NUMBER.finditer(text):
        number, start = match.group(1), match.start(1)
        low = max(0, start - _LOOK_BACK)
        before = text[low:start]
        if (
            _MARKED.search(before)
            or _named_before(before, at_start=low == 0)
            or number.count(".") >= 2
            or _YEAR.fullmatch(number)
        ):
            found[number] = tuple(int(p) for p in number.split("."))
    return found


def _version_raised(old_text: str, new_text: str) -> bool:
    """A higher version of the same thing, and no other value changed beside it: "v1 holds
    1.2 million cells" / "v2 holds 3.4 million" are facts about two versions, not a change."""
    before, after = _versions(old_text), _versions(new_text)
    gained = set(after.values()) - set(before.values())
    if not (before and gained and max(gained) > max(before.values())):
        return False
    written = before.keys() | after.keys()
    others = {
        token
        for token in set(statement_tokens(old_text)) ^ set(statement_tokens(new_text))
        if is_value(token) and token not in written and not token.startswith("v")
    }
    return not others
