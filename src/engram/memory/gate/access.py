"""The access-control matrix of the Gate (external writes only; see ADR-008).

| trust      | may write types             | highest level written | may change records of  |
|------------|-----------------------------|-----------------------|------------------------|
| trusted    | all                         | sensitive             | anyone                 |
| standard   | all                         | user                  | anyone (at ≤ its level)|
| restricted | episode, preference, resource, belief | agent       | itself only            |
| read_only  | none                        | none                  | none                   |

A caller may narrow these with its own ``allowed_types`` and ``max_write_level``; it can
never widen them beyond its tier.

Reading is by level alone: a caller reads records at or below its ``max_read_level``. A record
it may not read is, for that caller, absent everywhere, Layer 2 included (its duplicate,
candidate and conflict searches, the head of an UPDATE or FORGET, cited evidence).

A conflict resolution written on behalf of a caller changes a record only when the caller
may change it under this matrix, the record's standing (the tier of the agent whose write
gave it its current content; trusted for an internal origin) is not above the caller's
tier, and the newer record is visible to everyone who may read the older one: a lower tier
may challenge a higher tier's record and escalate the dispute, never supersede it, and
nothing hidden from a reader changes what that reader sees (ADR-010).

A learned advisor may *merge* an outside CREATE into its nearest record (write it as that
record's next version) only where :func:`merge_denial` finds nothing: the nearest record is the
caller's own, of the same type, namespace and access level, and the caller may change it
(ADR-020). Nobody else's record, and nothing any reader's view depends on beyond that record,
is ever rewritten by an advisor's choice.
"""

from __future__ import annotations

from dataclasses import replace

from engram.memory.types import AccessLevel, CallerIdentity, MemoryRecord, MemoryType, TrustLevel

TIER_TYPES: dict[TrustLevel, frozenset[MemoryType]] = {
    TrustLevel.TRUSTED: frozenset(MemoryType),
    TrustLevel.STANDARD: frozenset(MemoryType),
    TrustLevel.RESTRICTED: frozenset(
        {MemoryType.EPISODE, MemoryType.PREFERENCE, MemoryType.RESOURCE, MemoryType.BELIEF}
    ),
    TrustLevel.READ_ONLY: frozenset(),
}
TIER_WRITE_LEVEL: dict[TrustLevel, AccessLevel | None] = {
    TrustLevel.TRUSTED: AccessLevel.SENSITIVE,
    TrustLevel.STANDARD: AccessLevel.USER,
    TrustLevel.RESTRICTED: AccessLevel.AGENT,
    TrustLevel.READ_ONLY: None,
}
TIER_READ_LEVEL: dict[TrustLevel, AccessLevel] = {
    TrustLevel.TRUSTED: AccessLevel.SENSITIVE,
    TrustLevel.STANDARD: AccessLevel.USER,
    TrustLevel.RESTRICTED: AccessLevel.AGENT,
    TrustLevel.READ_ONLY: AccessLevel.USER,
}
#: Order of the tiers, lowest first: a resolution never lets a tier retire a higher one's record.
TIER_RANK: dict[TrustLevel, int] = {
    TrustLevel.READ_ONLY: 0,
    TrustLevel.RESTRICTED: 1,
    TrustLevel.STANDARD: 2,
    TrustLevel.TRUSTED: 3,
}


def caller_for_tier(agent_id: str, trust: TrustLevel, **narrowing: object) -> CallerIdentity:
    """A caller with its tier's defaults, optionally narrowed (``allowed_types=…`` etc.)."""
    base = CallerIdentity(
        agent_id=agent_id,
        trust_level=trust,
        allowed_types=TIER_TYPES[trust],
        max_write_level=TIER_WRITE_LEVEL[trust] or AccessLevel.PUBLIC,
        max_read_level=TIER_READ_LEVEL[trust],
    )
    return replace(base, **narrowing)  # type: ignore[arg-type]


def write_denial(
    caller: CallerIdentity, record: MemoryRecord, *, existing: MemoryRecord | None = None
) -> str | None:
    """Why ``caller`` may not write ``record`` (and change ``existing``), or None if it may."""
    tier_level = TIER_WRITE_LEVEL[caller.trust_level]
    if not caller.can_write or tier_level is None:
        return f"agent {caller.agent_id!r} is read-only"
    allowed_types = caller.allowed_types & TIER_TYPES[caller.trust_level]
    if record.type not in allowed_types:
        return f"agent {caller.agent_id!r} may not write {record.type.value} records"
    ceiling = min(caller.max_write_level, tier_level, key=lambda level: level.rank)
    if not ceiling.allows(record.access_level):
        return (
            f"agent {caller.agent_id!r} may write up to access level {ceiling.value}, "
            f"not {record.access_level.value}"
        )
    if existing is not None:
        if existing.type not in allowed_types:
            return f"agent {caller.agent_id!r} may not change {existing.type.value} records"
        if not ceiling.allows(existing.access_level):
            return (
                f"agent {caller.agent_id!r} may not change a {existing.access_level.value} record"
            )
        if caller.trust_level is TrustLevel.RESTRICTED and existing.source_agent != caller.agent_id:
            return "a restricted agent may change only records it wrote"
    return None


def resolution_denial(
    writer: CallerIdentity, record: MemoryRecord, *, standing: TrustLevel, newer: MemoryRecord
) -> str | None:
    """Why a conflict resolution on ``writer``'s behalf, prompted by ``newer``, may not change
    ``record`` (whose content a ``standing``-tier agent wrote), or None if it may."""
    if not record.access_level.allows(newer.access_level):
        # Its readers could not see why the record changed: the newer one is hidden from them.
        return (
            f"the newer record ({newer.access_level.value}) is hidden from readers of the "
            f"existing one ({record.access_level.value})"
        )
    denial = write_denial(writer, record, existing=record)
    if denial is not None:
        return denial
    if TIER_RANK[standing] > TIER_RANK[writer.trust_level]:
        return (
            f"a {writer.trust_level.value} agent's claim may not change a record "
            f"a {standing.value} agent wrote"
        )
    return None


def merge_denial(
    caller: CallerIdentity, proposal: MemoryRecord, nearest: MemoryRecord
) -> str | None:
    """Why an advisor may not write ``proposal`` as the next version of ``nearest`` on
    ``caller``'s behalf, or None if it may (see the module docstring)."""
    if nearest.source_agent != caller.agent_id:
        return "the nearest record was written by another agent"
    if nearest.type is not proposal.type or nearest.namespace != proposal.namespace:
        return "the nearest record is of another type or namespace"
    if nearest.access_level is not proposal.access_level:
        return "the nearest record has another access level"
    return write_denial(caller, proposal, existing=nearest)
