"""A request id used again: what the Gate answers, and what a refusal keeps of the id.

Request ids make a write safe to retry (``Idempotency-Key`` on REST, ``request_id`` on MCP
and in process): the first decision recorded under an agent's id is the answer to every
later request under it. Three rules keep that from saying more than it should:

- **The same request** (the same action; for an UPDATE or FORGET, the same record) gets the
  recorded result, its record as the caller may read it *now*: none when the caller may not
  read the record's head (a record hidden from it since is absent for it, as for a read), and
  ``superseded_by``, ``evidence_links`` and the Layer 2 decision (its conflicts, its update
  candidate) naming nothing it may not read. A replay tells no more than the first answer
  did and a read would now.
- **Another request under a used id** (another action, or another record) is refused with
  the reason and audited, without the id (the id is taken); it is not answered with the first
  request's result, which would tell the caller something was done that was not.
- **A rate-limit refusal does not take the id.** It says "not now": a retry under the same id
  after ``retry_after_seconds`` is evaluated again. The refusal's audit row carries the id
  with a suffix naming its decision, so it can still be found.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from uuid import UUID

from engram.infra.db import DatabaseAdapter
from engram.memory import store
from engram.memory.audit.log import AuditEntry
from engram.memory.gate.advisor import AdvisorDecision
from engram.memory.gate.checks import RATE_LIMIT, CheckResult
from engram.memory.gate.requests import GateRequest, GateResult, Proposal
from engram.memory.gate.write_path import result_from_audit
from engram.memory.temporal.engine import as_readable, hide_unreadable_evidence
from engram.memory.types import CallerIdentity, GateAction, can_read, readable_levels


def reuse_problem(entry: AuditEntry, asked: Proposal) -> str | None:
    """Why ``asked`` may not be answered with ``entry``, the decision recorded under its
    request id (None: it is the same request)."""
    if entry.action != asked.action.value:
        return (
            f"request id {entry.request_id!r} was used for a {entry.action} by this agent; "
            f"a {asked.action.value} needs a request id of its own"
        )
    if (
        asked.action is not GateAction.CREATE
        and asked.record_id is not None
        and entry.record_id is not None
        and asked.record_id != entry.record_id
    ):
        return (
            f"request id {entry.request_id!r} was used for another record by this agent; "
            "each request needs a request id of its own"
        )
    return None


async def replayed(db: DatabaseAdapter, entry: AuditEntry, caller: CallerIdentity) -> GateResult:
    """The result recorded in ``entry``, its record and Layer 2 decision as ``caller`` may
    read them now."""
    result = await result_from_audit(db, entry, replayed=True)
    if result.layer2_decision is not None:
        advice = await _advice_as_read_by(db, result.layer2_decision, caller)
        result = dataclasses.replace(result, layer2_decision=advice)
    record = result.modified_record
    if record is None:
        return result
    head = await store.head(db, record.record_id)
    if head is None or not can_read(caller, head) or not can_read(caller, record):
        return dataclasses.replace(result, modified_record=None)
    [shown] = await as_readable(db, [record], readable_levels(caller))
    return dataclasses.replace(result, modified_record=shown)


async def as_read_by(db: DatabaseAdapter, result: GateResult, caller: CallerIdentity) -> GateResult:
    """``result`` with its record's ``evidence_links`` as ``caller`` may read them now: a
    record a write reinforced, updated or forgot may cite one raised above the caller since
    it was cited (a read leaves such ids out too)."""
    record = result.modified_record
    if record is None or not record.evidence_links:
        return result
    [shown] = await hide_unreadable_evidence(db, [record], readable_levels(caller))
    return result if shown is record else dataclasses.replace(result, modified_record=shown)


async def _advice_as_read_by(
    db: DatabaseAdapter, advice: AdvisorDecision, caller: CallerIdentity
) -> AdvisorDecision:
    """``advice`` naming only records ``caller`` may read now: a neighbour it was compared
    with (a conflict, the update candidate, the duplicate) may have been raised above the
    caller since the first answer named it; its conflict is left out and its id cleared."""
    named: set[UUID | None] = {c.existing_record_id for c in advice.conflicts}
    named |= {advice.target_record_id, advice.update_candidate_of, advice.nearest_record_id}
    refs = sorted(ref for ref in named if ref is not None)
    if not refs:
        return advice
    readable = await store.resolve_evidence(db, refs, levels=readable_levels(caller))
    if len(readable) == len(refs):
        return advice

    def shown(ref: UUID | None) -> UUID | None:
        return ref if ref in readable else None

    return dataclasses.replace(
        advice,
        conflicts=tuple(c for c in advice.conflicts if c.existing_record_id in readable),
        target_record_id=shown(advice.target_record_id),
        update_candidate_of=shown(advice.update_candidate_of),
        nearest_record_id=shown(advice.nearest_record_id),
    )


def without_taken_id(
    request: GateRequest, failures: Sequence[CheckResult], decision_id: UUID
) -> GateRequest:
    """``request`` as a refusal records it: a refusal by the rate limit alone keeps its
    request id free for the retry (the audit row gets the id with a suffix)."""
    if request.request_id is None or not failures:
        return request
    if any(check.name != RATE_LIMIT for check in failures):
        return request
    return dataclasses.replace(
        request, request_id=f"{request.request_id}#rate-limited:{decision_id}"
    )
