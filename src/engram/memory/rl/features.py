"""What Layer 2 saw when it advised on a write: the state a learned advisor acts on (ADR-020).

Every advice on an outside CREATE carries these numbers into its audit row, so the data a
policy is trained on is nothing but the audit log joined to feedback. The vector is named
(:data:`FEATURE_NAMES`) and versioned (:data:`FEATURE_SCHEMA`): a trained model records the
schema it was fitted to and is refused for another. All values are in [0, 1], so one policy
weight means the same across features. No memory content, only numbers about it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from uuid import UUID

from engram.memory.conflict.cues import is_value, statement_tokens
from engram.memory.conflict.detection import ConflictResult, PairRelation
from engram.memory.conflict.features import change_language
from engram.memory.conflict.memo import per_text
from engram.memory.conflict.restatement import marks
from engram.memory.types import (
    ConflictClassification,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    Neighbour,
    TrustLevel,
)

FEATURE_SCHEMA = "advisor-features@1"
#: Similarity from which a neighbour counts as related (as the heuristic's routing).
_RELATED = 0.70
_WORD = re.compile(r"\w+")
_TYPES = tuple(MemoryType)
_CONTESTED = frozenset({ConflictClassification.CONTRADICTION, ConflictClassification.UNRESOLVABLE})
_TIERS = (TrustLevel.TRUSTED, TrustLevel.STANDARD, TrustLevel.RESTRICTED)

FEATURE_NAMES: tuple[str, ...] = (
    "closest",  # cosine similarity of the nearest active record of the scope
    "second",  # … of the second nearest
    "related",  # neighbours at or above 0.70, over 8
    "exact_duplicate",  # same normalised content hash as an active record
    "near_duplicate",  # >= 0.95 and the same significant words
    "restates",  # the nearest says it all already (conflict.restatement)
    "incompatible",  # the conflict classifier on the nearest: both cannot be true
    "refines",  # … the proposal adds compatible detail to the nearest
    "other_scope",  # the nearest is about another subject, environment or moment
    "new_marks",  # a name, code or value the nearest does not have
    "kept_marks",  # share of the nearest's names, codes and values the proposal repeats
    "change_words",  # the proposal says something changed (the nearest does not)
    "in_conflict",  # the proposal conflicts with one of its neighbours
    "supersedes",  # … and says the world changed
    "contested",  # … a contradiction or an unresolvable pair
    "repetitions",  # how often the nearest was repeated, log-scaled
    "source_confidence",
    "words",  # length, log-scaled (100 words -> 1)
    "specificity",  # distinct words over 25, capped
    "internal",  # consolidation or self-healing, not an agent
    *(f"trust_{tier.value}" for tier in _TIERS),
    *(f"type_{kind.value}" for kind in _TYPES),
    "heuristic_noop",  # the reference policy's answer
)
FEATURE_COUNT = len(FEATURE_NAMES)


def _scaled_log(value: float, full: float) -> float:
    return min(1.0, math.log1p(max(0.0, value)) / math.log1p(full))


def advice_features(
    record: MemoryRecord,
    *,
    decision_type: GateDecisionType,
    trust: TrustLevel,
    neighbours: Sequence[Neighbour],
    exact_duplicate: bool,
    near_duplicate: bool,
    relation: PairRelation | None,
    conflicts: Sequence[ConflictResult],
    heuristic_noop: bool,
) -> tuple[float, ...]:
    """The state vector, in the order of :data:`FEATURE_NAMES`.

    ``neighbours`` are the proposal's neighbours (itself left out); ``relation`` is how it
    stands to the nearest (None when there is none or its scope differs).
    """
    ranked = sorted((n.similarity for n in neighbours), reverse=True)
    nearest = max(neighbours, key=lambda n: n.similarity, default=None)
    kinds = {c.classification for c in conflicts}
    words = _WORD.findall(record.content)
    values: list[float] = [
        _unit(ranked[0] if ranked else 0.0),
        _unit(ranked[1] if len(ranked) > 1 else 0.0),
        min(1.0, sum(1 for s in ranked if s >= _RELATED) / 8),
        float(exact_duplicate),
        float(near_duplicate),
        float(relation is not None and relation.restates),
        _unit(relation.incompatible) if relation is not None else 0.0,
        _unit(relation.refines) if relation is not None else 0.0,
        float(nearest is not None and relation is None),
        *_marks(record, nearest.record if nearest is not None else None),
        float(bool(kinds - {ConflictClassification.REFINEMENT})),
        float(ConflictClassification.SUPERSESSION in kinds),
        float(bool(kinds & _CONTESTED)),
        _scaled_log(nearest.repetitions if nearest is not None else 0, 10),
        _unit(record.source_confidence),
        _scaled_log(len(words), 100),
        min(1.0, len({w.casefold() for w in words}) / 25),
        float(decision_type is not GateDecisionType.EXTERNAL),
        *(float(trust is tier) for tier in _TIERS),
        *(float(record.type is kind) for kind in _TYPES),
        float(heuristic_noop),
    ]
    return tuple(round(v, 6) for v in values)


#: Longest run the locators' patterns walk from one start before the part that makes a locator
#: (``://``, ``@``, the first dot): longer than any scheme, e-mail local part (64) or name
#: label (63) a statement holds. Unbounded, a match was tried at every character of a long
#: word and walked to its end each time, so one 16,000-character word held the Gate over a
#: second (hostile pass R).
MAX_LOCATOR_RUN = 255
#: Locators a statement may carry: URLs, e-mail addresses, dotted names (hosts, files).
_LOCATORS = re.compile(
    rf"[a-z][\w+.-]{{0,{MAX_LOCATOR_RUN}}}://[^\s,;]+"
    rf"|[\w.+-]{{1,{MAX_LOCATOR_RUN}}}@[\w-]+(?:\.[\w-]+)+"
    rf"|\b\w[\w-]{{0,{MAX_LOCATOR_RUN}}}(?:\.[\w-]+)+"
)


@per_text(8192)  # the nearest neighbour's side recurs from write to write
def marked(text: str) -> frozenset[str]:
    """Names and codes (:func:`~engram.memory.conflict.restatement.marks`), values, and
    locators, casefolded."""
    folded = text.casefold()
    locators = {m.group(0).rstrip(".)") for m in _LOCATORS.finditer(folded)}
    return marks(text) | {t for t in statement_tokens(text) if is_value(t)} | locators


def _word_character(ch: str) -> bool:
    """What ``\\w`` matches in a ``str`` pattern."""
    return ch.isalnum() or ch == "_"


def mentions(text: str, mark: str) -> bool:
    """Whether ``mark`` occurs in ``text`` as a whole word (no word character on either
    side), as ``(?<!\\w)mark(?!\\w)`` would find it, without compiling a pattern per mark
    (every write looks for a dozen marks, and patterns made per call defeat ``re``'s cache)."""
    start = text.find(mark)
    while start >= 0:
        end = start + len(mark)
        if (start == 0 or not _word_character(text[start - 1])) and (
            end == len(text) or not _word_character(text[end])
        ):
            return True
        start = text.find(mark, start + 1)
    return False


#: Most word runs a mark may span to be looked up among a text's runs (longer marks are
#: looked for with a pattern each; they are few, as a record holds 16,000 characters).
MAX_LOOKUP_PARTS = 16


class WholeWords:
    """A text's whole-word spans, to tell which marks it mentions (as :func:`mentions` does)
    in time that grows with the text, not with how often each mark occurs inside a longer
    word: looking for a neighbour's hundreds of marks ("1", "11", "111", …) in one long word
    ("x111…1x") walked every occurrence of each and held the Gate half a second (hostile pass
    R). A mark that begins and ends with a word character and spans ``n`` word runs occurs as
    a whole word exactly when it equals the text from the start of one of its word runs to
    the end of the ``n``-th."""

    def __init__(self, text: str) -> None:
        self._text = text
        spans = [m.span() for m in _WORD.finditer(text)]
        self._starts = [start for start, _ in spans]
        self._ends = [end for _, end in spans]
        self._spans: dict[int, frozenset[str]] = {}

    def mention(self, mark: str) -> bool:
        """Whether the text holds ``mark`` as a whole word."""
        if not mark or not (_word_character(mark[0]) and _word_character(mark[-1])):
            return mentions(self._text, mark)
        parts = len(_WORD.findall(mark))
        if parts > MAX_LOOKUP_PARTS:  # few per text: a pattern's scan is linear in C
            whole = re.compile(rf"(?<!\w){re.escape(mark)}(?!\w)")
            return whole.search(self._text) is not None
        found = self._spans.get(parts)
        if found is None:
            text = self._text
            found = frozenset(
                text[start:end]
                for start, end in zip(self._starts, self._ends[parts - 1 :], strict=False)
            )
            self._spans[parts] = found
        return mark in found


def _marks(record: MemoryRecord, nearest: MemoryRecord | None) -> tuple[float, float, float]:
    """``new_marks``, ``kept_marks`` and ``change_words`` against the nearest record (a mark
    is looked for in the other text as a whole word, wherever it stands)."""
    mine = marked(record.content)
    if nearest is None:
        return (float(bool(mine)), 0.0, 0.0)
    theirs = marked(nearest.content)
    there = WholeWords(nearest.content.casefold())
    here = WholeWords(record.content.casefold())
    new = any(not there.mention(mark) for mark in mine)
    kept = sum(here.mention(mark) for mark in theirs) / len(theirs) if theirs else 0.0
    return (float(new), kept, float(change_language(nearest, record)))


def _unit(value: float) -> float:
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, value))


def features_json(
    values: Sequence[float], nearest: UUID | None = None, *, merge_allowed: bool = False
) -> dict[str, object]:
    """The audit form: the schema, each value by name, the nearest record's id, and whether
    the access rules allowed merging into it (rows written before merges existed lack it:
    read as not allowed)."""
    return {
        "schema": FEATURE_SCHEMA,
        "values": dict(zip(FEATURE_NAMES, values, strict=True)),
        "nearest": None if nearest is None else str(nearest),
        "merge_allowed": merge_allowed,
    }


def features_from_json(data: Mapping[str, object]) -> tuple[float, ...] | None:
    """The vector an audit row recorded, or None when it was written under another schema."""
    if data.get("schema") != FEATURE_SCHEMA:
        return None
    values = data.get("values")
    if not isinstance(values, Mapping):
        return None
    try:
        return tuple(float(values[name]) for name in FEATURE_NAMES)
    except (KeyError, TypeError, ValueError):
        return None
