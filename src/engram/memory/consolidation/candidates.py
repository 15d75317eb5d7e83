"""Candidates: the fast-path records a pass reads, their topics and what each topic becomes.

Records of the *topic types* (episode, belief, reflection, skill) are clustered into topics
(:mod:`.topics`), and so are decisions, the choices taken in the course of a thread: a
decision stays in a topic only beside ``THREAD_EPISODES`` episodes (a thread told by
moments), and is a topic of its own otherwise (a
topic of decisions alone would have no one rationale, and two decisions that disagree are
the conflict judgement's to find). Every other record is a topic of its own (a preference,
an entity or a resource is never merged with another, only compressed). Each topic then gets
its action and its consolidated text (:mod:`.actions`, :mod:`.summarize`). A topic larger
than ``max_topic`` is cut, in event-time order, into pieces of that size.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

import numpy as np
import structlog
from numpy.typing import NDArray

from engram.infra.db import DatabaseAdapter
from engram.infra.sql import load_queries
from engram.memory import store
from engram.memory.conflict.detection import DECISIVE, ConflictDetector
from engram.memory.consolidation import actions
from engram.memory.consolidation.actions import ActionParams
from engram.memory.consolidation.facts import content_words, entities
from engram.memory.consolidation.model import (
    ConsolidationAction,
    ConsolidationCandidate,
    SkipReason,
)
from engram.memory.consolidation.summarize import (
    ExtractiveSummarizer,
    SourceText,
    Style,
    Summarizer,
    Summary,
)
from engram.memory.consolidation.topics import TopicItem, TopicParams, cluster
from engram.memory.gate import pii
from engram.memory.schemas import content_problems, looks_imperative
from engram.memory.types import AccessLevel, MemoryRecord, MemoryType

SQL = load_queries("engram.memory.consolidation", "candidates.sql", shared=store.FRAGMENTS)
log = structlog.get_logger("engram.memory.consolidation")
TOPIC_TYPES = frozenset(
    {MemoryType.EPISODE, MemoryType.BELIEF, MemoryType.REFLECTION, MemoryType.SKILL}
)
#: Clustered with the topic types, but kept in a topic only beside ``THREAD_EPISODES``
#: episodes: one episode and a decision alike are as often two notes that share a date.
THREAD_TYPES = frozenset({MemoryType.DECISION})
THREAD_EPISODES = 2


@dataclass(frozen=True, slots=True)
class PlannerSettings:
    """Clustering and action knobs, and the largest topic one record may summarise."""

    topics: TopicParams = field(default_factory=TopicParams)
    actions: ActionParams = field(default_factory=ActionParams)
    #: A record summarising more sources reads as more numbers than the PII screen reads in
    #: one text (``pii.contact.MAX_PHONE_RUNS``): a dated narrative of 32 of the benchmarks'
    #: agent notes was reported unread and quarantined, and a batch leaves out a topic whose
    #: summary would be stored above its sources' level, so such topics were never
    #: consolidated. Narratives of 16 of them read clean; 24 did too, 16 leaves a margin.
    max_topic: int = 16


@dataclass(frozen=True, slots=True)
class Loaded:
    """A candidate record and its embedding."""

    record: MemoryRecord
    embedding: NDArray[np.float32]
    #: The agent the audit log says wrote this version (its ``source_agent`` is a claim).
    writer: str = ""


def topics_of(
    loaded: Sequence[Loaded], edges: Sequence[tuple[UUID, UUID]], params: TopicParams
) -> list[list[int]]:
    """The topics of ``loaded`` as index lists (singletons included)."""
    index = {item.record.id: n for n, item in enumerate(loaded)}
    items = [
        TopicItem(
            key=n,
            # never across namespaces, nor across access levels: a summary is readable by
            # exactly the readers of each of its sources, so no reader loses a fact it had
            partition=f"{item.record.namespace}/{item.record.access_level.value}",
            embedding=item.embedding,
            entities=entities(item.record.content),
            words=content_words(item.record.content),
            event_time=item.record.event_time or item.record.ingestion_time,
        )
        for n, item in enumerate(loaded)
        if item.record.type in TOPIC_TYPES | THREAD_TYPES
    ]
    pairs = [(index[a], index[b]) for a, b in edges if a in index and b in index]
    topics = [
        piece
        for topic in cluster(items, edges=pairs, params=params)
        for piece in _threads(loaded, topic)
    ]
    topics += [
        [n] for n, item in enumerate(loaded) if item.record.type not in TOPIC_TYPES | THREAD_TYPES
    ]
    return topics


def _threads(loaded: Sequence[Loaded], topic: list[int]) -> list[list[int]]:
    """``topic`` as it is kept: whole when it holds no decision or tells a thread (enough
    episodes); else its decisions each alone and the rest together."""
    kinds = [loaded[n].record.type for n in topic]
    if not set(kinds) & THREAD_TYPES or _tells_a_thread(kinds):
        return [topic]
    rest = [n for n in topic if loaded[n].record.type not in THREAD_TYPES]
    alone = [[n] for n in topic if loaded[n].record.type in THREAD_TYPES]
    return ([rest] if rest else []) + alone


def _tells_a_thread(kinds: Sequence[MemoryType]) -> bool:
    return sum(kind is MemoryType.EPISODE for kind in kinds) >= THREAD_EPISODES


class Planner:
    """Reads candidates and turns topics into :class:`ConsolidationCandidate` proposals."""

    def __init__(
        self,
        db: DatabaseAdapter,
        summarizer: Summarizer,
        settings: PlannerSettings,
        conflicts: ConflictDetector | None = None,
    ) -> None:
        self._db = db
        self._conflicts = conflicts or ConflictDetector()
        self._summarizer = summarizer
        self._extractive = ExtractiveSummarizer()
        self._settings = settings

    async def load(
        self, *, since: datetime | None, limit: int, level: AccessLevel | None = None
    ) -> tuple[list[Loaded], int]:
        """The candidate records (oldest first; of ``level`` only, unless None) and how many
        lack an embedding."""
        types = [t.value for t in MemoryType]
        name = None if level is None else level.value
        rows = await self._db.fetch(SQL["candidates"], types, since, limit, name)
        loaded = [
            Loaded(store.record_from_row(row), _vector(row["embedding"]), row["writer"] or "")
            for row in rows
        ]
        unembedded = await self._db.fetchval(SQL["unembedded_candidates"], types, since, name)
        return loaded, int(unembedded or 0)

    async def edges(self, loaded: Sequence[Loaded]) -> list[tuple[UUID, UUID]]:
        """``relates_to`` edges among the candidates."""
        if not loaded:
            return []
        rows = await self._db.fetch(SQL["relates_to_edges"], [item.record.id for item in loaded])
        return [(row["source_id"], row["target_id"]) for row in rows]

    async def plan(
        self,
        *,
        since: datetime | None,
        limit: int,
        min_topic: int,
        level: AccessLevel | None = None,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        ready: Callable[[ConsolidationCandidate], None] | None = None,
        crossed: Callable[[], None] | None = None,
    ) -> tuple[list[ConsolidationCandidate], Counter[str], int]:
        """Candidates of the records (of ``level``; every level when None) ingested since
        ``since`` (all: None), topics of at least ``min_topic`` records only; with the
        skipped counts and the records considered. Topics, and pieces of a large topic, not
        reached by ``deadline`` (by ``clock``) are counted ``timed_out``, and an outside
        summariser's call is cut off there. ``ready`` is handed each candidate as soon as
        it is planned (the engine starts its batch meanwhile); ``crossed`` is called at the
        end when the deadline stopped the planning: topics or pieces were left ``timed_out``,
        or an outside call ended there (that piece planned with the extractive text, which
        no ``timed_out`` count shows when it was the last)."""
        outside = not isinstance(self._summarizer, ExtractiveSummarizer)
        loaded, unembedded = await self.load(since=since, limit=limit, level=level)
        skipped: Counter[str] = Counter()
        if unembedded:
            skipped[SkipReason.NO_EMBEDDING.value] += unembedded
        planned: list[ConsolidationCandidate] = []
        edges = await self.edges(loaded)
        # CPU-bound (NumPy, SciPy, regular expressions): off the event loop, so the writes of
        # a kernel serving agents meanwhile are not held up.
        topics = await asyncio.to_thread(topics_of, loaded, edges, self._settings.topics)
        late = False  # once out of time, the clock is not read again
        for topic in topics:
            late = late or (deadline is not None and clock() > deadline)
            if late:
                skipped[SkipReason.TIMED_OUT.value] += len(topic)
                continue
            if len(topic) < min_topic:
                skipped[SkipReason.TOO_FEW.value] += len(topic)
                continue
            for n, piece in enumerate(self._pieces([loaded[i] for i in topic], skipped)):
                # each piece of a large topic is an outside call: the clock is read again
                late = late or (n > 0 and deadline is not None and clock() > deadline)
                if late:
                    skipped[SkipReason.TIMED_OUT.value] += len(piece)
                    continue
                made = await self.candidate(piece, deadline=deadline, clock=clock)
                if outside and deadline is not None and clock() > deadline:
                    late = True  # its call was cut there: nothing more is begun
                if isinstance(made, SkipReason):
                    skipped[made.value] += len(piece)
                else:
                    planned.append(made)
                    if ready is not None:
                        ready(made)
        if late and crossed is not None:
            crossed()
        return planned, skipped, len(loaded) + unembedded

    def _pieces(self, topic: list[Loaded], skipped: Counter[str]) -> list[list[Loaded]]:
        """``topic`` in event-time order, cut into pieces of at most ``max_topic``, each
        without the decisions it leaves alone (:meth:`_choices_apart`, counted singletons)."""
        ordered = sorted(topic, key=lambda x: (_when(x.record), str(x.record.id)))
        size = self._settings.max_topic
        pieces = []
        for start in range(0, len(ordered), size):
            piece, choices = self._choices_apart(ordered[start : start + size])
            if choices:
                skipped[SkipReason.SINGLETON.value] += len(choices)
            if piece:
                pieces.append(piece)
        return pieces

    def _choices_apart(self, piece: list[Loaded]) -> tuple[list[Loaded], list[Loaded]]:
        """``piece`` without its decisions, and those decisions, when its episodes tell no
        thread (a piece of a large topic may hold too few) or the rest is a pattern or a
        routine (promoted, or a skill): a belief or a skill states what recurs, and a choice
        taken once is no part of it, so it stays as it is. Otherwise ``piece`` whole: a
        thread is merged with the decisions taken in it."""
        choices = [item for item in piece if item.record.type in THREAD_TYPES]
        rest = [item for item in piece if item.record.type not in THREAD_TYPES]
        if not choices:
            return piece, []
        if not _tells_a_thread([item.record.type for item in rest]):
            return rest, choices
        if len(rest) >= 2:
            vectors = np.stack([item.embedding for item in rest])
            chosen = actions.choose([item.record for item in rest], vectors, self._settings.actions)
            if chosen in _JOINED_CLAIMS:
                return rest, choices
        return piece, []

    def _disagree(self, topic: Sequence[Loaded]) -> bool:
        """Whether the conflict judgement the Gate uses finds any two claims incompatible: each
        source against the first and against the one before it (event-time order); episodes
        are occurrences, not claims about one state, and are not compared."""
        pairs = {(0, n) for n in range(1, len(topic))} | {(n - 1, n) for n in range(1, len(topic))}
        for a, b in sorted(pairs):
            older, newer = topic[a], topic[b]
            if MemoryType.EPISODE in (older.record.type, newer.record.type):
                continue  # occurrences: each is true of its own time, values may differ
            similarity = float(np.dot(older.embedding, newer.embedding))
            if self._conflicts.incompatibility(older.record, newer.record, similarity) >= DECISIVE:
                return True
        return False

    async def candidate(
        self,
        topic: Sequence[Loaded],
        *,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> ConsolidationCandidate | SkipReason:
        """What one topic (in event-time order) becomes, or why it stays as it is. An outside
        summariser gets until ``deadline`` (by ``clock``, in seconds) at most: past it, the
        extractive text is used (:meth:`_summary`)."""
        sources = [item.record for item in topic]
        vectors = np.stack([item.embedding for item in topic])
        params = self._settings.actions
        action = actions.choose(sources, vectors, params)
        if action is None:
            return SkipReason.SINGLETON if len(sources) == 1 else SkipReason.TOO_FEW
        if action in _JOINED_CLAIMS and self._disagree(topic):
            return SkipReason.CONFLICTING
        metadata = actions.carried_metadata(action, sources)
        if action is ConsolidationAction.SKILL:
            steps = actions.merged_steps(sources)
            if not steps:
                action = ConsolidationAction.MERGE
            else:
                metadata["steps"] = steps
                content, summarizer = actions.skill_text(sources, steps), "extractive@1"
        kind = actions.output_type(action, sources)
        if action is not ConsolidationAction.SKILL:
            # quarantined text never leaves the kernel for an outside summariser
            private = actions.level_of(sources) is AccessLevel.SENSITIVE
            summarizer_of = self._extractive if private else self._summarizer
            summary = await self._summary(
                summarizer_of,
                actions.source_texts(sources, action),
                actions.style_of(action),
                kind,
                None if deadline is None else lambda: deadline - clock(),
            )
            content, summarizer = summary.text, summary.summarizer
        content = _stated(kind, content)
        if action is ConsolidationAction.COMPRESS:
            before = len(sources[0].content.split())
            if len(content.split()) > before * (1 - params.compress_min_saving):
                return SkipReason.NOT_SHORTER
        writers = [item.writer or item.record.source_agent for item in topic]
        confidence = (
            actions.combined_confidence(sources, writers)
            if action is ConsolidationAction.PROMOTE
            else min(s.source_confidence for s in sources)  # as sure as its weakest claim
        )
        metadata["consolidation"] = {
            "action": action.value,
            "sources": len(sources),
            "summarizer": summarizer,
            "first_event": _when(sources[0]).isoformat(),
            "last_event": _when(sources[-1]).isoformat(),
        }
        return ConsolidationCandidate(
            action=action,
            sources=tuple(sources),
            proposal_type=kind,
            content=content,
            metadata=metadata,
            access_level=actions.level_of(sources),
            confidence=confidence,
            summarizer=summarizer,
        )

    async def _summary(
        self,
        summarizer: Summarizer,
        sources: Sequence[SourceText],
        style: Style,
        kind: MemoryType,
        remaining: Callable[[], float] | None,
    ) -> Summary:
        """``summarizer``'s text, or the extractive one when an outside summariser has not
        answered within ``remaining()`` seconds (None: no limit but its own timeout; the
        clock is read for an outside summariser only) or answered text a record of ``kind``
        cannot hold (a NUL, a lone surrogate, over 16,000 characters, against its type's
        rules) or anything the PII screen finds (an address it added): the Gate
        would refuse or quarantine it in every pass, and the topic would never be
        consolidated. The timeout bounds one call, and a large topic is many calls: without
        the deadline a pass (and every more closed level after it) could run past its
        limit by pieces times timeout."""
        if isinstance(summarizer, ExtractiveSummarizer):
            return await summarizer.summarize(sources, style)
        left = None if remaining is None else remaining()
        summary = None
        if left is None:
            summary = await summarizer.summarize(sources, style)
        elif left > 0:
            try:
                async with asyncio.timeout(left):
                    summary = await summarizer.summarize(sources, style)
            except TimeoutError:
                log.warning("consolidation.summarizer_out_of_time", sources=len(sources))
        if summary is not None:
            if summary.summarizer == self._extractive.name:
                return summary  # the outside one's own fallback
            stated = _stated(kind, summary.text)
            problems = content_problems(kind, stated)
            if not problems and not await asyncio.to_thread(_holds_pii, stated):
                return summary
            log.info("consolidation.summary_unstorable", problems=problems or ["pii"])
        return await self._extractive.summarize(sources, style)


#: Actions whose output states one claim for all its sources (a promoted belief, one skill):
#: sources that disagree must not be joined. A merged narrative keeps every source's account
#: in time order, so a later account that changes an earlier one is told, not hidden.
_JOINED_CLAIMS = frozenset({ConsolidationAction.PROMOTE, ConsolidationAction.SKILL})


def _holds_pii(text: str) -> bool:
    """Whether the PII screen finds anything in ``text``, as the Gate would in the record
    (an error of the screen counts as a finding, as it does there). The Gate would
    quarantine such a summary above its sources' level, and the topic would be left out of
    every pass; the span may be one the outside summariser made (an address, or a number its
    wording turned into an identifier), which the extractive text, saying only what the
    sources said, does not hold."""
    try:
        return bool(pii.scan(text))
    except Exception:  # noqa: BLE001 - the screen's failure is a reason to keep the extract
        log.warning("consolidation.summary_pii_scan_failed")
        return True


def _stated(kind: MemoryType, content: str) -> str:
    """``content`` as a record of ``kind`` states it: a belief states what is so (its schema),
    so one that reads as an instruction is said to be observed."""
    if kind is MemoryType.BELIEF and looks_imperative(content):
        return f"Observed: {content}"
    return content


def _when(record: MemoryRecord) -> datetime:
    return record.event_time or record.ingestion_time


def _vector(value: object) -> NDArray[np.float32]:
    if hasattr(value, "to_numpy"):
        return np.asarray(value.to_numpy(), dtype=np.float32)
    return np.asarray(value, dtype=np.float32)
