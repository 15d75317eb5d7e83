"""Readiness probes of the write path (the specification's §8 health checks).

- :func:`probe_gate` puts a synthetic request through the Gate's decision without writing a
  record: the shared rate bucket (the probe's own), Layer 1 on a fixed record, the neighbour
  query Layer 2 reads (the real statement, on a fixed unit vector) and the advisor's advice.
  Nothing is stored or audited.
- :func:`probe_audit_write` appends a synthetic row to the audit log inside a transaction
  that is then rolled back: the log accepts writes (role, triggers, lane lock, chain), and
  keeps nothing. The sequence number it drew is skipped, as after any failed write.
"""

from __future__ import annotations

from engram.config import EMBEDDING_DIMENSION
from engram.infra.db import DatabaseAdapter
from engram.memory import store
from engram.memory.audit.entry import new_decision_id
from engram.memory.audit.log import AuditLog
from engram.memory.fingerprint import content_hash
from engram.memory.gate.advisor import GateAdvisor
from engram.memory.gate.decision import advise, screen
from engram.memory.gate.plan import audit_entry
from engram.memory.gate.rate_limit import Decided, RateDecision, SharedRateLimiter
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    CallerIdentity,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    WriteOutcome,
)

PROBE = CallerIdentity.system("readiness-probe")
_UNIT = [1.0] + [0.0] * (EMBEDDING_DIMENSION - 1)
_ALLOWED = Decided(RateDecision(allowed=True, retry_after_seconds=0.0, per_minute=0.0))
#: The probe's own namespace, which no caller writes: the neighbour query finds nothing real.
NAMESPACE = "engram-readiness-probe"


class ProbeFailed(RuntimeError):
    """The synthetic request did not get the answer it always gets."""


def _request() -> GateRequest:
    record = MemoryRecord.draft(
        MemoryType.BELIEF,
        "The readiness probe checks that the Gate answers.",
        source_agent=PROBE.agent_id,
        namespace=NAMESPACE,
    )
    return GateRequest(GateAction.CREATE, record, PROBE, GateDecisionType.SELF_HEALING)


async def probe_gate(
    db: DatabaseAdapter, advisor: GateAdvisor, limiter: SharedRateLimiter | None = None
) -> None:
    """Decide a synthetic CREATE without writing it; raise :class:`ProbeFailed` on a wrong
    answer (errors of the database or advisor propagate)."""
    if limiter is not None:
        await limiter.acquire(PROBE.agent_id, PROBE.trust_level, None)
    request = _request()
    screening = screen(request, head=None, missing_evidence=(), limiter=_ALLOWED)
    if screening.verdict is not None:
        raise ProbeFailed(f"Layer 1 answered {screening.verdict}: {screening.reason}")
    record = request.record
    exact, nearest = await store.candidates(
        db,
        embedding=_UNIT,
        namespace=record.namespace,
        memory_type=record.type,
        content_hash=content_hash(record.content),
        levels=["public"],
        limit=1,
    )
    await advise(
        request,
        screening.layer1,
        head=None,
        exact=exact,
        nearest=nearest,
        embedded=True,
        advisor=advisor,
    )


class _RolledBack(Exception):
    pass


async def probe_audit_write(db: DatabaseAdapter, audit: AuditLog) -> None:
    """Append a synthetic audit row and roll it back (see the module docstring)."""
    request = _request()
    entry = audit_entry(
        request,
        decision_id=new_decision_id(),
        decision=GateDecision.REJECTED,
        outcome=WriteOutcome.NONE,
        reason="readiness probe (rolled back)",
        checks=[],
        advice=None,
        record_id=None,
        version_id=None,
        duration_ms=0.0,
    )
    try:
        async with db.transaction() as conn:
            await audit.append(conn, entry)
            raise _RolledBack
    except _RolledBack:
        return
