"""Verdicts of audit replay: the recorded decision, the replayed one, how they differ, and the
report of a whole replay."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engram.memory.gate.advisor import (
    AdvisorAction,
    AdvisorDecision,
)
from engram.memory.gate.checks import Layer1Outcome
from engram.memory.types import (
    GateDecision,
)


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
    if not isinstance(advice, Mapping):
        raise ValueError("the recorded Layer 2 advice is not an object")
    conflicts = advice["conflicts"]
    if not isinstance(conflicts, list) or not all(isinstance(c, Mapping) for c in conflicts):
        raise ValueError("the recorded Layer 2 conflicts are not a list of objects")
    return {
        "advice": str(advice["action"]),
        "target_record_id": advice.get("target_record_id"),
        "route_to_consolidation": bool(advice.get("route_to_consolidation", False)),
        "conflicts": tuple(
            sorted(f"{c['classification']}:{c['existing_record_id']}" for c in conflicts)
        ),
    }


def _failed_checks(checks: Any) -> tuple[str, ...]:
    if not isinstance(checks, list) or not all(isinstance(c, Mapping) for c in checks):
        raise ValueError("the recorded Layer 1 checks are not a list of objects")
    return tuple(str(c["name"]) for c in checks if not c.get("passed", True))


def recorded_verdict(row: Mapping[str, Any]) -> Verdict:
    """The verdict an audit row (as :func:`engram.memory.audit.log.row_json`) records;
    ``ValueError`` (or ``KeyError``) when its checks or advice are not of the shape the Gate
    writes (an edited row)."""
    return Verdict(
        decision=row["decision"],
        outcome=row["outcome"],
        reason=row["reason"],
        failed_checks=_failed_checks(row.get("layer1_checks") or []),
        **_advice_fields(row.get("layer2_decision")),
    )


def columns_verdict(row: Mapping[str, Any]) -> Verdict:
    """The verdict of an audit row read from its plain columns alone (decision, outcome,
    reason), for a row whose checks or advice cannot be read."""
    return Verdict(decision=row["decision"], outcome=row["outcome"], reason=row["reason"])


def replayed_verdict(
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
