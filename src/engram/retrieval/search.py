"""Search: nearest neighbours by embedding, ordered with the lexical evidence of the query.

The vector leg returns up to ``depth`` versions the caller may read, nearest first, each with
its cosine similarity and which of the query's words it holds (one statement), and the
candidates are ordered by similarity + ``lexical_weight`` * their rarity-weighted share of
those words + a weighted log probability that a record of their type answers the question
(:mod:`engram.retrieval.ranking`, :mod:`engram.retrieval.type_prior`). For that order the
question's embedding is first moved by the learned query adapter
(:mod:`engram.retrieval.adapter`); the statement measures each candidate against the model's
own question too, and that similarity is the one a hit carries. A full-text leg on the
query's rare terms (:mod:`engram.retrieval.terms`) can run beside it and be fused by reciprocal rank
(``SearchTuning.text_leg``); it is off by default, because on the labelled set it found
nothing the vector leg missed and at 100,000 records it multiplied the search time (ADR-015).
If the query cannot be embedded the text leg answers alone, on every word of the query, in
``ts_rank_cd`` order, and the result says so (``degraded``).

The order says where a hit stands among the others, not how well it matches. Each hit
therefore also carries its *similarity*, the cosine similarity of the query's embedding to the
version's (clamped to [0, 1]), which is what clients see as a hit's ``score`` and what
``min_score`` compares with, and its *relevance*, the chance that a hit like it answers the
query (calibrated on labelled queries, :mod:`engram.retrieval.relevance`). The floor is applied
to the candidates, which hold only versions the caller may read, before ``limit`` is taken,
so a caller's hits, their number, their order, their scores and their relevance depend on
nothing it may not read. As-of and ``include_superseded`` searches keep the vector leg's
order: their candidates include versions that may not resolve for the caller, which must not
weigh the words (nor, in an as-of search, set the best value the relevance is measured
against). A hit whose similarity is unknown (the query could not be embedded, or the version
has no embedding) is kept, with no similarity and no relevance.

Current heads are searched by default: the versions a record read answers now (forgotten and,
unless asked for, consolidated heads left out; validity not filtered, as in every read without
an event instant, ADR-009). With ``as_of_ingestion`` / ``as_of_event`` the legs search the
versions known at that instant, and each record found is then resolved with the as-of rule of
:mod:`engram.memory.temporal`, so a search at T returns what the kernel held at T and one with
``as_of_event=now`` what holds now. Forgotten records are never returned.
``include_superseded`` searches every version (each hit is one version).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from uuid import UUID

import structlog

from engram.errors import EngramError, ValidationFailed
from engram.infra.db import DatabaseAdapter, Row
from engram.infra.embeddings import EmbeddingAdapter
from engram.infra.sql import exact_scan, load_queries
from engram.memory.temporal import TemporalEngine, readable_levels
from engram.memory.types import CallerIdentity, MemoryRecord, MemoryStatus, MemoryType
from engram.observability.metrics import EngramMetrics
from engram.retrieval import type_prior
from engram.retrieval.adapter import adapt, learned_for
from engram.retrieval.arguments import (
    caller_problems,
    filter_problems,
    query_problems,
    scope_problems,
)
from engram.retrieval.budget import FeedbackBudget
from engram.retrieval.feedback import FeedbackReceipt, rate
from engram.retrieval.ranking import Candidate, fuse, lexical_shares, rerank
from engram.retrieval.relevance import SIMILARITY_ONLY, beside_best, candidate_relevance
from engram.retrieval.terms import MIN_PIECES, distinctive_terms
from engram.retrieval.type_prior import TYPE_PRIOR_WEIGHT, log_prior

log = structlog.get_logger("engram.retrieval")
SQL = load_queries("engram.retrieval.sql", "search.sql")
#: The vector legs measuring every version their filter passes (no index, no early stop).
EXACT = {name: exact_scan(SQL[name]) for name in SQL if name.startswith("vector_")}

#: The similarity floor adapters apply unless the client sends another ``min_score``: chosen on
#: the dev half of ``tests/data/mcp_recall`` (the best balance of answering the queries that
#: have an answer and returning nothing for those that have none; docs/mcp.md has both halves).
DEFAULT_MIN_SCORE = 0.38
VECTOR = "vector"
TEXT = "text"
#: Most versions the caller may read that the text leg's terms may match; more, and the terms
#: are not rare for this caller, the leg is dropped (with an embedding). The SQL stops counting
#: one past it (``LIMIT 201`` in search.sql).
MAX_TEXT_MATCHES = 200
#: How much a full lexical share adds to a similarity (chosen on the dev half of
#: tests/data/retrieval with benchmarks/retrieval_eval.py --grid).
LEXICAL_WEIGHT = 0.3
#: The deepest window an as-of search widens to (from ``limit * 4``, at least 40 and at most
#: 200, four times at a time) while it finds fewer than ``limit`` records: its candidates are
#: versions, and many may belong to a few records or resolve to nothing at the instant asked.
#: Each record in the window is resolved with one query, so this also bounds those queries.
AS_OF_MAX_DEPTH = 800
#: Where the window's size sits among a leg's arguments (``$6``, its ``LIMIT``, search.sql).
DEPTH_ARG = 4


@dataclass(frozen=True, slots=True)
class SearchTuning:
    """How the legs are run and fused (the defaults are the product's; the evaluation,
    ``benchmarks/retrieval_eval.py``, compares others on the dev half)."""

    #: On: a text leg on the query's rare terms beside the vector leg (ADR-015: no gain on the
    #: labelled set, about twice the search time at 100,000 records). Off: the text leg runs only
    #: when the query has no embedding.
    text_leg: bool = False
    #: Fewest tokenizer pieces that make a plain word a text-leg term (engram.retrieval.terms).
    min_pieces: int = MIN_PIECES
    #: λ of the order by similarity + λ * lexical share (engram.retrieval.ranking); 0: the
    #: fused order of the legs.
    lexical_weight: float = LEXICAL_WEIGHT
    #: On: a search that weighs the words orders by the question's embedding as the learned
    #: query adapter moves it (engram.retrieval.adapter), when the adapter was learned for the
    #: kernel's model; a hit's similarity and the floor use the model's own embedding.
    query_adapter: bool = True
    #: On: such a search also adds TYPE_PRIOR_WEIGHT times the log probability that a record of
    #: the candidate's type answers the question (engram.retrieval.type_prior).
    type_prior: bool = True


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One record found: the value hits are ordered by (``fused``: similarity + λ * lexical
    share for current records, else the legs' reciprocal-rank value), the rank each leg gave
    it (1 = best), its similarity to the query (cosine, 0-1) and its calibrated relevance
    (0-1, :mod:`engram.retrieval.relevance`); both None when unknown."""

    record: MemoryRecord
    fused: float
    ranks: dict[str, int]
    similarity: float | None = None
    relevance: float | None = None

    @property
    def legs(self) -> tuple[str, ...]:
        """Which legs found it (``vector``, ``text``)."""
        return tuple(sorted(self.ranks))


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The hits, best first, and how the search went."""

    hits: list[SearchHit]
    degraded: bool = False
    embed_ms: float = 0.0
    query_ms: float = 0.0
    legs: dict[str, int] = field(default_factory=dict)


def _with_relevance(hits: list[SearchHit]) -> list[SearchHit]:
    """The hits of an as-of search with their relevance, by similarity beside the best hit's
    (none for a hit of unknown similarity)."""
    similarity = {hit.record.id: hit.similarity for hit in hits if hit.similarity is not None}
    relevance = beside_best(similarity, SIMILARITY_ONLY)
    return [replace(hit, relevance=relevance.get(hit.record.id)) for hit in hits]


def _similarities(distances: dict[UUID, Any]) -> dict[UUID, float]:
    """Cosine distances as similarities in [0, 1] (a version without an embedding: none)."""
    return {
        item: min(1.0, max(0.0, 1.0 - float(d))) for item, d in distances.items() if d is not None
    }


def _excluded(include_consolidated: bool) -> list[str]:
    ending = [MemoryStatus.FORGOTTEN.value]
    if not include_consolidated:
        ending.append(MemoryStatus.CONSOLIDATED.value)
    return ending


class Retrieval:
    """Search and feedback for one kernel."""

    def __init__(
        self,
        db: DatabaseAdapter,
        embeddings: EmbeddingAdapter,
        temporal: TemporalEngine,
        *,
        metrics: EngramMetrics | None = None,
        tuning: SearchTuning | None = None,
    ) -> None:
        self._db = db
        self._embeddings = embeddings
        self._temporal = temporal
        self._metrics = metrics
        self._tuning = tuning or SearchTuning()
        self._adapted = self._tuning.query_adapter and learned_for(embeddings.model_name)
        self._typed = self._tuning.type_prior and type_prior.learned_for(embeddings.model_name)
        self._feedback_budget = FeedbackBudget()

    def use_feedback_budget(self, budget: FeedbackBudget) -> FeedbackBudget:
        """Budget ratings with ``budget`` from the next one on; returns the one it replaces
        (a kernel of its own whose only agent is simulated, such as the advisor
        evaluation's, rates without the outside agents' limit)."""
        previous, self._feedback_budget = self._feedback_budget, budget
        return previous

    async def search(
        self,
        caller: CallerIdentity,
        query: str,
        *,
        types: Sequence[MemoryType] | None = None,
        limit: int = 10,
        as_of_event: datetime | None = None,
        as_of_ingestion: datetime | None = None,
        include_superseded: bool = False,
        include_consolidated: bool = False,
        namespace: str = "default",
        tags: Sequence[str] | None = None,
        min_score: float = 0.0,
    ) -> SearchResult:
        """The ``limit`` best records for ``query`` that ``caller`` may read, carrying every
        one of ``tags`` and at least ``min_score`` similar to the query (see the module)."""
        problems = (
            caller_problems(caller)
            + filter_problems(tags, min_score)
            + query_problems(query, namespace, limit)
            + scope_problems(
                types,
                {"as_of_event": as_of_event, "as_of_ingestion": as_of_ingestion},
                {
                    "include_superseded": include_superseded,
                    "include_consolidated": include_consolidated,
                },
            )
        )
        if problems:
            raise ValidationFailed(errors=problems)
        text = query.strip()

        started = time.perf_counter()
        vector: list[float] | None
        try:
            vector = await self._embeddings.embed_one(text)
        except EngramError as exc:
            log.warning("retrieval.embedding_failed", error=type(exc).__name__)
            vector = None
        embedded = time.perf_counter()

        versioned = include_superseded or as_of_ingestion is not None or as_of_event is not None
        as_of = versioned and not include_superseded
        depth = min(max(limit * 4, 40), 200)
        levels = readable_levels(caller)
        args: list[Any] = [
            namespace,
            None if types is None else [t.value for t in types],
            levels,
            _excluded(include_consolidated),
            depth,
            None if tags is None else list(tags),
        ]
        if versioned:
            args += [as_of_ingestion, as_of_event]
        scope = "versions" if versioned else "heads"
        # Current heads only: the candidates of a versioned search include versions that do
        # not resolve for the caller (a record forgotten or hidden since), which must not
        # weigh the words; those searches keep the vector leg's order.
        weighed = vector is not None and self._tuning.lexical_weight > 0 and not versioned
        # The adapter moves the question for the order of such a search only; the similarity
        # a hit carries (and the floor) stays the model's own cosine (ADR-015, 2026-11-28).
        order = adapt(vector) if weighed and self._adapted and vector is not None else vector
        kind_prior = log_prior(vector) if weighed and self._typed and vector is not None else {}
        resolved: dict[UUID, MemoryRecord | None] = {}
        while True:
            rankings = await self._legs(scope, text, (order, vector), args, words=weighed)
            fused = fuse(
                {leg: [row["id"] for row in rows] for leg, rows in rankings.items()},
                values={VECTOR: [row["distance"] for row in rankings.get(VECTOR, [])]},
            )
            similarity, ordering, lexical, kinds = await self._evidence(
                (order, vector), text if weighed else None, rankings, fused, levels
            )
            if weighed:
                fused = rerank(
                    fused,
                    ordering,
                    lexical,
                    weight=self._tuning.lexical_weight,
                    prior={i: kind_prior[k] for i, k in kinds.items() if k in kind_prior},
                    prior_weight=TYPE_PRIOR_WEIGHT,
                )
            # Candidates of an as-of search that do not resolve for the caller must not set
            # the best value the relevance is measured against: there it is the best hit's.
            relevance = {} if as_of else candidate_relevance(fused, ordering, weighed=weighed)
            fused = [c for c in fused if similarity.get(c[0], min_score) >= min_score]
            if not as_of:
                records = await self._temporal.versions(
                    [i for i, _, _ in fused[:limit]], caller=caller
                )
                hits = [
                    SearchHit(records[i], score, ranks, similarity.get(i), relevance.get(i))
                    for i, score, ranks in fused[:limit]
                    if i in records
                ]
                break
            hits = await self._resolve_as_of(
                caller,
                rankings,
                fused,
                similarity,
                resolved,
                limit=limit,
                as_of_event=as_of_event,
                as_of_ingestion=as_of_ingestion,
                include_consolidated=include_consolidated,
            )
            # An as-of window holds versions, several of one record and some that resolve to
            # nothing: while hits are missing and a leg filled the window with versions that
            # may still pass the floor (the vector leg is nearest first), look deeper.
            full = any(
                len(rows) >= args[DEPTH_ARG]
                and (leg != VECTOR or 1.0 - float(rows[-1]["distance"]) >= min_score)
                for leg, rows in rankings.items()
            )
            if len(hits) >= limit or not full or args[DEPTH_ARG] >= AS_OF_MAX_DEPTH:
                hits = _with_relevance(hits)
                break
            args[DEPTH_ARG] = min(args[DEPTH_ARG] * 4, AS_OF_MAX_DEPTH)
        await self._temporal.note_reads([hit.record for hit in hits])
        done = time.perf_counter()
        result = SearchResult(
            hits=hits,
            degraded=vector is None,
            embed_ms=(embedded - started) * 1000,
            query_ms=(done - embedded) * 1000,
            legs={leg: len(rows) for leg, rows in rankings.items()},
        )
        if self._metrics is not None:
            degraded = "true" if result.degraded else "false"
            self._metrics.search_seconds.labels(degraded=degraded).observe(done - started)
        log.info(
            "retrieval.search",
            agent_id=caller.agent_id,
            hits=len(hits),
            vector_rows=result.legs.get(VECTOR, 0),
            text_rows=result.legs.get(TEXT, 0),
            degraded=result.degraded,
            as_of=as_of,
            embed_ms=round(result.embed_ms, 2),
            query_ms=round(result.query_ms, 2),
        )
        return result

    async def _legs(
        self,
        scope: str,
        text: str,
        vectors: tuple[list[float] | None, list[float] | None],
        args: list[Any],
        *,
        words: bool = False,
    ) -> dict[str, list[Row]]:
        """Run the legs side by side (each on its own pooled connection): the text leg on the
        query's distinctive terms, or on all its words when there is no embedding. ``vectors``:
        the question's vector the vector leg orders by, and the model's own. With ``words``
        (current heads only) the vector leg's rows also bring the query's words, those each
        version holds and the distance of the model's vector (``raw_distance``)."""
        vector, raw = vectors
        legs: dict[str, Awaitable[list[Row]]] = {}
        terms = ""
        if vector is None:
            terms = text
        elif self._tuning.text_leg:
            terms = " ".join(distinctive_terms(text, min_pieces=self._tuning.min_pieces))
        if terms:
            legs[TEXT] = self._db.fetch(SQL[f"text_{scope}"], terms, *args)
        nearest = "vector_heads_words" if words else f"vector_{scope}"
        near_args = [vector, *args, text, raw] if words else [vector, *args]
        if vector is not None:
            legs[VECTOR] = self._db.fetch(SQL[nearest], *near_args)
        names = list(legs)
        found = dict(zip(names, await asyncio.gather(*legs.values()), strict=True))
        if vector is not None and len(found[VECTOR]) < args[DEPTH_ARG]:
            # The index scan stops after hnsw.max_scan_tuples versions, those the caller may
            # not read included: fewer rows than asked may mean hidden ones used it up.
            found[VECTOR] = await self._db.fetch(EXACT[nearest], *near_args)
        rows = found.get(TEXT)
        if vector is not None and rows and rows[0]["matches"] > MAX_TEXT_MATCHES:
            del found[TEXT]  # the terms are common in what the caller may read: not rare
        return found

    async def _evidence(
        self,
        vectors: tuple[list[float] | None, list[float] | None],
        words: str | None,
        rankings: dict[str, list[Row]],
        fused: list[Candidate],
        levels: list[str],
    ) -> tuple[dict[UUID, float], dict[UUID, float], dict[UUID, float], dict[UUID, str]]:
        """Each candidate's similarity to the query (the model's own cosine), the similarity
        it is ordered by (to the adapted question when the words are weighed) and, when the
        query's ``words`` are given, its lexical share of them and its type (nothing without a
        query embedding). The vector leg's rows bring their distances, and their words and
        types when the leg was asked for them; one lookup adds what is missing for the
        candidates the text leg alone found."""
        vector, raw = vectors
        if vector is None or raw is None:
            return {}, {}, {}, {}
        found = rankings.get(VECTOR, [])
        distance = {row["id"]: row["distance"] for row in found}
        # only the weighed search's vector leg (vector_heads_words) orders by another vector
        own = {row["id"]: row["raw_distance"] for row in found} if words is not None else {}
        matched: dict[UUID, list[str]] = {}
        kinds: dict[UUID, str] = {}
        query_words: list[str] = []
        # ``search`` asks the vector leg for the words (vector_heads_words) exactly when it
        # passes them here.
        if words is not None and found:
            matched = {row["id"]: list(row["matched"]) for row in found}
            kinds = {row["id"]: row["type"] for row in found}
            query_words = list(found[0]["words"])
        wanted = [
            c[0]
            for c in fused
            if c[0] not in distance or (words is not None and c[0] not in matched)
        ]
        if wanted:
            rows = await self._db.fetch(SQL["evidence"], vector, wanted, levels, words or "", raw)
            distance.update({row["id"]: row["distance"] for row in rows})
            own.update({row["id"]: row["raw_distance"] for row in rows})
            matched.update({row["id"]: list(row["matched"]) for row in rows})
            kinds.update({row["id"]: row["type"] for row in rows})
            if rows:
                query_words = list(rows[0]["words"])
        ordering = _similarities(distance)
        if words is None:
            return ordering, ordering, {}, {}
        return _similarities(own), ordering, lexical_shares(query_words, matched), kinds

    async def _resolve_as_of(
        self,
        caller: CallerIdentity,
        rankings: dict[str, list[Row]],
        fused: list[Candidate],
        similarity: dict[UUID, float],
        resolved: dict[UUID, MemoryRecord | None],
        *,
        limit: int,
        as_of_event: datetime | None,
        as_of_ingestion: datetime | None,
        include_consolidated: bool,
    ) -> list[SearchHit]:
        """One hit per record: the version answering (T, E), in fused order, scored by the
        version that matched. ``resolved`` keeps each record's answer (None: nothing for the
        caller) across the windows of one search."""
        record_of = {row["id"]: row["record_id"] for rows in rankings.values() for row in rows}
        hits: list[SearchHit] = []
        seen: set[UUID] = set()
        for version_id, score, ranks in fused:
            record_id = record_of[version_id]
            if record_id in seen:
                continue
            seen.add(record_id)
            if record_id not in resolved:
                found = await self._temporal.query(
                    record_id=record_id,
                    as_of_event=as_of_event,
                    as_of_ingestion=as_of_ingestion,
                    include_consolidated=include_consolidated,
                    caller=caller,
                    count_read=False,
                )
                resolved[record_id] = found[0] if found else None
            answer = resolved[record_id]
            if answer is not None:
                hits.append(SearchHit(answer, score, ranks, similarity.get(version_id)))
            if len(hits) == limit:
                break
        return hits

    async def feedback(
        self,
        caller: CallerIdentity,
        record_id: UUID,
        *,
        useful: bool,
        signal: str = "explicit",
        request_id: str | None = None,
    ) -> FeedbackReceipt:
        """Store whether a retrieved record helped, once per ``request_id``
        (:mod:`engram.retrieval.feedback`); a useful record also counts as a read."""
        return await rate(
            self._db,
            self._temporal,
            self._feedback_budget,
            caller,
            record_id,
            useful=useful,
            signal=signal,
            request_id=request_id,
        )
