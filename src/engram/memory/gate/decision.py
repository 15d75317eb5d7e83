"""The Gate's decision, in one place for the live Gate and for audit replay.

A decision has two steps, each a function both callers use with what they found (the live
Gate from the store now, replay from the versions as they were at the recorded instant):

1. :func:`screen` runs Layer 1 and the optimistic version check and says whether the request
   is rejected, a conflict, or goes on to Layer 2 (reasons worded here only);
2. :func:`advise` asks the advisor, with the surroundings laid out the same way.

The Gate may advise more than once for one screening (it plans again when the record the
advice was about moved on before the write locked it); it never screens twice, so a request
takes one rate-limit token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engram.memory.gate.advisor import AdvisorContext, AdvisorDecision, GateAdvisor
from engram.memory.gate.checks import (
    DECLARATIVE_TYPES,
    CheckResult,
    Layer1Input,
    Layer1Outcome,
    run_layer1,
)
from engram.memory.gate.rate_limit import Limiter
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    CallerIdentity,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    Neighbour,
)


@dataclass(frozen=True, slots=True)
class Screening:
    """Layer 1's outcome and, when the request stops here, the verdict and its reason."""

    layer1: Layer1Outcome
    verdict: GateDecision | None = None
    reason: str = ""
    current_version: int | None = None

    @property
    def goes_on(self) -> bool:
        """True when Layer 2 decides the rest (nothing stopped the request here)."""
        return self.verdict is None


def rejection_reason(failures: Sequence[CheckResult]) -> str:
    """The reason of a Layer 1 rejection: each failed check and why."""
    return "; ".join(f"{check.name}: {check.detail}" for check in failures)


def stale_reason(expected: int | None, actual: int | None) -> str:
    """The reason of a version conflict."""
    return f"expected version {expected}, current version is {actual}"


def screen(
    request: GateRequest,
    *,
    head: MemoryRecord | None,
    missing_evidence: Sequence[str],
    limiter: Limiter,
    evidence_above: Sequence[str] = (),
    caller: CallerIdentity | None = None,
    declarative_types: frozenset[MemoryType] = DECLARATIVE_TYPES,
) -> Screening:
    """Layer 1, then the expected version against ``head`` (the record as the caller may see
    it: None when absent or hidden). ``missing_evidence`` are cited ids the caller may not
    read or that name nothing, ``evidence_above`` cited ids of records above the proposal's
    own access level (ADR-008). ``caller`` overrides the request's (replay fills in a
    tier's rate); ``declarative_types`` another policy's (replay only)."""
    # An internal write keeping the head's citations, at its level or above, shows them to no
    # reader that did not read them already (a cited record raised since is hidden from those
    # readers when they read): refused, such a record could never be re-embedded, flagged
    # back or consolidated again (hostile pass W).
    kept = (
        request.decision_type is not GateDecisionType.EXTERNAL
        and head is not None
        and list(request.record.evidence_links) == list(head.evidence_links)
        and request.record.access_level.allows(head.access_level)
    )
    layer1 = run_layer1(
        Layer1Input(
            action=request.action,
            record=request.record,
            caller=caller or request.caller_identity,
            decision_type=request.decision_type,
            expected_version=request.expected_version,
            head=head,
            missing_evidence=() if request.action is GateAction.FORGET else missing_evidence,
            evidence_above=() if request.action is GateAction.FORGET or kept else evidence_above,
            status=request.status,
        ),
        limiter,
        declarative_types=declarative_types,
    )
    if not layer1.passed:
        return Screening(layer1, GateDecision.REJECTED, rejection_reason(layer1.failures))
    expected = request.expected_version
    if head is not None and expected is not None and head.version != expected:
        return Screening(
            layer1, GateDecision.CONFLICT, stale_reason(expected, head.version), head.version
        )
    return Screening(layer1)


async def advise(
    request: GateRequest,
    layer1: Layer1Outcome,
    *,
    head: MemoryRecord | None,
    exact: Neighbour | None,
    nearest: Sequence[Neighbour],
    embedded: bool,
    advisor: GateAdvisor,
) -> AdvisorDecision:
    """Layer 2's advice on the record as Layer 1 left it. An UPDATE is measured against its
    own record, never against duplicates, so ``exact`` counts for a CREATE only.

    What the proposal's readers get is decided only by records they may read too: a
    neighbour above the proposal's level (after PII screening) is looked at for conflicts
    alone, and an exact duplicate above it is no duplicate (ADR-008, amended 2026-11-27)."""
    level = layer1.record.access_level
    if exact is not None and not level.allows(exact.record.access_level):
        exact = None
    context = AdvisorContext(
        action=request.action,
        decision_type=request.decision_type,
        caller=request.caller_identity,
        head=head,
        exact_duplicate=exact if request.action is GateAction.CREATE else None,
        neighbours=tuple(n for n in nearest if level.allows(n.record.access_level)),
        embedded=embedded,
        above=tuple(n for n in nearest if not level.allows(n.record.access_level)),
    )
    return await advisor.advise(layer1.record, context)
