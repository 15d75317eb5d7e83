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

import json
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from engram.errors import EmbeddingError, ValidationFailed
from engram.infra.db import DatabaseAdapter, Row
from engram.infra.embeddings import EmbeddingAdapter
from engram.infra.sql import load_queries
from engram.memory import store
from engram.memory.admin.quarantine import RELEASE
from engram.memory.audit.log import AuditLog
from engram.memory.conflict.detection import ConflictResolver
from engram.memory.fingerprint import content_hash
from engram.memory.gate.advisor import (
    AdvisorAction,
    AdvisorDecision,
    GateAdvisor,
    HeuristicAdvisor,
    HeuristicPolicy,
    RLAdvisor,
)
from engram.memory.gate.checks import DECLARATIVE_TYPES, Layer1Outcome
from engram.memory.gate.decision import advise, screen
from engram.memory.gate.librarian import NEIGHBOURS
from engram.memory.gate.rate_limit import RateLimiter
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    Neighbour,
    TrustLevel,
    can_read,
    readable_levels,
)

SQL = load_queries("engram.memory.admin", "replay.sql", shared=store.FRAGMENTS)
ADVISORS = ("heuristic", "rl")
PAGE = 500

_ADVISOR_FLOATS = ("near_duplicate", "update_candidate", "related")
_ADVISOR_COUNTS = ("related_for_consolidation", "repetitions_for_consolidation")
_SECTIONS = {"layer1", "rate_limit", "advisor"}


# --- the policy ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplayPolicy:
    """The knobs a replay may turn; the defaults are the Gate's own rules.

    ``writes_per_minute`` gives a tier's rate to callers without a rate of their own, as if
    each such agent had been registered with it (burst: a fifth of a minute's writes, at
    least one).
    """

    advisor: HeuristicPolicy = field(default_factory=HeuristicPolicy)
    declarative_types: frozenset[MemoryType] = DECLARATIVE_TYPES
    writes_per_minute: Mapping[TrustLevel, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The policy in the file format's shape (every knob, defaults included)."""
        return {
            "layer1": {"declarative_types": sorted(t.value for t in self.declarative_types)},
            "rate_limit": {tier.value: rate for tier, rate in self.writes_per_minute.items()},
            "advisor": {
                **{name: getattr(self.advisor, name) for name in _ADVISOR_FLOATS},
                **{name: getattr(self.advisor, name) for name in _ADVISOR_COUNTS},
                "trust_factor": {t.value: f for t, f in self.advisor.trust_factor.items()},
            },
        }


def _section(data: Mapping[str, Any], name: str, problems: list[str]) -> Mapping[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, Mapping):
        problems.append(f"[{name}] must be a table")
        return {}
    return value


def _fraction(value: object, where: str, problems: list[str]) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        problems.append(f"{where}: a number between 0 and 1")
        return None
    return float(value)


def _tiers(
    table: object, where: str, problems: list[str], *, fraction: bool
) -> dict[TrustLevel, float]:
    if not isinstance(table, Mapping):
        problems.append(f"{where} must be a table of trust levels")
        return {}
    out: dict[TrustLevel, float] = {}
    for key, value in table.items():
        try:
            tier = TrustLevel(key)
        except ValueError:
            problems.append(f"{where}.{key}: not a trust level")
            continue
        if fraction:
            number = _fraction(value, f"{where}.{key}", problems)
        elif isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            problems.append(f"{where}.{key}: writes per minute, a number >= 0")
            number = None
        else:
            number = float(value)
        if number is not None:
            out[tier] = number
    return out


def _advisor_policy(section: Mapping[str, Any], problems: list[str]) -> HeuristicPolicy:
    known = {*_ADVISOR_FLOATS, *_ADVISOR_COUNTS, "trust_factor"}
    problems.extend(f"[advisor] {key}: unknown knob" for key in section if key not in known)
    values: dict[str, Any] = {}
    for name in _ADVISOR_FLOATS:
        if name in section:
            number = _fraction(section[name], f"advisor.{name}", problems)
            if number is not None:
                values[name] = number
    for name in _ADVISOR_COUNTS:
        if name in section:
            count = section[name]
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                problems.append(f"advisor.{name}: a whole number >= 1")
            else:
                values[name] = count
    if "trust_factor" in section:
        factors = _tiers(section["trust_factor"], "advisor.trust_factor", problems, fraction=True)
        values["trust_factor"] = {**HeuristicPolicy().trust_factor, **factors}
    return HeuristicPolicy(**values)


def policy_from_mapping(data: Mapping[str, Any]) -> ReplayPolicy:
    """A policy from its parsed file; unknown or invalid knobs are :class:`ValidationFailed`."""
    problems = [f"[{key}]: unknown section" for key in data if key not in _SECTIONS]
    layer1 = _section(data, "layer1", problems)
    problems.extend(f"[layer1] {k}: unknown knob" for k in layer1 if k != "declarative_types")
    declarative = DECLARATIVE_TYPES
    if "declarative_types" in layer1:
        names = layer1["declarative_types"]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            problems.append("layer1.declarative_types: a list of memory types")
        else:
            try:
                declarative = frozenset(MemoryType(n) for n in names)
            except ValueError as exc:
                problems.append(f"layer1.declarative_types: {exc}")
    rates = _tiers(_section(data, "rate_limit", problems), "rate_limit", problems, fraction=False)
    advisor = _advisor_policy(_section(data, "advisor", problems), problems)
    if problems:
        raise ValidationFailed(errors=problems)
    return ReplayPolicy(advisor=advisor, declarative_types=declarative, writes_per_minute=rates)


def load_policy(path: Path) -> ReplayPolicy:
    """Read a policy file: TOML, or JSON when the name ends in ``.json``."""
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (OSError, ValueError) as exc:
        raise ValidationFailed(errors=[f"policy file {path}: {exc}"]) from exc
    if not isinstance(data, dict):
        raise ValidationFailed(errors=[f"policy file {path}: not a table of sections"])
    return policy_from_mapping(data)


def make_advisor(name: str, resolver: ConflictResolver, policy: ReplayPolicy) -> GateAdvisor:
    """The advisor called ``name`` (one of :data:`ADVISORS`) with the policy's thresholds."""
    heuristic = HeuristicAdvisor(resolver, policy.advisor)
    if name == "heuristic":
        return heuristic
    if name == "rl":
        return RLAdvisor(heuristic)
    raise ValidationFailed(errors=[f"advisor {name!r}: one of {', '.join(ADVISORS)}"])


# --- verdicts -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one evaluation decided, in the terms replay compares."""

    decision: str
    outcome: str
    reason: str
    failed_checks: tuple[str, ...] = ()
    advice: str | None = None
    target_record_id: str | None = None
    route_to_consolidation: bool | None = None
    conflicts: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "decision": self.decision,
            "outcome": self.outcome,
            "reason": self.reason,
            "failed_checks": list(self.failed_checks),
            "advice": self.advice,
            "target_record_id": self.target_record_id,
            "route_to_consolidation": self.route_to_consolidation,
            "conflicts": list(self.conflicts),
        }


def _advice_fields(advice: Mapping[str, Any] | None) -> dict[str, Any]:
    if advice is None:
        return {}
    return {
        "advice": advice["action"],
        "target_record_id": advice.get("target_record_id"),
        "route_to_consolidation": bool(advice.get("route_to_consolidation", False)),
        "conflicts": tuple(
            sorted(f"{c['classification']}:{c['existing_record_id']}" for c in advice["conflicts"])
        ),
    }


def recorded_verdict(row: Mapping[str, Any]) -> Verdict:
    """The verdict an audit row (as :func:`engram.memory.audit.log.row_json`) records."""
    checks = row.get("layer1_checks") or []
    return Verdict(
        decision=row["decision"],
        outcome=row["outcome"],
        reason=row["reason"],
        failed_checks=tuple(c["name"] for c in checks if not c.get("passed", True)),
        **_advice_fields(row.get("layer2_decision")),
    )


def _replayed_verdict(
    layer1: Layer1Outcome, decision: GateDecision, reason: str, advice: AdvisorDecision | None
) -> Verdict:
    outcome = "none"
    if decision is GateDecision.APPROVED:
        outcome = "forgotten"
        if advice is not None:
            outcome = {
                AdvisorAction.NOOP: "reinforced",
                AdvisorAction.UPDATE: "updated",
                AdvisorAction.ADD: "created",
            }[advice.action]
    return Verdict(
        decision=decision.value,
        outcome=outcome,
        reason=reason,
        failed_checks=tuple(check.name for check in layer1.failures),
        **_advice_fields(None if advice is None else advice.to_json()),
    )


def differences(recorded: Verdict, replayed: Verdict) -> list[str]:
    """Why the two verdicts differ, one sentence per difference (empty: the same)."""
    out: list[str] = []
    if recorded.decision != replayed.decision:
        out.append(f"decision {recorded.decision} -> {replayed.decision}: {replayed.reason}")
    elif recorded.outcome != replayed.outcome:
        out.append(f"outcome {recorded.outcome} -> {replayed.outcome}: {replayed.reason}")
    if recorded.failed_checks != replayed.failed_checks:
        before = ", ".join(recorded.failed_checks) or "none"
        after = ", ".join(replayed.failed_checks) or "none"
        out.append(f"failed checks {before} -> {after}")
    if recorded.advice is None or replayed.advice is None:
        return out
    if recorded.advice != replayed.advice:
        out.append(f"Layer 2 {recorded.advice} -> {replayed.advice}: {replayed.reason}")
    elif recorded.target_record_id != replayed.target_record_id:
        out.append(f"target {recorded.target_record_id} -> {replayed.target_record_id}")
    if recorded.route_to_consolidation != replayed.route_to_consolidation:
        out.append(
            "consolidation routing "
            f"{recorded.route_to_consolidation} -> {replayed.route_to_consolidation}"
        )
    if recorded.conflicts != replayed.conflicts:
        before = ", ".join(recorded.conflicts) or "none"
        after = ", ".join(replayed.conflicts) or "none"
        out.append(f"conflicts {before} -> {after}")
    return out


@dataclass(frozen=True, slots=True)
class ReplayedDecision:
    """One audit row and what replay made of it."""

    seq: int
    decision_id: str
    occurred_at: str
    action: str
    decision_type: str
    agent_id: str
    record_id: str | None
    recorded: Verdict
    replayed: Verdict | None
    reasons: tuple[str, ...] = ()
    skipped: str | None = None

    @property
    def changed(self) -> bool:
        """True when the replayed verdict differs from the recorded one."""
        return bool(self.reasons)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "seq": self.seq,
            "decision_id": self.decision_id,
            "occurred_at": self.occurred_at,
            "action": self.action,
            "decision_type": self.decision_type,
            "agent_id": self.agent_id,
            "record_id": self.record_id,
            "changed": self.changed,
            "reasons": list(self.reasons),
            "skipped": self.skipped,
            "recorded": self.recorded.to_json(),
            "replayed": None if self.replayed is None else self.replayed.to_json(),
        }


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """Every row of the window and what replay made of it."""

    since: datetime | None
    until: datetime | None
    advisor: str
    policy: dict[str, Any]
    decisions: tuple[ReplayedDecision, ...]

    @property
    def changed(self) -> list[ReplayedDecision]:
        """Rows whose decision would change."""
        return [d for d in self.decisions if d.changed]

    @property
    def skipped(self) -> list[ReplayedDecision]:
        """Rows that are not Gate evaluations replay can repeat (admin releases, unreadable
        input)."""
        return [d for d in self.decisions if d.skipped is not None]

    def to_json(self, *, include_unchanged: bool = False) -> dict[str, Any]:
        """A JSON-ready report; rows that replayed the same are only counted unless asked."""
        shown = [d for d in self.decisions if include_unchanged or d.changed or d.skipped]
        return {
            "since": None if self.since is None else self.since.isoformat(),
            "until": None if self.until is None else self.until.isoformat(),
            "advisor": self.advisor,
            "policy": self.policy,
            "examined": len(self.decisions),
            "replayed": len(self.decisions) - len(self.skipped),
            "changed": len(self.changed),
            "skipped": len(self.skipped),
            "decisions": [d.to_json() for d in shown],
        }


# --- the replayer -------------------------------------------------------------------------------


def caller_from_json(data: Mapping[str, Any]) -> CallerIdentity:
    """The caller identity an audit row recorded (see ``gate_io.caller_json``)."""
    rate = data.get("writes_per_minute")
    return CallerIdentity(
        agent_id=data["agent_id"],
        trust_level=TrustLevel(data["trust_level"]),
        allowed_types=frozenset(MemoryType(t) for t in data["allowed_types"]),
        max_write_level=AccessLevel(data["max_write_level"]),
        max_read_level=AccessLevel(data["max_read_level"]),
        writes_per_minute=None if rate is None else float(rate),
    )


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
    ) -> ReplayReport:
        """Replay every row of the window in ``seq`` order; ``progress`` gets the rows done."""
        policy = policy or ReplayPolicy()
        chosen = make_advisor(advisor, self._resolver, policy)
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
        recorded = recorded_verdict(row)
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
        if row["action"] == RELEASE:
            return replace(base, skipped="an admin's release, not a Gate evaluation")
        try:
            request = request_from_row(row)
        except (ValueError, KeyError, TypeError) as exc:
            return replace(base, skipped=str(exc).splitlines()[0])
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
        missing: list[str] = []
        if request.action is not GateAction.FORGET and record.evidence_links:
            rows = await self._db.fetch(
                SQL["replay_evidence_as_of"],
                list(record.evidence_links),
                at,
                decision_id,
                readable_levels(request.caller_identity),
            )
            known = {r["ref"] for r in rows}
            missing = [str(ref) for ref in record.evidence_links if ref not in known]
        caller = request.caller_identity
        tier_rate = policy.writes_per_minute.get(caller.trust_level)
        if caller.writes_per_minute is None and tier_rate is not None:
            caller = replace(caller, writes_per_minute=tier_rate)
        screening = screen(
            request,
            head=head,
            missing_evidence=missing,
            limiter=limiter,
            caller=caller,
            declarative_types=policy.declarative_types,
        )
        layer1 = screening.layer1
        if screening.verdict is not None:
            return _replayed_verdict(layer1, screening.verdict, screening.reason, None)
        if request.action is GateAction.FORGET:
            reason = "forgotten; its history stays readable"
            return _replayed_verdict(layer1, GateDecision.APPROVED, reason, None)
        advice = await self._advise(
            request, layer1, head=head, at=at, decision_id=decision_id, advisor=advisor
        )
        return _replayed_verdict(layer1, GateDecision.APPROVED, advice.rationale, advice)

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
