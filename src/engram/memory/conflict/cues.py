"""Lexical cues for conflict detection: how two statements about one subject differ.

:func:`compare` aligns the words of two statements (case-folded, lightly stemmed, articles
dropped, contractions expanded, every negation word written as one token) and reports what
the differing words are: the grammatical subject, a value (number, version, date, weekday,
frequency), a negation, an antonym, a word group swapped for another after the verb, words
that announce a change ("instead of", "switched to", "now") or added detail.

The grammatical subject is what precedes the main verb (the first auxiliary or inflected verb
from a small lexicon); for an instruction ("Renew the staging certificate …") it is the
object after the verb, and for "To <task>, <instruction>" it is the task. Pure functions.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher

from engram.memory.conflict.memo import per_text
from engram.memory.schemas import IMPERATIVE_OPENERS

_WORD = re.compile(r"\w+(?:[.'/:,_-]\w+)*%?")
_PURPOSE = re.compile(r"^\s*to\s+([^,]+),", re.IGNORECASE)  # "To rotate a key, ..."
NOT = "~not"  # the one token every negation word becomes; no stem can collide with it
MAX_SWAP = 3  # words an exclusive swap or an antonym may replace ("a managed Aurora cluster")
SWAP_OVERLAP = 0.4  # shared words (Dice) the rest of the two statements must keep for a swap
DETAIL_KEPT = 0.8  # share of the older statement's words a refinement keeps
MAX_WORDS = 120  # words of one claim that are read (a claim is a sentence; see _statement)


@functools.lru_cache(maxsize=65536)  # words recur endlessly; this runs for every word parsed
def stem(word: str) -> str:
    """A light, consistent stem: plural and verb endings and a final ``e`` dropped."""
    if any(c.isdigit() for c in word) or len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        word = word[:-2]
    else:
        for suffix in ("ing", "ed", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
                word = word[: -len(suffix)]
                break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def _stems(words: Iterable[str]) -> frozenset[str]:
    return frozenset(stem(w) for w in words)


_BE = frozenset({"is", "are", "was", "were", "be", "been", "being", "am"})
_HAVE = frozenset({"has", "have", "had", "having"})
_MODAL = frozenset(
    {"will", "would", "can", "could", "should", "must", "may", "might", "shall", "do", "does",
     "did"}
)  # fmt: skip
_AUX = _BE | _HAVE | _MODAL
_AUX_TOKENS = _AUX | {"be", "have", NOT}
_DROP = frozenset(
    {"a", "an", "the", "do", "does", "did", "its", "their", "our", "his", "her", "my", "your",
     "this", "these", "those", "and", "then"}
)  # fmt: skip
#: Words after which a noun follows, not a verb.
_DETERMINERS = _DROP | {"that", "each", "every", "some", "any", "no", "to", "of", "for", "in", "on"}
_RELATIVE = frozenset({"who", "that", "which", "whose"})
#: Subjects that may stand for anyone ("we", "the user"): they never tell two subjects apart.
_ANYONE = frozenset({"we", "i", "you", "they", "he", "she", "it", "user", "team"})
_NEGATION = frozenset({"not", "no", "never", "none", "nothing", "nobody", "neither", "nor"})
_LEADING = _NEGATION | {"always", "please", "do"}  # may come before an instruction's verb
#: Words that end the object of an instruction ("Renew the staging certificate | every …").
_BOUNDARY = (_DETERMINERS - _DROP) | {
    "with", "at", "from", "by", "before", "after", "when", "while", "if", "until", "once",
    "using", "via", "into", "during", "within", "without", "under", "over", "against",
    "through", "unless", "or", "so", "and", "then",
}  # fmt: skip
_SCOPE = frozenset({"for", "of"})
_QUANTIFIERS = frozenset(
    {"about", "roughly", "around", "approximately", "nearly", "almost", "over", "under"}
)
_PREPOSITIONS = frozenset(
    {"in", "on", "at", "with", "by", "from", "for", "to", "of", "via", "over", "through", "as",
     "into"}
)  # fmt: skip
#: Words that name nothing: a swap of one for another is wording, not another thing.
FUNCTION_WORDS = _PREPOSITIONS | _DROP | _AUX_TOKENS

#: Words that say one statement replaces the other ("switched to", "instead of", "no longer").
_CHANGE = _stems(
    {"longer", "anymore", "instead", "switched", "moved", "migrated", "replaced", "rather",
     "renamed", "upgraded"}
)  # fmt: skip
#: Words that date a statement ("now"): they turn an exclusive claim into a change.
_NOW = frozenset({"now", "currently"})
#: Words that say the newer statement adds to the older one instead of replacing it.
_ALSO = frozenset({"also", "too", "additionally", "addition", "besides"})
#: Verbs whose object can have many values at once ("supports Apple Pay" and "PayPal").
_MANY = _stems(
    {"support", "include", "contain", "cover", "offer", "provide", "accept", "know", "speak",
     "list", "show", "integrate", "own", "enjoy", "attend", "visit", "mention", "document",
     "ask", "request"}
)  # fmt: skip
_VALUE_WORDS = frozenset(
    {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
     "twelve", "twenty", "thirty", "fifty", "hundred", "thousand", "million", "billion", "half",
     "third", "quarter", "once", "twice", "daily", "weekly", "nightly", "hourly", "monthly",
     "yearly", "annually", "quarterly", "biweekly", "fortnightly", "monday", "tuesday",
     "wednesday", "thursday", "friday", "saturday", "sunday", "january", "february", "march",
     "april", "june", "july", "august", "september", "october", "november", "december"}
)  # fmt: skip
_ANTONYMS = frozenset(
    (stem(a), stem(b))
    for a, b in (
        ("enabled", "disabled"), ("on", "off"), ("allowed", "forbidden"), ("allowed", "denied"),
        ("allowed", "blocked"), ("public", "private"), ("publicly", "private"),
        ("passing", "failing"), ("succeeded", "failed"), ("approved", "rejected"),
        ("accepted", "rejected"), ("sync", "async"), ("synchronously", "asynchronously"),
        ("before", "after"), ("more", "fewer"), ("more", "less"),
        ("optimistic", "pessimistic"), ("required", "optional"), ("mandatory", "optional"),
        ("up", "out"), ("up", "down"), ("true", "false"), ("open", "closed"),
        ("internal", "external"), ("always", "never"), ("included", "excluded"),
        ("increased", "decreased"), ("higher", "lower"), ("faster", "slower"),
        ("start", "stop"), ("light", "dark"), ("renewing", "cancelling"),
        ("within", "exceeding"), ("staying", "exceeding"), ("active", "paused"),
        ("earlier", "later"), ("with", "without"),
    )
)  # fmt: skip
_ANTONYM_PAIRS = _ANTONYMS | {(b, a) for a, b in _ANTONYMS}
_NEGATING_PREFIXES = ("un", "in", "im", "dis", "non")
_VERB_WORDS = frozenset(
    {"use", "run", "prefer", "like", "dislike", "love", "hate", "want", "need", "lead", "own",
     "manage", "report", "live", "work", "deploy", "store", "write", "read", "send", "call",
     "handle", "support", "require", "take", "return", "expire", "start", "end", "finish",
     "fail", "break", "depend", "host", "serve", "point", "belong", "contain", "include",
     "list", "show", "track", "trigger", "block", "allow", "cover", "document", "hold", "keep",
     "settle", "retry", "rebuild", "refresh", "authenticate", "talk", "mirror", "ship", "come",
     "make", "cause", "respond", "reduce", "increase", "decide", "adopt", "pin", "cap",
     "agree", "standardise", "standardize", "pay", "renew", "expose", "speak", "rotate",
     "receive", "go", "get", "give", "push", "merge", "move", "switch", "migrate", "replace",
     "change", "open", "close", "remain", "stay", "seem", "become", "last", "affect",
     "approve", "reject", "ask", "pair", "launch", "happen", "occur", "limit", "count",
     "encrypt", "retrain", "exceed", "churn", "plan", "estimate", "feed", "export", "publish",
     "emit", "spend", "cost", "enjoy", "trust", "mean", "fit", "understand", "know",
     "integrate", "offer", "provide", "accept", "attend", "visit", "mention", "schedule",
     "expect", "wait", "choose", "pick", "favour", "favor", "avoid", "drop", "add", "remove",
     "enable", "disable", "forbid", "perform", "crash", "succeed", "complete", "resolve",
     "squash", "rebase", "tag", "build", "scale", "restart", "clear", "purge", "reload",
     "check", "verify", "install", "upgrade", "page", "rollback", "roll", "notify",
     "escalate", "archive", "backup", "restore", "review", "test"}
)  # fmt: skip
_VERB_STEMS = _stems(_VERB_WORDS)
_INSTRUCTIONS = _VERB_WORDS | IMPERATIVE_OPENERS
_IRREGULAR = frozenset(
    {"chose", "chosen", "held", "ran", "took", "found", "made", "went", "came", "wrote",
     "sent", "led", "kept", "met", "paid", "said", "set", "built", "began", "broke", "gave",
     "got", "grew", "knew", "left", "lost", "saw", "spent", "stood", "told", "won"}
)  # fmt: skip


def _words(text: str) -> list[str]:
    """Case-folded words with contractions and possessives expanded."""
    folded = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    words: list[str] = []
    for word in _WORD.findall(folded):
        if word.endswith("n't"):
            base = word[:-3]
            words += [{"ca": "can", "wo": "will", "sha": "shall"}.get(base, base), "not"]
        elif word == "cannot":
            words += ["can", "not"]
        else:
            words.append(word.removesuffix("'s"))
    return words


@functools.lru_cache(maxsize=65536)
def is_value(token: str) -> bool:
    """Numbers, versions, dates, weekdays, months and frequencies: the values a fact takes."""
    return any(c.isdigit() for c in token) or token in _VALUE_WORDS


@functools.lru_cache(maxsize=65536)
def _token(word: str) -> str:
    if word in _NEGATION:
        return NOT
    if word in _BE:
        return "be"
    if word in _HAVE:
        return "have"
    return word if is_value(word) else stem(word)


def _instruction_verb(words: list[str]) -> int | None:
    """Index of the verb an instruction opens with ("Never clear the cache …"), if it is one.

    "Backup jobs run nightly" opens with a verb too, but another verb follows: a statement.
    """
    lead = 0
    while lead < len(words) - 1 and words[lead] in _LEADING:
        lead += 1
    if not words or words[lead] not in _INSTRUCTIONS:
        return None
    follower = words[lead + 1] if lead + 1 < len(words) else ""
    if follower in _AUX | _SCOPE:
        return None
    if follower in _DETERMINERS | {"and"} or _declarative_verb(words[lead:]) is None:
        return lead
    return None


def _declarative_verb(words: list[str]) -> int | None:
    """The first auxiliary or inflected verb; else a bare one, else an unknown word in -ed."""
    bare: int | None = None
    past: int | None = None
    for i in range(1, len(words)):
        word, before = words[i], words[i - 1]
        after = words[i + 1] if i + 1 < len(words) else ""
        if word in _AUX and not (word == "may" and is_value(after)):
            return i
        if before in _DETERMINERS or before in _RELATIVE or word.endswith("ing"):
            continue
        inflected = word.endswith(("s", "ed")) and not word.endswith("ss")
        if word in _IRREGULAR or (inflected and stem(word) in _VERB_STEMS):
            return i
        if bare is None and word in _VERB_WORDS:
            bare = i
        if past is None and word.endswith("ed") and len(word) > 4:
            past = i
    return bare if bare is not None else past


@dataclass(frozen=True, slots=True)
class _Statement:
    tokens: list[str]
    vocabulary: frozenset[str]  # the distinct tokens
    subject: frozenset[str]  # empty: no subject could be told apart
    verb: int | None  # token index of the main verb; None for a phrase without one
    instruction: bool


@per_text(8192)  # neighbours recur from write to write
def _statement(text: str) -> _Statement:
    # one claim is read as its first MAX_WORDS words: aligning two statements costs up to the
    # cube of their length, and a 2,000-word "sentence" took a minute to judge
    words = _words(text)[:MAX_WORDS]
    purpose = _PURPOSE.match(text)
    if purpose:
        verb: int | None = len(_words(purpose.group(0)))
        subject_words = words[1:verb]
        instruction = True
    else:
        verb = _instruction_verb(words)
        instruction = verb is not None
        if verb is not None:
            end = verb + 1
            while end < len(words) and words[end] not in _BOUNDARY and not is_value(words[end]):
                end += 1
            subject_words = words[verb + 1 : end]
        else:
            verb = _declarative_verb(words)
            subject_words = words[:verb] if verb is not None else words
    tokens = [_token(w) for w in words if w not in _DROP]
    verb_token = None if verb is None else sum(1 for w in words[:verb] if w not in _DROP)
    subject = frozenset(_token(w) for w in subject_words if w not in _DROP | _NEGATION)
    return _Statement(tokens, frozenset(tokens), subject, verb_token, instruction)


@dataclass(frozen=True, slots=True)
class Difference:
    """How a newer statement differs from an older one about (perhaps) the same subject."""

    same_words: bool
    subject_changed: bool
    kept: float  # share of the older statement's words the newer one keeps, in order
    overlap: float  # shared words over the words of both (Dice), in order
    negation_flipped: bool  # a negation added or removed inside the claim
    antonym: bool  # an antonym swapped in, or the same words in another order
    value_changed: bool  # values removed and others added
    other_change: bool  # a word group other than a value or a change word was swapped
    alternative: bool  # exactly one word group after the verb swapped for another
    change_marker: bool  # a word that says one statement replaces the other
    dated: bool  # a word that dates the difference ("now")
    adds_detail: bool  # the newer keeps the older's words and adds more


def _subject_changed(old: _Statement, new: _Statement) -> bool:
    if not old.subject or not new.subject or (old.subject | new.subject) & _ANYONE:
        return False
    if old.subject <= new.subject or new.subject <= old.subject:
        return False
    # "About 300 customers were …" / "About 1,200 customers were …": a measured quantity
    # changed, not the subject (a version number, as in "the v2 API", still names a thing).
    quantity = bool(old.subject & new.subject & _QUANTIFIERS) or any(
        t.endswith("%") for t in old.subject | new.subject
    )
    return not (quantity and all(map(is_value, old.subject ^ new.subject)))


def _antonym(old: list[str], new: list[str]) -> bool:
    for a in old:
        for b in new:
            if (a, b) in _ANTONYM_PAIRS:
                return True
            if min(len(a), len(b)) >= 3 and any(
                a == prefix + b or b == prefix + a for prefix in _NEGATING_PREFIXES
            ):
                return True
    return False


@functools.lru_cache(maxsize=4096)  # compare and first_swap align the same pair
def _aligned(old_text: str, new_text: str) -> tuple[tuple[tuple[int, int, int, int], ...], int]:
    """:func:`_spans` of two statements' tokens."""
    spans, shared = _spans(_statement(old_text).tokens, _statement(new_text).tokens)
    return tuple(spans), shared


def _spans(a: list[str], b: list[str]) -> tuple[list[tuple[int, int, int, int]], int]:
    """Differing spans ``(i1, i2, j1, j2)`` and the number of shared words.

    A deletion and an insertion only one shared word apart form one span: "a staff engineer"
    / "an engineering manager" is one swap.
    """
    spans: list[tuple[int, int, int, int]] = []
    shared, gap, last = 0, 0, ""
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            shared, gap = shared + i2 - i1, i2 - i1
        elif spans and gap == 1 and {last, tag} == {"insert", "delete"}:
            spans[-1] = (spans[-1][0], i2, spans[-1][2], j2)
        else:
            spans.append((i1, i2, j1, j2))
        last = tag if tag != "equal" else last
    return spans, shared


def _relation_differs(before: list[str], after: list[str]) -> bool:
    """True when both sides open a different relation ("on the plan" / "in Denver")."""
    first_before = next((t for t in before if t in _PREPOSITIONS), None)
    first_after = next((t for t in after if t in _PREPOSITIONS), None)
    return None not in (first_before, first_after) and first_before != first_after


def statement_tokens(text: str) -> list[str]:
    """The statement's tokens as :func:`compare` aligns them (stems, one negation token)."""
    return _statement(text).tokens


def statement_parts(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """The tokens of the statement's grammatical subject and those after its main verb."""
    parsed = _statement(text)
    verb = parsed.verb if parsed.verb is not None else len(parsed.tokens)
    return parsed.subject, frozenset(parsed.tokens[verb:]) - _AUX_TOKENS


@functools.lru_cache(maxsize=4096)  # asked by the features and by the scope rules alike
def first_swap(old_text: str, new_text: str) -> tuple[float, int, bool]:
    """Where the first word group swapped for another starts, as a share of the older
    statement's length (1.0: none); how many differing spans there are; and whether that
    first swap is one word for one word.

    A swap at the very start ("Warehouse A …" / "Warehouse B …") names another subject; a
    swap after the verb replaces a value. A swapped article, preposition or auxiliary ("for" /
    "on") is no word-for-word swap of a thing.
    """
    a, b = _statement(old_text).tokens, _statement(new_text).tokens
    spans, _ = _aligned(old_text, new_text)
    swaps = [
        (i1, i2 - i1 == 1 == j2 - j1 and not {a[i1], b[j1]} & FUNCTION_WORDS)
        for i1, i2, j1, j2 in spans
        if i2 > i1 and j2 > j1
    ]
    if not swaps or not a:
        return 1.0, len(spans), False
    return swaps[0][0] / len(a), len(spans), swaps[0][1]


def differing_spans(old_text: str, new_text: str) -> list[tuple[list[str], list[str], str]]:
    """The word groups that differ between two statements, each as (older's, newer's)
    tokens and the newer's token just before them ("" at the start); one side is empty for
    words only added or only cut."""
    a, b = _statement(old_text).tokens, _statement(new_text).tokens
    spans, _ = _aligned(old_text, new_text)
    return [(a[i1:i2], b[j1:j2], b[j1 - 1] if j1 else "") for i1, i2, j1, j2 in spans]


@functools.lru_cache(maxsize=4096)
def word_swaps(old_text: str, new_text: str) -> tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]:
    """The word groups of one statement swapped for a group of the other, as written
    (case-folded, every word kept): (older's words, newer's words). Words are matched by
    their tokens (stems, one negation, one "be"); groups only cut or only added are left out."""
    a, b = _words(old_text)[:MAX_WORDS], _words(new_text)[:MAX_WORDS]
    matcher = SequenceMatcher(None, [_token(w) for w in a], [_token(w) for w in b], autojunk=False)
    return tuple(
        (tuple(a[i1:i2]), tuple(b[j1:j2]))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag == "replace"
    )


def word_overlap(old_text: str, new_text: str) -> float:
    """Distinct words the two statements share, over the distinct words of both (Dice).

    Cheap next to :func:`compare` (sets of parsed, cached tokens, no alignment).
    """
    old, new = _statement(old_text).vocabulary, _statement(new_text).vocabulary
    if not old and not new:
        return 1.0
    return 2 * len(old & new) / (len(old) + len(new))


@functools.lru_cache(maxsize=4096)  # a write's pairs come back when its conflicts are resolved
def compare(old_text: str, new_text: str) -> Difference:
    """Align the two statements and describe what differs between them."""
    old, new = _statement(old_text), _statement(new_text)
    a, b = old.tokens, new.tokens
    spans, shared = _aligned(old_text, new_text)
    verb = old.verb if old.verb is not None else len(a)
    head = next((t for t in a[verb:] if t not in _AUX_TOKENS), "")
    removed = [t for i1, i2, _, _ in spans for t in a[i1:i2]]
    added = [t for _, _, j1, j2 in spans for t in b[j1:j2]]
    inside: list[str] = []  # differing words, leaving out clauses appended or cut at the end
    negation = antonym = scoped = False
    swaps: list[tuple[list[str], list[str], int]] = []
    for i1, i2, j1, j2 in spans:
        before, after = a[i1:i2], b[j1:j2]
        if (not before and i1 == len(a)) or (not after and j1 == len(b)):
            continue
        inside += before + after
        negation = negation or before.count(NOT) != after.count(NOT)
        if not (before and after):
            continue
        short = len(before) <= MAX_SWAP and len(after) <= MAX_SWAP
        antonym = antonym or (short and _antonym(before, after))
        if any(map(is_value, before)) and any(map(is_value, after)):
            continue
        if set(before + after) <= _CHANGE | _NOW | {NOT, "be", "have", "to"}:
            continue
        scoped = scoped or (i1 > 0 and a[i1 - 1] in _SCOPE and i1 > verb)
        swaps.append((before, after, i1))
    single = swaps[0] if len(swaps) == 1 else None
    overlap = 2 * shared / (len(a) + len(b)) if a or b else 1.0
    alternative = (
        single is not None
        and old.verb is not None
        and overlap >= SWAP_OVERLAP
        and len(single[0]) <= MAX_SWAP
        and (single[2] > verb or (old.instruction and single[2] == verb))
        and head not in _MANY
        and not set(added) & _ALSO
        and not _relation_differs(single[0], single[1])
    )
    return Difference(
        same_words=a == b,
        subject_changed=_subject_changed(old, new) or scoped,
        kept=shared / len(a) if a else 0.0,
        overlap=overlap,
        negation_flipped=negation,
        antonym=antonym or (a != b and sorted(a) == sorted(b)),
        value_changed=any(map(is_value, removed)) and any(map(is_value, added)),
        other_change=bool(swaps),
        alternative=alternative,
        change_marker=bool(set(inside) & _CHANGE),
        dated=bool(set(inside) & _NOW),
        adds_detail=len(added) > len(removed) and shared >= DETAIL_KEPT * len(a) and not swaps,
    )
