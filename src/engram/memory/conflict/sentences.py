"""Statements of a record that says several things, and which of them face each other.

A record of several sentences ("The billing API keeps 10 days of history. Dana prefers short
updates.") makes several claims. Two such records are incompatible only where one claim of
each is about the same thing and cannot both be true; a neighbour that shares the topic but
no claim ("… the billing API retries too aggressively …") is not in conflict with it, however
close the two records are as wholes. :func:`facing_statements` pairs each statement of the
newer record with the statement of the older that shares the most words with it.
"""

from __future__ import annotations

import re

from engram.memory.conflict.cues import word_overlap
from engram.memory.conflict.memo import per_text

#: A sentence ends at ., ! or ? followed by space and a capital letter.
_BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
#: Words whose period is not a sentence end (titles, street and company abbreviations),
#: lowercased without the period; a single letter (an initial) is not one either.
_ABBREVIATIONS = frozenset(
    {"e.g", "i.e", "etc", "vs", "approx", "cf", "fig", "dept", "incl", "dr", "mr", "mrs", "ms",
     "prof", "st", "str", "jr", "sr", "inc", "ltd", "co", "corp", "mt", "ave", "rd", "no", "nr"}
)  # fmt: skip
#: Words a statement needs to stand on its own: shorter pieces stay with the sentence before.
MIN_WORDS = 3
#: Statements of a record compared claim by claim (a record is a few sentences; see
#: :func:`facing_statements`).
MAX_CLAIMS = 24


@per_text(8192)  # neighbours recur from write to write
def statements(text: str) -> tuple[str, ...]:
    """The sentences of ``text``; a piece too short to be a claim, or split off after an
    abbreviation or an initial ("Dr.", "Str.", "J."), joins the sentence before it."""
    joined: list[str] = []
    for piece in _BOUNDARY.split(text.strip()):
        if joined and _abbreviated(joined[-1]):  # "Dr." | "Ines Ruiz …": one sentence
            joined[-1] = f"{joined[-1]} {piece}"
        else:
            joined.append(piece)
    pieces: list[str] = []
    for piece in joined:
        if pieces and len(piece.split()) < MIN_WORDS:
            pieces[-1] = f"{pieces[-1]} {piece}"
        else:
            pieces.append(piece)
    if len(pieces) > 1 and len(pieces[0].split()) < MIN_WORDS:
        pieces[:2] = [f"{pieces[0]} {pieces[1]}"]
    return tuple(pieces)


def _abbreviated(sentence: str) -> bool:
    last = sentence.rsplit(maxsplit=1)[-1].rstrip(".")
    return last.casefold() in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())


def facing_statements(
    old_text: str, new_text: str, *, min_overlap: float
) -> list[tuple[str, str]] | None:
    """Each statement of the newer text with the older statement sharing the most words with
    it, where they share at least ``min_overlap`` (Dice over distinct words); None when both
    texts are single statements (the pair itself is the only one). Only the first
    ``MAX_CLAIMS`` statements of each text are compared: every pair of them is weighed, and a
    record of 750 sentences cost a write over a second."""
    old, new = statements(old_text)[:MAX_CLAIMS], statements(new_text)[:MAX_CLAIMS]
    if len(old) == 1 and len(new) == 1:
        return None
    facing: list[tuple[str, str]] = []
    for claim in new:
        overlap, partner = max((word_overlap(o, claim), o) for o in old)
        if overlap >= min_overlap:
            facing.append((partner, claim))
    return facing
