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
from typing import Any
from uuid import UUID

from engram.infra.db import DatabaseAdapter
from engram.memory import store
from engram.memory.audit.log import AuditEntry
from engram.memory.gate.advisor import AdvisorDecision
from engram.memory.gate.checks import RATE_LIMIT, CheckResult
from engram.memory.gate.plan import updated_reason
from engram.memory.gate.requests import GateRequest, GateResult, Proposal, WriteOutcome
from engram.memory.gate.write_path import result_from_audit
from engram.memory.temporal.engine import as_readable
from engram.memory.temporal.numbering import reader_number
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
    read them now (its numbers still the stored ones: :func:`as_read_by` renumbers)."""
    result = await result_from_audit(db, entry, replayed=True)
    if result.layer2_decision is not None:
        advice = await _advice_as_read_by(db, result.layer2_decision, caller)
        result = dataclasses.replace(result, layer2_decision=advice)
    record = result.modified_record
    if record is None:
        return result
    head = await store.head(db, record.record_id)
    if head is None or not can_read(caller, head) or not can_read(caller, record):
        # Left out, but its reason still names the version stored, in the caller's numbering
        # as the first answer gave it (the audit row's is the store's; hostile pass P).
        told = await reader_number(db, record.record_id, record.version, readable_levels(caller))
        reason = told_reason(result, record.version, told)
        return dataclasses.replace(result, modified_record=None, version=None, reason=reason)
    return result


def told_reason(result: GateResult, stored: int, told: int) -> str:
    """``result``'s reason with the version an UPDATE stored (``stored``) as the caller's
    number of it (``told``)."""
    before, after = updated_reason(stored), updated_reason(told)
    if stored == told or result.outcome is not WriteOutcome.UPDATED:
        return result.reason
    if not result.reason.startswith(before):
        return result.reason
    return after + result.reason.removeprefix(before)


async def as_read_by(db: DatabaseAdapter, result: GateResult, caller: CallerIdentity) -> GateResult:
    """``result`` as ``caller`` is told it, applied once to every answer of the Gate: its
    record in the caller's numbering (``version``, and the reason of an UPDATE, with it),
    ``superseded_by`` past versions it may not read, and ``evidence_links`` as it may read
    them now (a record a write reinforced, updated or forgot may cite one raised above the
    caller since it was cited; a read leaves such ids out too). A conflict's
    ``current_version`` is in its numbering already (:func:`told_current_version`)."""
    record = result.modified_record
    if record is None:
        return result
    [shown] = await as_readable(db, [record], readable_levels(caller))
    if shown is record:
        return result
    changes: dict[str, Any] = {"modified_record": shown}
    if result.version == record.version and shown.version != record.version:
        changes["version"] = shown.version
        changes["reason"] = told_reason(result, record.version, shown.version)
    return dataclasses.replace(result, **changes)


async def told_current_version(
    db: DatabaseAdapter, request: Proposal, stored: int | None
) -> int | None:
    """The current version a version conflict tells the caller, in its numbering: the head's
    (``stored``, or looked up when the write found none to name), None when the caller may not
    read the head."""
    caller = request.caller_identity
    record_id = request.record_id
    if record_id is None:
        return stored
    if stored is None:
        current = await store.head(db, record_id)
        if current is None or not can_read(caller, current):
            return None
        stored = current.version
    return await reader_number(db, record_id, stored, readable_levels(caller))


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
