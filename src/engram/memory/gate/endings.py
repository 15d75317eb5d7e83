"""How an evaluation that writes nothing but its audit row ends: a rejection (by Layer 1, or of
input no record could be made of), a version conflict, or the answer to a request id used
again (:mod:`~engram.memory.gate.replay`). Each is audited alone (``WritePath.audit_only``);
when the agent's request id committed meanwhile (a concurrent retry), that result answers.

Results leave here in the store's numbering of versions, except a conflict's
``current_version`` (told in the caller's); the Gate passes every answer through
:func:`~engram.memory.gate.replay.as_read_by` once.
"""

from __future__ import annotations

import time
from uuid import UUID

from engram.errors import DuplicateRequest, VersionConflict
from engram.infra.db import DatabaseAdapter
from engram.memory.audit.entry import new_decision_id
from engram.memory.audit.log import AuditEntry, AuditLog
from engram.memory.gate.advisor import AdvisorDecision
from engram.memory.gate.checks import SCHEMA, CheckResult, Layer1Outcome
from engram.memory.gate.decision import rejection_reason, stale_reason
from engram.memory.gate.plan import Timing, audit_entry
from engram.memory.gate.replay import (
    replayed,
    reuse_problem,
    told_current_version,
    without_taken_id,
)
from engram.memory.gate.requests import (
    GateRequest,
    GateResult,
    Proposal,
    RefusedInput,
    WriteOutcome,
)
from engram.memory.gate.signals import GateSignals
from engram.memory.gate.write_path import WritePath
from engram.memory.storable import escape_text
from engram.memory.types import GateDecision


class Endings:
    """The Gate's endings that write nothing but the audit row."""

    def __init__(
        self, *, db: DatabaseAdapter, audit: AuditLog, writes: WritePath, signals: GateSignals
    ) -> None:
        self._db = db
        self._audit = audit
        self._writes = writes
        self._signals = signals

    async def refuse(self, refused: RefusedInput, problems: list[str]) -> GateResult:
        """Reject input no record could be made of (the escaped problems as one schema check);
        a request id already recorded is answered with its recorded result."""
        if refused.request_id is not None:
            agent = refused.caller_identity.agent_id
            prior = await self._audit.by_request(agent, refused.request_id)
            if prior is not None:
                return await self.replay(prior, refused)
        timing = Timing(started=time.perf_counter())
        problems = [escape_text(problem) for problem in problems]
        check = CheckResult.fail(SCHEMA, "; ".join(problems), problems=problems)
        self._signals.rejected([check])
        result = GateResult(
            decision=GateDecision.REJECTED,
            decision_id=new_decision_id(),
            reason=rejection_reason([check]),
            layer1_checks=[check],
            layer2_decision=None,
            modified_record=None,
            failed_checks=[check],
        )
        return await self.unwritten(refused, result, timing)

    async def rejected(
        self,
        request: GateRequest,
        decision_id: UUID,
        layer1: Layer1Outcome,
        timing: Timing,
    ) -> GateResult:
        """A request Layer 1 rejected (a rate-limit refusal leaves its request id free)."""
        failures = layer1.failures
        self._signals.rejected(failures)
        request = without_taken_id(request, failures, decision_id)
        result = GateResult(
            decision=GateDecision.REJECTED,
            decision_id=decision_id,
            reason=rejection_reason(failures),
            layer1_checks=layer1.checks,
            layer2_decision=None,
            modified_record=None,
            retry_after_seconds=layer1.retry_after_seconds,
            failed_checks=failures,
        )
        return await self.unwritten(request, result, timing)

    async def conflict(
        self,
        request: GateRequest,
        decision_id: UUID,
        layer1: Layer1Outcome,
        *,
        advice: AdvisorDecision | None,
        conflict: VersionConflict,
        timing: Timing,
        reason: str | None = None,
    ) -> GateResult:
        """A version conflict (``conflict.actual`` the stored version of the head, or None):
        its current version and reason in the caller's numbering."""
        actual = await told_current_version(self._db, request, conflict.actual)
        result = GateResult(
            decision=GateDecision.CONFLICT,
            decision_id=decision_id,
            reason=reason or stale_reason(request.expected_version, actual),
            layer1_checks=layer1.checks,
            layer2_decision=advice,
            modified_record=None,
            record_id=request.record.record_id,
            current_version=actual,
        )
        return await self.unwritten(request, result, timing)

    async def unwritten(self, request: Proposal, result: GateResult, timing: Timing) -> GateResult:
        """Audit an evaluation that changes nothing else (rejected or conflicting)."""
        entry = audit_entry(
            request,
            decision_id=result.decision_id,
            decision=result.decision,
            outcome=WriteOutcome.NONE,
            reason=result.reason,
            checks=result.layer1_checks,
            advice=result.layer2_decision,
            record_id=request.record_id,
            version_id=None,
            duration_ms=(time.perf_counter() - timing.started) * 1000,
        )
        recorded = await self._audit_unwritten(entry, request)
        if recorded is not None:
            return recorded
        return self._signals.decision(request, result, timing)

    async def _audit_unwritten(self, entry: AuditEntry, request: Proposal) -> GateResult | None:
        """Commit the audit row of an evaluation that writes nothing else; when the agent's
        request id committed meanwhile (a concurrent retry), that result instead."""
        try:
            await self._writes.audit_only(entry)
        except DuplicateRequest as exc:
            prior = await self._audit.by_request(exc.agent_id, exc.request_id)
            if prior is None:  # pragma: no cover - the constraint saw the row
                raise
            return await self.replay(prior, request)
        return None

    async def replay(self, entry: AuditEntry, asked: Proposal) -> GateResult:
        """The answer to a request id used again (:mod:`engram.memory.gate.replay`)."""
        problem = reuse_problem(entry, asked)
        if problem is None:
            return await replayed(self._db, entry, asked.caller_identity)
        caller, kind = asked.caller_identity, asked.decision_type
        raw = {"request_id": entry.request_id, "request": asked.snapshot()}
        return await self.refuse(RefusedInput(asked.action, caller, kind, raw), [problem])


__all__ = ["Endings"]
