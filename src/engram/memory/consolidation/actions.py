"""What a topic becomes: the action (§5.4) and the consolidated record's text and fields.

* **skill**: the records repeat one procedure: they are alike (mean pairwise cosine at least
  ``skill_similarity``), written as lists of steps (on average at least ``skill_parts``
  pieces between commas, semicolons, "then" and arrows), and the steps recur: at least
  ``skill_repeated`` of them have a step of another record with much the same words (a log
  of one incident is written in steps too, but each step is new). The skill's ``steps`` are
  the distinct pieces in the order first seen; the text lists them.
* **promote**: at least ``promote_min`` records that say the same thing (mean pairwise cosine
  at least ``promote_similarity``), or that are less alike (at least
  ``recurring_similarity``) but say it happened again ("again", "once more", "the third week
  in a row": at least ``recurring_share`` of them) or hold a belief, become one ``belief``.
  Its confidence grows with the number and confidence of independent sources:
  ``1 - prod(1 - c_i)`` with one term per writing agent (as the audit log records it, its
  surest source), capped at 0.99. Any other consolidated record is as sure as its least sure
  source.
* **merge**: any other topic of two or more records, and every topic that holds a decision (a
  choice taken once is a moment of a thread, never a repeated observation nor a routine's
  step): one narrative of the same type as most of its sources (an episode if any is), each
  moment dated, in event-time order; a decision is told with its rationale.
* **compress**: a topic of one record of at least ``compress_min_words`` words, when the
  compressed text saves at least ``compress_min_saving`` of them.

Topics never span access levels (the planner partitions by namespace and level), so the
consolidated record has its sources' level (quarantined sources make a ``sensitive`` one) and
the classification of the most closed source.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from engram.memory.conflict.scope import says_again
from engram.memory.consolidation.facts import content_words
from engram.memory.consolidation.model import ConsolidationAction
from engram.memory.consolidation.summarize import SourceText, Style, select_clauses
from engram.memory.types import AccessLevel, MemoryRecord, MemoryType

#: Where a procedure's steps part: commas, semicolons, colons, "then", arrows, new lines, and
#: sentence ends before a capital ("… on ext. 4410" and "approx. 3 kg" stay one step).
_PARTS = re.compile(
    r"[,;:]\s+|\s+then\s+|\s*(?:->|\u2192)\s*|(?<=[.!?])\s+(?=[A-Z\u00c0-\u00d6\u00d8-\u00de\u0391-\u03a9\u0410-\u042f])|\n+"
)
_LEADING = re.compile(
    r"^(?:and\s+)?(?:then|next|finally|afterwards|after that)\b[,\s]*", re.IGNORECASE
)
MAX_STEPS = 100
MAX_STEP_CHARS = 500


@dataclass(frozen=True, slots=True)
class ActionParams:
    """The action rules' knobs (see the module docstring)."""

    skill_parts: float = 4.5
    skill_similarity: float = 0.58
    skill_repeated: float = 0.2
    promote_min: int = 3
    promote_similarity: float = 0.62
    recurring_similarity: float = 0.5
    recurring_share: float = 0.3
    compress_min_words: int = 100
    compress_min_saving: float = 0.15


def steps_of(text: str) -> list[str]:
    """The parts of ``text`` a procedure is written in: pieces between commas, semicolons,
    colons, sentence ends, "then" and arrows, each with at least one content word."""
    pieces = [_LEADING.sub("", p.strip(" .,;:")) for p in _PARTS.split(text)]
    return [p for p in pieces if p and content_words(p)]


def choose(
    sources: Sequence[MemoryRecord], vectors: NDArray[np.float32], params: ActionParams
) -> ConsolidationAction | None:
    """The action for a topic (its sources in event-time order), or None to leave it."""
    if len(sources) == 1:
        if len(sources[0].content.split()) >= params.compress_min_words:
            return ConsolidationAction.COMPRESS
        return None
    if any(s.type is MemoryType.DECISION for s in sources):
        return ConsolidationAction.MERGE
    similarity = _mean_similarity(vectors)
    parts = sum(len(steps_of(s.content)) for s in sources) / len(sources)
    if all(s.type is MemoryType.SKILL for s in sources) or (
        similarity >= params.skill_similarity
        and parts >= params.skill_parts
        and repeated_steps(sources) >= params.skill_repeated
    ):
        return ConsolidationAction.SKILL
    if len(sources) >= params.promote_min and (
        similarity >= params.promote_similarity
        or (similarity >= params.recurring_similarity and _recurring(sources, params))
    ):
        return ConsolidationAction.PROMOTE
    return ConsolidationAction.MERGE


def _recurring(sources: Sequence[MemoryRecord], params: ActionParams) -> bool:
    """The sources say they report one pattern: enough of them say it happened again, or one
    of them is a belief."""
    again = sum(says_again(s.content) for s in sources) / len(sources)
    return again >= params.recurring_share or any(s.type is MemoryType.BELIEF for s in sources)


#: Two steps with at least this share of their content words in common are one step.
SAME_STEP = 0.4
#: Steps compared: each step is compared with every other source's, so the work grows with
#: the square of their number (fifty sources of a hundred steps took 16 s); the first
#: steps of the first sources are sample enough to tell a routine from a story.
COMPARED_STEPS = 16
COMPARED_SOURCES = 32


def repeated_steps(sources: Sequence[MemoryRecord]) -> float:
    """The share of the sources' steps that another source also takes (Jaccard of content
    words at least ``SAME_STEP``), over the first ``COMPARED_STEPS`` steps of the first
    ``COMPARED_SOURCES`` sources."""
    steps = [
        [frozenset(content_words(piece)) for piece in steps_of(s.content)[:COMPARED_STEPS]]
        for s in sources[:COMPARED_SOURCES]
    ]
    total = repeated = 0
    for n, own in enumerate(steps):
        others = [step for m, theirs in enumerate(steps) if m != n for step in theirs if step]
        for step in own:
            if not step:
                continue
            total += 1
            repeated += any(len(step & o) >= SAME_STEP * len(step | o) for o in others)
    return repeated / total if total else 0.0


def _mean_similarity(vectors: NDArray[np.float32]) -> float:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms == 0, 1.0, norms)
    sims = unit @ unit.T
    n = sims.shape[0]
    return float((sims.sum() - np.trace(sims)) / (n * (n - 1)))


def merged_steps(sources: Sequence[MemoryRecord]) -> list[str]:
    """The distinct steps of the sources in the order first seen: a step that repeats one
    kept already (no new fact, mostly the same words) is dropped; a variant that brings a
    fact is kept too, so nothing is lost."""
    texts = [step for source in sources for step in steps_of(source.content)]
    chosen = select_clauses(texts)  # one pass over every step: repeats across sources go
    kept = [" ".join(parts) for parts in chosen if parts]
    return [step[:MAX_STEP_CHARS] for step in kept][:MAX_STEPS]


def most_closed(sources: Sequence[MemoryRecord]) -> MemoryRecord:
    """The source with the most closed access level (the first of equals)."""
    return max(sources, key=lambda s: s.access_level.rank)


def combined_confidence(sources: Sequence[MemoryRecord], writers: Sequence[str]) -> float:
    """Noisy-OR of the sources' confidence, one term per writing agent (its surest source):
    repeats by one agent corroborate nothing, whatever event times it gives them."""
    best: dict[str, float] = {}
    for source, writer in zip(sources, writers, strict=True):
        best[writer] = max(best.get(writer, 0.0), source.source_confidence)
    doubt = 1.0
    for confidence in best.values():
        doubt *= 1.0 - confidence
    return round(min(0.99, 1.0 - doubt), 6)


def output_type(action: ConsolidationAction, sources: Sequence[MemoryRecord]) -> MemoryType:
    """The type of the consolidated record."""
    if action is ConsolidationAction.SKILL:
        return MemoryType.SKILL
    if action is ConsolidationAction.PROMOTE:
        return MemoryType.BELIEF
    if action is ConsolidationAction.COMPRESS:
        return sources[0].type
    types = [s.type for s in sources]
    if MemoryType.EPISODE in types:
        return MemoryType.EPISODE
    return max(set(types), key=lambda t: (types.count(t), t.value))


def style_of(action: ConsolidationAction) -> Style:
    """The summary style of an action (skills list their steps instead)."""
    return {
        ConsolidationAction.MERGE: Style.NARRATIVE,
        ConsolidationAction.PROMOTE: Style.BELIEF,
        ConsolidationAction.COMPRESS: Style.COMPRESS,
        ConsolidationAction.SKILL: Style.NARRATIVE,
    }[action]


def source_texts(sources: Sequence[MemoryRecord], action: ConsolidationAction) -> list[SourceText]:
    """The sources as the summariser sees them: in a merge, a decision with its rationale
    (the narrative has no metadata to hold it; a compressed decision keeps its own)."""
    return [
        SourceText(_told(s) if action is ConsolidationAction.MERGE else s.content, _at(s))
        for s in sources
    ]


def _told(source: MemoryRecord) -> str:
    """A decision's content and, unless it says it already, its rationale."""
    rationale = source.metadata.get("rationale") if source.type is MemoryType.DECISION else None
    if not isinstance(rationale, str) or not rationale.strip():
        return source.content
    why = " ".join(rationale.split()).rstrip(".")
    if why.casefold() in " ".join(source.content.split()).casefold():
        return source.content
    return f"{source.content.rstrip()} Rationale: {why}."


def _at(source: MemoryRecord) -> datetime:
    return source.event_time or source.ingestion_time


def skill_text(sources: Sequence[MemoryRecord], steps: Sequence[str]) -> str:
    """A skill's content: its steps, then whatever else the sources said that no step holds."""
    first = min(s.event_time or s.ingestion_time for s in sources)
    last = max(s.event_time or s.ingestion_time for s in sources)
    lines = [
        f"Procedure carried out {len(sources)} times between {first:%Y-%m-%d} and {last:%Y-%m-%d}:"
    ]
    lines += [f"{n}. {step}" for n, step in enumerate(steps, start=1)]
    chosen = select_clauses([*steps, *(s.content for s in sources)])
    notes = [clause for kept in chosen[len(steps) :] for clause in kept]
    if notes:
        lines.append("Notes: " + " ".join(c if c.endswith(".") else f"{c}." for c in notes))
    return "\n".join(lines)


def carried_metadata(
    action: ConsolidationAction, sources: Sequence[MemoryRecord]
) -> dict[str, Any]:
    """Metadata the consolidated record keeps from its sources (a compressed record keeps
    its own, which its type's schema may require)."""
    if action is ConsolidationAction.COMPRESS:
        return dict(sources[0].metadata)
    return {}


def level_of(sources: Sequence[MemoryRecord]) -> AccessLevel:
    """The consolidated record's access level: the most closed of the sources'."""
    return most_closed(sources).access_level
