"""Audit replay: what would the Gate decide about the recorded requests under another policy?

Each audit row of a Gate evaluation holds the full input (``input_snapshot``), the caller as
the Gate saw it and the results of both layers. :class:`AuditReplayer` re-evaluates the rows of
a time window in ``seq`` order and compares the new verdict with the recorded one, writing
nothing (no audit row, no version, no read count):

* Layer 1 is pure given its inputs. The head of the record and the cited evidence are read as
  they were just before the decision (as of its ingestion instant); rate limits are replayed
  with a fresh limiter whose clock is each row's recorded time.
* Layer 2 gets the neighbours as they were: versions of the same namespace and type that were
  active heads at the decision's instant, ranked by similarity to the content embedded again.

Every decision is replayed against the recorded history, not against an alternative one: a
decision that would have changed does not change what later decisions see. See ADR-014.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any
from uuid import UUID

from engram.errors import EmbeddingError
from engram.infra.db import DatabaseAdapter, Row
from engram.infra.embeddings import EmbeddingAdapter
from engram.infra.sql import load_queries
from engram.memory import store
from engram.memory.admin.policy import ADVISORS, ReplayPolicy, load_policy, make_advisor
from engram.memory.admin.quarantine import RELEASE, REVEAL
from engram.memory.admin.verdicts import (
    ReplayedDecision,
    ReplayReport,
    Verdict,
    columns_verdict,
    differences,
    recorded_verdict,
    replayed_verdict,
)
from engram.memory.audit.entry import caller_from_json
from engram.memory.audit.log import AuditLog
from engram.memory.conflict.detection import ConflictResolver
from engram.memory.fingerprint import content_hash
from engram.memory.gate.advisor import (
    AdvisorDecision,
    GateAdvisor,
)
from engram.memory.gate.checks import Layer1Outcome
from engram.memory.gate.decision import advise, screen
from engram.memory.gate.librarian import NEIGHBOURS
from engram.memory.gate.rate_limit import RateLimiter
from engram.memory.gate.requests import GateRequest
from engram.memory.rl.policy import AdvisorPolicy
from engram.memory.types import (
    AccessLevel,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    Neighbour,
    can_read,
    readable_levels,
    weighed_levels,
)

SQL = load_queries("engram.memory.admin", "replay.sql", shared=store.FRAGMENTS)
PAGE = 500


def request_from_row(row: Mapping[str, Any]) -> GateRequest:
    """The Gate request an audit row recorded; ``ValueError`` when it cannot be rebuilt."""
    snapshot = row["input_snapshot"]
    if "record" not in snapshot:
        raise ValueError("the input could not be read as a record; rejected before any check")
    if snapshot.get("escaped"):
        raise ValueError("the input held values storage cannot hold, kept escaped; not replayed")
    status = snapshot.get("status")
    return GateRequest(
        action=GateAction(snapshot["action"]),
        record=MemoryRecord.model_validate(snapshot["record"]),
        caller_identity=caller_from_json(row["caller"]),
        decision_type=GateDecisionType(row["decision_type"]),
        expected_version=snapshot.get("expected_version"),
        request_id=snapshot.get("request_id"),
        status=None if status is None else MemoryStatus(status),
    )


def _as_of(row: Row) -> MemoryRecord:
    """A version as it was at the instant the statement was asked about."""
    record = store.record_from_row(row)
    changes: dict[str, Any] = {"status": MemoryStatus(row["status_at"])}
    if "access_level_at" in row:
        changes["access_level"] = AccessLevel(row["access_level_at"])
    return record.model_copy(update=changes)


def _first_line(exc: Exception) -> str:
    """An exception's message, first line only (a KeyError's is the missing key)."""
    text = str(exc).splitlines()
    return text[0] if text else type(exc).__name__


class _ReplayClock:
    """The replayed limiter's clock: the recorded instants, never going back."""

    def __init__(self) -> None:
        self.now = float("-inf")

    def set(self, instant: float) -> None:
        self.now = max(self.now, instant)

    def __call__(self) -> float:
        return self.now


class AuditReplayer:
    """Re-evaluates recorded Gate requests under a chosen advisor and policy, writing nothing."""

    def __init__(
        self,
        db: DatabaseAdapter,
        *,
        audit: AuditLog,
        embeddings: EmbeddingAdapter,
        resolver: ConflictResolver,
    ) -> None:
        self._db = db
        self._audit = audit
        self._embeddings = embeddings
        self._resolver = resolver

    async def count(self, *, since: datetime | None = None, until: datetime | None = None) -> int:
        """How many audit rows the window holds (``since`` inclusive, ``until`` exclusive)."""
        return int(await self._db.fetchval(SQL["count_window"], since, until))

    async def replay(
        self,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        advisor: str = "heuristic",
        policy: ReplayPolicy | None = None,
        progress: Callable[[int], None] | None = None,
        model: AdvisorPolicy | None = None,
    ) -> ReplayReport:
        """Replay every row of the window in ``seq`` order; ``progress`` gets the rows done;
        ``model``: the trained policy the ``rl`` advisor scores with."""
        policy = policy or ReplayPolicy()
        chosen = make_advisor(advisor, self._resolver, policy, model)
        clock = _ReplayClock()
        limiter = RateLimiter(clock=clock)
        done: list[ReplayedDecision] = []
        after = 0
        while True:
            page = await self._audit.search(after_seq=after, since=since, until=until, limit=PAGE)
            if not page:
                break
            for row in page:
                done.append(await self._replay_row(row, chosen, policy, limiter, clock))
                if progress is not None:
                    progress(len(done))
            after = int(page[-1]["seq"])
        return ReplayReport(since, until, chosen.version, policy.to_json(), tuple(done))

    async def _replay_row(
        self,
        row: Mapping[str, Any],
        advisor: GateAdvisor,
        policy: ReplayPolicy,
        limiter: RateLimiter,
        clock: _ReplayClock,
    ) -> ReplayedDecision:
        unreadable: str | None = None
        try:
            recorded = recorded_verdict(row)
        except (ValueError, KeyError, TypeError) as exc:
            # An edited row (the owner can rewrite the log; verify names it): reported, not fatal.
            recorded, unreadable = columns_verdict(row), _first_line(exc)
        base = ReplayedDecision(
            seq=int(row["seq"]),
            decision_id=row["decision_id"],
            occurred_at=row["occurred_at"],
            action=row["action"],
            decision_type=row["decision_type"],
            agent_id=row["agent_id"],
            record_id=row["record_id"],
            recorded=recorded,
            replayed=None,
        )
        if unreadable is not None:
            return replace(base, skipped=f"the recorded verdict cannot be read: {unreadable}")
        if row["action"] == RELEASE:
            return replace(base, skipped="an admin's release, not a Gate evaluation")
        if row["action"] == REVEAL:
            return replace(base, skipped="an admin shown quarantined content, not a decision")
        try:
            request = request_from_row(row)
        except (ValueError, KeyError, TypeError) as exc:
            return replace(base, skipped=_first_line(exc))
        at = datetime.fromisoformat(row["occurred_at"])
        # The limiter ran when the evaluation began: the recorded instant less its duration.
        clock.set(at.timestamp() - float(row["duration_ms"]) / 1000)
        replayed = await self._evaluate(
            request, row, at, advisor=advisor, policy=policy, limiter=limiter
        )
        return replace(base, replayed=replayed, reasons=tuple(differences(recorded, replayed)))

    async def _evaluate(
        self,
        request: GateRequest,
        row: Mapping[str, Any],
        at: datetime,
        *,
        advisor: GateAdvisor,
        policy: ReplayPolicy,
        limiter: RateLimiter,
    ) -> Verdict:
        record = request.record
        decision_id = UUID(row["decision_id"])
        forgot = row["version_id"] if row["outcome"] == "forgotten" else None
        head = None
        if request.action is not GateAction.CREATE:
            found = await self._db.fetchrow(
                SQL["replay_head_as_of"],
                record.record_id,
                at,
                decision_id,
                None if forgot is None else UUID(forgot),
            )
            head = None if found is None else _as_of(found)
            if head is not None and not can_read(request.caller_identity, head):
                head = None  # absent for this caller, as the Gate treats it
        shown = await self._numbered(head, request, at, decision_id)
        missing: list[str] = []
        above: list[str] = []
        if request.action is not GateAction.FORGET and record.evidence_links:
            refs = list(record.evidence_links)
            caller = request.caller_identity
            weighed = weighed_levels(caller, record.access_level)
            known = await self._evidence_as_of(refs, at, decision_id, weighed)
            if len(known) < len(refs):  # as the Gate tells absent from above the level
                readable = await self._evidence_as_of(
                    refs, at, decision_id, readable_levels(caller)
                )
                above = [str(r) for r in refs if r in readable and r not in known]
            missing = [str(r) for r in refs if r not in known and str(r) not in above]
        caller = request.caller_identity
        tier_rate = policy.writes_per_minute.get(caller.trust_level)
        if caller.writes_per_minute is None and tier_rate is not None:
            caller = replace(caller, writes_per_minute=tier_rate)
        screening = screen(
            request,
            head=shown,
            missing_evidence=missing,
            evidence_above=above,
            limiter=limiter,
            caller=caller,
            declarative_types=policy.declarative_types,
        )
        layer1 = screening.layer1
        if screening.verdict is not None:
            return replayed_verdict(layer1, screening.verdict, screening.reason, None)
        if request.action is GateAction.FORGET:
            reason = "forgotten; its history stays readable"
            return replayed_verdict(layer1, GateDecision.APPROVED, reason, None)
        advice = await self._advise(
            request, layer1, head=head, at=at, decision_id=decision_id, advisor=advisor
        )
        return replayed_verdict(layer1, GateDecision.APPROVED, advice.rationale, advice)

    async def _numbered(
        self, head: MemoryRecord | None, request: GateRequest, at: datetime, decision_id: UUID
    ) -> MemoryRecord | None:
        """``head`` carrying the number the caller gave it at ``at``, which the Gate screened
        the expected version against (``engram.memory.temporal.numbering``)."""
        levels = readable_levels(request.caller_identity)
        if head is None or head.version == 1 or len(levels) == len(AccessLevel):
            return head
        number = await self._db.fetchval(
            SQL["replay_reader_number"], head.record_id, at, decision_id, head.version, levels
        )
        return head.model_copy(update={"version": int(number)})

    async def _evidence_as_of(
        self, refs: list[UUID], at: datetime, decision_id: UUID, levels: list[str]
    ) -> set[UUID]:
        """The cited ids that resolved just before ``at`` to a record whose head then had
        one of ``levels`` (as ``store.resolve_evidence`` resolves them in the Gate)."""
        rows = await self._db.fetch(SQL["replay_evidence_as_of"], refs, at, decision_id, levels)
        return {r["ref"] for r in rows}

    async def _advise(
        self,
        request: GateRequest,
        layer1: Layer1Outcome,
        *,
        head: MemoryRecord | None,
        at: datetime,
        decision_id: UUID,
        advisor: GateAdvisor,
    ) -> AdvisorDecision:
        record = layer1.record
        try:
            embedding: Sequence[float] | None = await self._embeddings.embed_one(record.content)
        except EmbeddingError:
            embedding = None
        rows = await self._db.fetch(
            SQL["replay_candidates_as_of"],
            None if embedding is None else list(embedding),
            record.namespace,
            record.type.value,
            content_hash(record.content),
            NEIGHBOURS,
            at,
            decision_id,
            readable_levels(request.caller_identity),
            weighed_levels(request.caller_identity, record.access_level),
        )

        def neighbour(found: Row) -> Neighbour:
            repetitions = max(1, int(found["repetitions_at"]))
            return Neighbour(_as_of(found), float(found["similarity"]), repetitions)

        exact = next((neighbour(r) for r in rows if r["exact"]), None)
        nearest = [neighbour(r) for r in rows if not r["exact"] and embedding is not None]
        return await advise(
            request,
            layer1,
            head=head,
            exact=exact,
            nearest=nearest,
            embedded=embedding is not None,
            advisor=advisor,
        )


__all__ = [
    "ADVISORS",
    "AuditReplayer",
    "ReplayPolicy",
    "ReplayReport",
    "ReplayedDecision",
    "caller_from_json",
    "load_policy",
    "request_from_row",
]
