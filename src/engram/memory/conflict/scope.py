"""Scope rules of the conflict judgement: which pairs are compared at all, and which may be
acted on.

Two records can only conflict when they speak of one thing in one scope: the same type, an
explicit subject that does not differ, the same deployment environment, the same subject at
the start of the statement, and, for episodes, the same occurrence. These rules run before
the classifier (:mod:`engram.memory.conflict.detection`) and settle a pair without it.
Some pairs are compared but may not be acted on: a true record is never ended or challenged
on the evidence of a later occurrence of an episode.
"""

from __future__ import annotations

import re
from datetime import timedelta

from engram.memory.conflict.anchors import share_a_day
from engram.memory.conflict.cues import (
    compare,
    first_swap,
    is_value,
    statement_tokens,
    word_overlap,
)
from engram.memory.conflict.features import change_language
from engram.memory.types import MemoryRecord, MemoryType

#: Below this cosine similarity and ``COMPARED_WORDS`` shared words a pair is not looked at.
RELATED_SIMILARITY = 0.2
#: Share of distinct shared words that brings a less similar pair to the classifier anyway.
COMPARED_WORDS = 0.25
#: Below this cosine similarity no conflict is reported (a refinement still is): records
#: this far apart in meaning are neighbours in a store, not two statements of one fact (a
#: reflection on support replies and one on on-call alerts). Three labelled conflicts of
#: ``dev.jsonl`` and ``dev_writers.jsonl`` (1,439 pairs) lie below it, none of which the
#: classifier found; above it, paraphrased changes do ("prefers a window seat" / "asks for
#: an aisle seat these days", 0.47), so a higher floor cost dev accuracy (ADR-010).
REPORTED_SIMILARITY = 0.3
#: Episodes further apart than this are two occurrences, not two accounts of one.
EPISODE_WINDOW = timedelta(hours=12)
#: Words by which a later account says an event was moved, not that it happened again.
_MOVED = re.compile(
    r"\b(?:rescheduled|postponed|moved|changed|pushed back|brought forward|delayed|bumped)\b",
    re.IGNORECASE,
)
#: Words by which an account says the event happened again.
_AGAIN = re.compile(
    r"\b(?:again|once more|yet another|another (?:time|occurrence|round)|as usual|"
    r"(?:second|third|fourth|fifth|\d+(?:st|nd|rd|th)) (?:time\b|\w+ in a row)|"
    r"same (?:thing|problem|issue|pattern) as)\b",
    re.IGNORECASE,
)
#: A word group swapped within this share of the older statement's start swaps its subject.
SUBJECT_SPAN = 0.2
#: Deployment environments (and their short names): one statement about each is two facts.
ENVIRONMENTS = {
    "staging": "staging", "stag": "staging", "production": "production", "prod": "production",
    "dev": "development", "development": "development", "qa": "qa", "sandbox": "sandbox",
    "preview": "preview", "canary": "canary", "uat": "uat", "preprod": "preprod",
}  # fmt: skip


def subject_of(record: MemoryRecord) -> str | None:
    """The subject a record names explicitly (preference subject, entity name), lowercased."""
    for key in ("subject", "name"):
        value = record.metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip().casefold()
    return None


def out_of_scope(old: MemoryRecord, new: MemoryRecord, similarity: float) -> bool:
    """Another type, too distant, or explicit subjects that differ: nothing to compare."""
    if old.type is not new.type:
        return True
    new_subject, old_subject = subject_of(new), subject_of(old)
    if new_subject is not None and old_subject is not None and new_subject != old_subject:
        return True
    return (
        similarity < RELATED_SIMILARITY and word_overlap(old.content, new.content) < COMPARED_WORDS
    )


def _other_occurrence(new: MemoryRecord, old: MemoryRecord, *, by_day: bool = True) -> bool:
    """Episodes more than ``EPISODE_WINDOW`` apart, unless both name a calendar day they share
    (``by_day``): an event time is when an account was recorded, and two accounts of "the
    12 March team lunch" written a day apart tell of one lunch. A day named without its year
    is the one nearest when its account was recorded: "12 March" written in 2025 and in 2026
    names two days."""
    if new.type is not MemoryType.EPISODE or new.event_time is None or old.event_time is None:
        return False
    if abs(new.event_time - old.event_time) <= EPISODE_WINDOW:
        return False
    return not (
        by_day
        and share_a_day(
            new.content,
            old.content,
            left_on=new.event_time.date(),
            right_on=old.event_time.date(),
        )
    )


def says_again(text: str) -> bool:
    """Whether an account says its event happened again ("again", "once more", "the third
    Saturday in a row", "as usual")."""
    return bool(_AGAIN.search(text))


def later_occurrence(new: MemoryRecord, old: MemoryRecord) -> bool:
    """An episode more than ``EPISODE_WINDOW`` after another that says it happened again
    ("again", "once more", "another", "the third time"), and not that the first was moved:
    by its own words a second occurrence, which never ends or challenges the first. When it
    also reports a change ("FreshCart replaced the eggs once more"), the pair is judged, but
    what it finds is escalated. A day both name does not make it one occurrence here: by its
    own words it is another, and a record is never ended on an account that may be of
    another occurrence."""
    return (
        _other_occurrence(new, old, by_day=False)
        and says_again(new.content)
        and not _MOVED.search(new.content)
    )


def _environments(text: str) -> frozenset[str]:
    return frozenset(ENVIRONMENTS[t] for t in statement_tokens(text) if t in ENVIRONMENTS)


def scope_differs(new: MemoryRecord, old: MemoryRecord) -> bool:
    """Environments, a swapped subject or episode times say these are two facts."""
    new_env, old_env = _environments(new.content), _environments(old.content)
    if new_env and old_env and not new_env & old_env:
        return True
    if _another_subject(old, new):
        return True
    # two occurrences of an episode, unless the newer says the first one was moved or that
    # the world changed since ("moved again, now Monday", "rolled back", "expanded to 100%")
    return _other_occurrence(new, old) and not (
        (_MOVED.search(new.content) and not _MOVED.search(old.content)) or change_language(old, new)
    )


def unanchored_episodes(old: MemoryRecord, new: MemoryRecord) -> bool:
    """Two episodes that share no value (time, date, number, version), where the newer says
    nothing changed and no word is negated, opposed or swapped for another in the claim: two
    moments of a story ("paged at 02:10" / "rolled back"), not two accounts of one moment."""
    if MemoryType.EPISODE not in (old.type, new.type):
        return False
    shared = set(statement_tokens(old.content)) & set(statement_tokens(new.content))
    if any(map(is_value, shared)) or change_language(old, new):
        return False
    diff = compare(old.content, new.content)  # "held in Munich" / "in Vienna": one moment
    return not (diff.antonym or diff.negation_flipped or diff.alternative)


def _another_subject(old: MemoryRecord, new: MemoryRecord) -> bool:
    """The statements name different things in one word at their start and also say different
    things about them ("The cache service keeps its data in Redis" / "The ledger service …
    in MySQL"), and the newer does not say anything changed: two facts about two things."""
    swap_at, spans, one_word = first_swap(old.content, new.content)
    return (
        one_word
        and swap_at < SUBJECT_SPAN
        and spans >= 2
        and compare(old.content, new.content).subject_changed
        and not change_language(old, new)
    )
