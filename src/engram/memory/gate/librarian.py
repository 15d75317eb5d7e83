"""The Librarian Gate: the only way anything reaches memory storage.

``evaluate`` runs Layer 1 (:mod:`~engram.memory.gate.checks`), embeds, asks Layer 2 and commits
in one transaction the version rows, edges, outbox event and audit row (``write_path``). A
rejected or conflicting evaluation writes its audit row alone; one not audited fails (ADR-005).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

import structlog

from engram.errors import AlreadyExists, DuplicateRequest, EmbeddingError, VersionConflict
from engram.infra.db import DatabaseAdapter
from engram.infra.embeddings import EmbeddingAdapter
from engram.infra.events import Event, EventBus
from engram.memory import store
from engram.memory.audit.entry import new_decision_id
from engram.memory.audit.log import AuditLog
from engram.memory.conflict.reading import read_ahead
from engram.memory.fingerprint import content_hash
from engram.memory.gate.advisor import RELATED, AdvisorAction, GateAdvisor
from engram.memory.gate.checks import Layer1Outcome, with_schema_failure
from engram.memory.gate.decision import advise, screen
from engram.memory.gate.endings import Endings
from engram.memory.gate.groups import GroupOutcome, GroupsFinish, commit_groups, evaluate_groups
from engram.memory.gate.plan import Plan, Timing, without_merge
from engram.memory.gate.rate_limit import RateLimiter, SharedRateLimiter, settle
from engram.memory.gate.reopen import Reopener
from engram.memory.gate.replay import (
    as_read_by,
)
from engram.memory.gate.requests import (
    GateRequest,
    GateResult,
    RefusedInput,
    WriteOutcome,
)
from engram.memory.gate.resolver import Resolver
from engram.memory.gate.serial import SameContent, content_key
from engram.memory.gate.signals import GateSignals
from engram.memory.gate.write_path import StaleTarget, WritePath
from engram.memory.rl.features import marked
from engram.memory.temporal.numbering import numbered_for
from engram.memory.types import (
    CallerIdentity,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    Neighbour,
    can_read,
    readable_levels,
    weighed_levels,
)
from engram.observability.metrics import EngramMetrics

log = structlog.get_logger("engram.memory.gate.librarian")

NEIGHBOURS = 8
#: The longest proposal text read ahead of its neighbour query (an agent's memory is a few
#: hundred characters; crafted text of this length takes at most about 5 ms to read).
READ_AHEAD_CHARS = 1_000
#: Plans made for one evaluation at most: a plan is made again when the record its advice
#: was about moved on before the write locked it; after the last, the answer is CONFLICT.
REPLANS = 3


class LibrarianGate:
    """Decides every CREATE, UPDATE and FORGET, and persists the approved ones."""

    def __init__(
        self,
        *,
        db: DatabaseAdapter,
        embeddings: EmbeddingAdapter,
        advisor: GateAdvisor,
        audit: AuditLog,
        events: EventBus,
        metrics: EngramMetrics,
        limiter: SharedRateLimiter | RateLimiter | None = None,
    ) -> None:
        self._db = db
        self._embeddings = embeddings
        self._advisor = advisor
        self._audit = audit
        self._events = events
        self._metrics = metrics
        self._limiter = limiter or RateLimiter()
        self._writes = WritePath(db=db, audit=audit, events=events)
        self._signals = GateSignals(metrics)
        self._same_content = SameContent()  # a CREATE waits for writers of its content
        self._resolver = Resolver(db, events, audit, self.evaluate)
        self._reopener = Reopener(db=db, events=events, evaluate=self.evaluate)
        self._endings = Endings(db=db, audit=audit, writes=self._writes, signals=self._signals)

    @property
    def advisor(self) -> GateAdvisor:
        """The Layer 2 advisor in use."""
        return self._advisor

    def use_advisor(self, advisor: GateAdvisor) -> GateAdvisor:
        """Advise with ``advisor`` from the next decision on; returns the one it replaces."""
        previous, self._advisor = self._advisor, advisor
        return previous

    @property
    def limiter(self) -> SharedRateLimiter | RateLimiter:
        """The rate limiter of external writes."""
        return self._limiter

    async def evaluate(self, request: GateRequest) -> GateResult:
        """Decide one request and persist the outcome; see the module docstring. The answer
        is as the caller is told it: in its numbering of versions (``replay.as_read_by``)."""
        return await as_read_by(self._db, await self._decide(request), request.caller_identity)

    async def _decide(self, request: GateRequest) -> GateResult:
        timing = Timing(started=time.perf_counter())
        decision_id = new_decision_id()
        if request.request_id is not None:
            prior = await self._audit.by_request(
                request.caller_identity.agent_id, request.request_id
            )
            if prior is not None:
                return await self._endings.replay(prior, request)
        record = request.record
        # The slowest step, started while the checks run; internal UPDATEs reuse a stored one.
        embedding = None
        if request.action is GateAction.CREATE or (
            request.action is GateAction.UPDATE
            and request.decision_type is GateDecisionType.EXTERNAL
        ):
            embedding = asyncio.ensure_future(self._embed(record.content))
        try:
            async with self._same_content.hold(content_key(request)):
                return await self._evaluate(request, decision_id, timing, embedding)
        finally:
            if embedding is not None and not embedding.done():
                embedding.cancel()

    async def _embed(self, content: str) -> tuple[list[float] | None, float]:
        """The content's embedding (None in degraded mode) and how long it took."""
        started = time.perf_counter()
        try:
            vector = await self._embeddings.embed_one(content)
        except EmbeddingError as exc:
            log.warning("gate.embedding_degraded", error=type(exc).__name__)
            vector = None
        return vector, time.perf_counter() - started

    async def _restated_embedding(
        self, record: MemoryRecord, head: MemoryRecord | None
    ) -> tuple[list[float] | None, float]:
        """The head's stored embedding when ``record`` restates its content, else the model's."""
        if head is not None and head.content == record.content:
            started = time.perf_counter()
            model = self._embeddings.model_name
            stored = await store.stored_embedding(self._db, head.id, model=model)
            if stored is not None:
                return stored, time.perf_counter() - started
        return await self._embed(record.content)

    async def _evaluate(
        self,
        request: GateRequest,
        decision_id: UUID,
        timing: Timing,
        embedding: asyncio.Future[tuple[list[float] | None, float]] | None,
    ) -> GateResult:
        screened = await self._screen(request, decision_id, timing)
        if isinstance(screened, GateResult):
            return screened
        layer1, head, evidence = screened
        for attempt in range(1, REPLANS + 1):
            plan, timing = await self._plan(
                request,
                layer1=layer1,
                head=head,
                evidence=evidence,
                timing=timing,
                pending=embedding,
            )
            plan = without_merge(plan) if attempt == REPLANS else plan
            self._signals.layer2(decision_id, plan.advice)
            evaluation_seconds = (
                time.perf_counter() - timing.started - timing.waited_for_embedding_seconds
            )
            try:
                result = await self._writes.commit(plan, decision_id=decision_id, timing=timing)
            except StaleTarget as stale:
                # The record the advice was about moved on before its lock was taken: plan
                # again against what is there now (the embedding is kept).
                log.info("gate.replanned", decision_id=str(decision_id), attempt=attempt)
                if attempt < REPLANS:
                    # Only an internal UPDATE without an expected version gets here with a
                    # head (an expected one would have been a Conflict); it sees every record.
                    head = stale.current if head is not None else None
                    continue
                return await self._endings.conflict(
                    request,
                    decision_id,
                    layer1,
                    advice=plan.advice,
                    conflict=VersionConflict(expected=request.expected_version, actual=None),
                    timing=timing,
                    reason="the record this write was measured against kept changing; retry",
                )
            except VersionConflict as conflict:
                return await self._endings.conflict(
                    request,
                    decision_id,
                    layer1,
                    advice=plan.advice,
                    conflict=conflict,
                    timing=timing,
                )
            except DuplicateRequest as exc:
                # The same agent's request id committed in between: answer with its result.
                prior = await self._audit.by_request(exc.agent_id, exc.request_id)
                if prior is None:  # pragma: no cover - the constraint saw the row
                    raise
                return await self._endings.replay(prior, request)
            except AlreadyExists as exc:
                layer1 = with_schema_failure(layer1, str(exc))
                return await self._endings.rejected(request, decision_id, layer1, timing)
            return self._signals.write(request, result, plan, evaluation_seconds, timing)
        raise AssertionError("unreachable: the last attempt never raises StaleTarget")

    async def _screen(
        self, request: GateRequest, decision_id: UUID, timing: Timing
    ) -> tuple[Layer1Outcome, MemoryRecord | None, Mapping[UUID, UUID]] | GateResult:
        """Layer 1 and the version check: what planning needs (the outcome, the head as the
        caller may see it, the resolved evidence), or the audited result of a request that
        stops here."""
        record = request.record
        caller = request.caller_identity
        head = None
        if request.action is not GateAction.CREATE:
            head = await store.head(self._db, record.record_id)
            if head is not None and not can_read(caller, head):
                head = None  # absent for this caller: answered as for an unknown id
        evidence, missing, above = await store.cite(self._db, record, caller)
        limiter = await settle(self._limiter, request.caller_identity, request.decision_type)
        # The expected version is the caller's number of the head (as replay screens it too).
        shown = await numbered_for(self._db, head, readable_levels(caller))
        screening = screen(
            request, head=shown, missing_evidence=missing, evidence_above=above, limiter=limiter
        )
        layer1 = screening.layer1
        self._signals.layer1(decision_id, request, layer1)
        if screening.verdict is GateDecision.REJECTED:
            return await self._endings.rejected(request, decision_id, layer1, timing)
        if screening.verdict is GateDecision.CONFLICT:
            stored = None if head is None else head.version
            conflict = VersionConflict(expected=request.expected_version, actual=stored)
            return await self._endings.conflict(
                request, decision_id, layer1, advice=None, conflict=conflict, timing=timing
            )
        return layer1, head, evidence

    async def evaluate_groups(
        self, groups: Sequence[Sequence[GateRequest]], *, finish: GroupsFinish | None = None
    ) -> list[GroupOutcome]:
        """Decide internal requests in groups and commit every group that passes in one
        transaction (consolidation's batches; see :mod:`engram.memory.gate.groups`)."""
        return await evaluate_groups(
            groups,
            screen=self._screen,
            plan=self._plan_for_group,
            commit=lambda planned: commit_groups(
                self._db, self._writes, self._audit, planned, finish=finish
            ),
            signals=self._signals,
            committed=self._events.committed,
        )

    async def _plan_for_group(
        self,
        request: GateRequest,
        layer1: Layer1Outcome,
        head: MemoryRecord | None,
        evidence: Mapping[UUID, UUID],
        timing: Timing,
    ) -> tuple[Plan, Timing]:
        pending = None
        if request.action is GateAction.CREATE:
            pending = asyncio.ensure_future(self._embed(request.record.content))
        return await self._plan(
            request, layer1=layer1, head=head, evidence=evidence, timing=timing, pending=pending
        )

    async def resolve_conflicts(self, event: Event) -> tuple[GateResult, ...]:
        """Carry out one write's conflict resolutions (:mod:`engram.memory.gate.resolver`)."""
        return await self._resolver.carry_out(event)

    async def reopen_raised(self, event: Event) -> tuple[GateResult, ...]:
        """Undo the resolutions a record's level change left resting on grounds hidden from
        the changed record's readers (:mod:`engram.memory.gate.reopen`)."""
        return await self._reopener.on_level_changed(event)

    async def reject_input(
        self,
        *,
        action: GateAction,
        caller: CallerIdentity,
        decision_type: GateDecisionType,
        raw: Mapping[str, Any],
        problems: list[str],
        request_id: str | None = None,
    ) -> GateResult:
        """Reject input an adapter could not even turn into a record, and audit it: one audit
        row holding the raw input as given, escaped and bounded
        (:func:`engram.memory.storable.audited_input`), and the escaped problems. A retry
        with a ``request_id`` already recorded is answered as :meth:`evaluate` answers it.
        """
        refused = RefusedInput(action, caller, decision_type, raw, request_id)
        return await as_read_by(self._db, await self._endings.refuse(refused, problems), caller)

    # --- planning ---------------------------------------------------------------------------

    async def _plan(
        self,
        request: GateRequest,
        *,
        layer1: Layer1Outcome,
        head: MemoryRecord | None,
        evidence: Mapping[UUID, UUID],
        timing: Timing,
        pending: asyncio.Future[tuple[list[float] | None, float]] | None,
    ) -> tuple[Plan, Timing]:
        record = layer1.record
        if request.action is GateAction.FORGET:
            return Plan(request, layer1, record, head, None, None, (), evidence), timing
        waited_from = time.perf_counter()
        if pending is None:
            pending = asyncio.ensure_future(self._restated_embedding(record, head))
        embedding, run_seconds = await pending
        # Evaluation time excludes only the part of the embedding the Gate waited for.
        timing = Timing(timing.started, time.perf_counter() - waited_from, run_seconds)
        fingerprint = content_hash(record.content)
        exact: Neighbour | None = None
        nearest: list[Neighbour] = []
        if request.decision_type is not GateDecisionType.CONSOLIDATION:
            # consolidation's advice looks at no neighbour (its sources were judged already)
            query = asyncio.ensure_future(
                store.candidates(
                    self._db,
                    embedding=embedding,
                    namespace=record.namespace,
                    memory_type=record.type,
                    content_hash=fingerprint,
                    levels=readable_levels(request.caller_identity),
                    limit=NEIGHBOURS,
                    # records above its level must not crowd out its own readers' neighbours:
                    # those decide its links and its routing to consolidation (ADR-008)
                    own_levels=weighed_levels(request.caller_identity, record.access_level),
                )
            )
            try:
                await asyncio.sleep(0)  # the query goes out before the text is read
                _read_ahead(record.content)
                exact, nearest = await query
            finally:
                query.cancel()  # only when reading failed: a done task ignores it
        advice = await advise(
            request,
            layer1,
            head=head,
            exact=exact,
            nearest=nearest,
            embedded=embedding is not None,
            advisor=self._advisor,
        )
        if request.action is not GateAction.CREATE:
            exact = None  # the advice was not about duplicates: no NOOP target among them
        record = record.model_copy(update={"source_confidence": advice.confidence})
        target = None
        if advice.action is AdvisorAction.NOOP or (
            advice.action is AdvisorAction.UPDATE and request.action is GateAction.CREATE
        ):
            # the record a NOOP reinforces, or that a CREATE is merged into (ADR-020)
            pool = [n.record for n in nearest] + ([exact.record] if exact else [])
            pool += [head] if head is not None else []
            target = next((r for r in pool if r.record_id == advice.target_record_id), None)
        plan = Plan(
            request=request,
            layer1=layer1,
            record=record,
            head=head,
            advice=advice,
            target=target,
            embedding=tuple(embedding) if embedding is not None else (),
            evidence=evidence,
            fingerprint=fingerprint,
            embedding_model=self._embeddings.model_name,
            related=tuple(
                (n.record.id, n.similarity)
                for n in nearest
                if n.similarity >= RELATED
                and record.access_level.allows(n.record.access_level)
                and n.record.record_id != record.record_id
                and (target is None or n.record.record_id != target.record_id)
            ),
        )
        return plan, timing

    async def refresh_record_gauge(self) -> None:
        """Set ``engram_memory_records`` from the database (at start-up, and periodically)."""
        self._signals.records(await store.count_heads(self._db))


def _read_ahead(text: str) -> None:
    """Parse the proposal's text while its neighbour query runs in the database: the conflict
    judgement and the advisor's features then find it in their per-text caches, and the time
    after the query is the comparisons' alone (ADR-016, amended 2026-11-28). A text longer
    than ``READ_AHEAD_CHARS`` is left to them: they may not need all of it (no neighbour in
    scope, an internal write), and its parsing may outlast the query."""
    if len(text) <= READ_AHEAD_CHARS:
        read_ahead(text)
        marked(text)


__all__ = ["GateDecisionType", "GateRequest", "GateResult", "LibrarianGate", "WriteOutcome"]
