"""Ratings of retrieved records: whether a record helped, stored once per request.

A rating is the learned advisor's reward signal and, when useful, slows the record's decay, so
one request must never store two. Each rating keeps the key of the request that stored it
(unique per agent, migration 0017): the caller's idempotency key, or one drawn here when it
gave none. A retry under the same key (a client whose answer was lost, or the database
adapter repeating a statement whose commit was acknowledged to nobody) stores nothing and
answers with the first rating (``replayed``). A key belongs to one rating: sent again for
another record it is refused, and nothing is stored.

A replay reads the record again as the caller may read it now: a record since forgotten or
raised above the caller is answered as unknown, as any rating of it would be.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import structlog

from engram.errors import Forbidden, NotFound, ValidationFailed
from engram.infra.db import DatabaseAdapter, Row
from engram.infra.sql import load_queries
from engram.memory.storable import request_id_problem
from engram.memory.temporal import TemporalEngine
from engram.memory.types import CallerIdentity, MemoryStatus
from engram.retrieval.arguments import caller_problems
from engram.retrieval.budget import FeedbackBudget

log = structlog.get_logger(__name__)

SQL = load_queries("engram.retrieval.sql", "feedback.sql")

_SIGNAL = re.compile(r"[a-z_]{1,32}")  # the table's CHECK: ASCII only, refused here, not there


@dataclass(frozen=True, slots=True)
class FeedbackReceipt:
    """A stored rating. The row's id is not part of it: one sequence numbers every agent's
    ratings, so the gap between two of a caller's ids would count ratings of records it may
    not read. ``replayed``: the caller's request key had stored it already, and this request
    stored nothing."""

    record_id: UUID
    version_id: UUID
    useful: bool
    signal: str
    created_at: datetime
    replayed: bool = False


async def rate(
    db: DatabaseAdapter,
    temporal: TemporalEngine,
    budget: FeedbackBudget,
    caller: CallerIdentity,
    record_id: UUID,
    *,
    useful: bool,
    signal: str,
    request_id: str | None,
) -> FeedbackReceipt:
    """Store whether ``record_id`` helped ``caller`` (see the module docstring); a useful
    record also counts as a read."""
    if problems := caller_problems(caller):
        raise ValidationFailed(errors=problems)
    if caller.agent_id.startswith("system:"):
        raise Forbidden("feedback comes from authenticated agents only")
    given: object = signal  # in-process callers may pass anything
    problems = (
        []
        if isinstance(given, str) and _SIGNAL.fullmatch(given)
        else ["signal: 1-32 lower-case ASCII letters or '_'"]
    )
    if request_id is not None and (problem := request_id_problem(request_id)) is not None:
        problems.append(problem)
    # In-process callers again: the id's text would be stored and then not equal the stored
    # UUID (refused after the rating was written), and anything else reaches the driver.
    given_id: object = record_id
    given_useful: object = useful
    if not isinstance(given_id, UUID):
        problems.append("record_id: a UUID")
    if not isinstance(given_useful, bool):
        problems.append("useful: true or false")
    if problems:
        raise ValidationFailed(errors=problems)
    budget.take(caller.agent_id)
    head = await temporal.current(record_id, caller=caller, count_read=False)
    if head is None or head.status is MemoryStatus.FORGOTTEN:
        raise NotFound(f"no record {record_id}")
    key = request_id if request_id is not None else f"kernel:{uuid.uuid4()}"
    row: Row | None = await db.fetchrow(
        SQL["insert_feedback"], record_id, head.id, caller.agent_id, useful, signal, key
    )
    if row is None:  # a concurrent request under the same key committed after our snapshot
        row = await db.fetchrow(SQL["rating_of_request"], caller.agent_id, key)
    if row is None:  # pragma: no cover - the unique index saw a committed row
        raise AssertionError("a rating's key conflicted with no stored rating")
    if row["record_id"] != record_id:
        raise ValidationFailed(errors=["request_id: already used to rate another record"])
    # A key the kernel drew is the caller's single call repeated by the database adapter.
    replayed = bool(row["replayed"]) and request_id is not None
    if row["useful"] and not replayed:
        await temporal.note_reads([head])
    log.info(
        "retrieval.feedback",
        agent_id=caller.agent_id,
        useful=row["useful"],
        signal=row["signal"],
        replayed=replayed,
    )
    return FeedbackReceipt(
        row["record_id"],
        row["version_id"],
        row["useful"],
        row["signal"],
        row["created_at"],
        replayed,
    )
