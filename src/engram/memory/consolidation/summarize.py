"""Summarisers: the text of a consolidated record, behind the :class:`Summarizer` port.

:class:`ExtractiveSummarizer` (``extractive@1``, the default) is deterministic and needs no
model: it cuts the sources into clauses (:func:`~.facts.clauses`) and keeps, in order, every
clause that carries a fact not kept yet or enough words not kept yet; it drops only clauses
whose facts are all kept already and at least ``NEAR_DUPLICATE_COVERAGE`` of whose content
words are too (a near-duplicate of what is kept). A compressed record is cut finer: filler
phrases ("to be honest", "as I said") go, and so do the comma-separated parts of a clause
that bring no new fact and mostly repeat what is kept (:func:`compressed_clauses`).

:class:`CheckedSummarizer` asks a :class:`TextGenerator` (an LLM behind an OpenAI-compatible
endpoint, configured by the operator) for abstractive text, then checks it: when the answer
fails, is empty, is longer than a record holds, loses any fact of the sources
(:func:`~.facts.lost_facts`) or states a fact none of them holds, the extractive text is
used instead. The name recorded with the record says which one wrote it. Sensitive sources
are never sent (the planner summarises them extractively).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

import structlog

from engram.errors import EngramError
from engram.memory.consolidation.facts import (
    clauses,
    content_words,
    fact_keys,
    lost_facts,
    normalise,
)
from engram.memory.schemas import MAX_CONTENT_CHARS

log = structlog.get_logger("engram.memory.consolidation.summarize")

NEAR_DUPLICATE_COVERAGE = 0.75
#: A compressed record drops a part at least this much of whose words are kept already, and
#: a part without a fact of this many content words or fewer.
COMPRESS_COVERAGE = 0.5
COMPRESS_SCRAP_WORDS = 2
_PARTS = re.compile(r",\s+|\s+[(\u2013\u2014-]\s*|\)\s*")
_FILLER = re.compile(
    r"\b(?:to be (?:honest|fair|clear)|as I (?:said|mentioned)(?: (?:before|earlier))?|"
    r"just to (?:be clear|repeat|reiterate)|I (?:think|guess|believe|suppose)(?: that)?|"
    r"basically|honestly|actually|essentially|literally|you know|kind of|sort of|"
    r"more or less|so to speak|if I remember (?:correctly|right)|needless to say|"
    r"in any case|at the end of the day|for what it'?s worth|I would say(?: that)?|"
    r"it (?:seems|appears) (?:that|like)|as far as I (?:know|can tell))\b,?\s*",
    re.IGNORECASE,
)


class Style(StrEnum):
    """The shape of the text a summary takes."""

    NARRATIVE = "narrative"  # merge: what happened, in event-time order, each moment dated
    BELIEF = "belief"  # promote: the observation once, with what varied and how often seen
    COMPRESS = "compress"  # one record in fewer words


@dataclass(frozen=True, slots=True)
class SourceText:
    """One source as a summariser sees it."""

    text: str
    event_time: datetime


@dataclass(frozen=True, slots=True)
class Summary:
    """A summariser's text and the name of the summariser that wrote it."""

    text: str
    summarizer: str


class Summarizer(Protocol):
    """Writes the text of a consolidated record from its sources (in the order given)."""

    async def summarize(self, sources: Sequence[SourceText], style: Style) -> Summary:
        """The consolidated text."""
        ...


class TextGenerator(Protocol):
    """A text-completion model (an OpenAI-compatible endpoint, for instance)."""

    @property
    def name(self) -> str:
        """The model, as recorded with what it wrote."""
        ...

    async def complete(self, instructions: str, text: str) -> str:
        """The model's answer to ``instructions`` applied to ``text``."""
        ...


class _Kept:
    """What the summary holds so far: facts, content words and clauses."""

    def __init__(self, coverage: float, min_words: int = 0) -> None:
        self.facts: set[str] = set()
        self.words: set[str] = set()
        self.units: set[str] = set()
        self._coverage = coverage
        self._min_words = min_words

    def take(self, unit: str) -> bool:
        """Keep ``unit`` unless it repeats what is kept (True when kept)."""
        words = content_words(unit)
        found = fact_keys(unit)
        key = normalise(unit)
        if (not words and not found) or key in self.units:
            return False
        if not found - self.facts:
            if len(words) <= self._min_words:
                return False  # a scrap without a fact ("just a note")
            novel = len(words - self.words) / len(words) if words else 0.0
            if novel < 1.0 - self._coverage:
                return False
        self.facts |= found
        self.words |= words
        self.units.add(key)
        return True


def select_clauses(texts: Sequence[str]) -> list[list[str]]:
    """For each text, the clauses the extractive summary keeps (see the module docstring)."""
    kept = _Kept(NEAR_DUPLICATE_COVERAGE)
    return [[clause for clause in clauses(text) if kept.take(clause)] for text in texts]


def compressed_clauses(text: str) -> list[str]:
    """The clauses of one verbose text with filler cut and, inside each, the comma-separated
    parts that only repeat what is kept dropped (``COMPRESS_COVERAGE``); no fact is lost."""
    kept = _Kept(COMPRESS_COVERAGE, min_words=COMPRESS_SCRAP_WORDS)
    result = []
    for clause in clauses(text):
        parts = [_without_filler(part) for part in _PARTS.split(clause) if part.strip()]
        mine = [part.rstrip(".,;:") for part in parts if kept.take(part)]
        if mine:
            joined = ", ".join(mine)
            result.append(joined[0].upper() + joined[1:])
    return result


def _without_filler(clause: str) -> str:
    cleaned = _FILLER.sub("", clause).strip(" ,")
    if not cleaned:
        return clause
    if fact_keys(cleaned) != fact_keys(clause):
        return clause  # never at the cost of a fact
    return cleaned


def _sentence(parts: Sequence[str]) -> str:
    """Clauses as sentences: each capitalised and ended (a clause cut at a semicolon is one)."""
    ended = [p if p.endswith((".", "!", "?", ":")) else f"{p}." for p in parts]
    return " ".join(p[0].upper() + p[1:] for p in ended if p).strip()


class ExtractiveSummarizer:
    """``extractive@1``: see the module docstring."""

    name = "extractive@1"

    async def summarize(self, sources: Sequence[SourceText], style: Style) -> Summary:
        text = await asyncio.to_thread(self.text, sources, style)  # CPU-bound: off the loop
        return Summary(text, self.name)

    def text(self, sources: Sequence[SourceText], style: Style) -> str:
        """The extractive text (synchronous: pure computation)."""
        if style is Style.COMPRESS:
            return _sentence([c for s in sources for c in compressed_clauses(s.text)])
        chosen = select_clauses([s.text for s in sources])
        if style is Style.NARRATIVE:
            lines = [
                f"{source.event_time:%Y-%m-%d %H:%M}: {_sentence(kept)}"
                for source, kept in zip(sources, chosen, strict=True)
                if kept
            ]
            return "\n".join(lines)
        body = _sentence([clause for kept in chosen for clause in kept])
        if len(sources) > 1:  # a belief: say how often it was seen
            first = min(s.event_time for s in sources)
            last = max(s.event_time for s in sources)
            body += (
                f" (Observed {len(sources)} times between {first:%Y-%m-%d} and {last:%Y-%m-%d}.)"
            )
        return body


class CheckedSummarizer:
    """An LLM's summary where it keeps every fact, else the extractive one."""

    def __init__(self, generator: TextGenerator, fallback: ExtractiveSummarizer) -> None:
        self._generator = generator
        self._fallback = fallback

    async def summarize(self, sources: Sequence[SourceText], style: Style) -> Summary:
        texts = [s.text for s in sources]
        joined = "\n".join(f"[{s.event_time:%Y-%m-%d %H:%M}] {s.text}" for s in sources)
        try:
            answer = (await self._generator.complete(_INSTRUCTIONS[style], joined)).strip()
        except EngramError as exc:
            log.warning("consolidation.summarizer_failed", error=type(exc).__name__)
            answer = ""
        if len(answer) > MAX_CONTENT_CHARS:  # no record holds it: not worth checking
            log.info("consolidation.summary_refused", chars=len(answer))
            answer = ""
        if answer:
            lost = lost_facts(texts, answer)
            known = frozenset().union(*(fact_keys(text) for text in texts))
            invented = fact_keys(answer) - known
            if not lost and not invented:
                return Summary(answer, f"llm:{self._generator.name}")
            log.info("consolidation.summary_refused", lost=len(lost), invented=len(invented))
        return await self._fallback.summarize(sources, style)


_KEEP = (
    "Keep every number, date, time, name, identifier, version, price, path and URL exactly "
    "as written. Do not add anything that is not in the records. Answer with the text only."
)
_INSTRUCTIONS = {
    Style.NARRATIVE: "Merge these dated records of one thread of events into one short "
    f"narrative in time order. {_KEEP}",
    Style.BELIEF: "These records observe the same thing on different occasions. State it "
    f"once as a plain declarative statement, noting what varied. {_KEEP}",
    Style.COMPRESS: f"Rewrite this record in as few words as possible. {_KEEP}",
}
