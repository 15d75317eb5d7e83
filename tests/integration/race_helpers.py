"""What the race tests of hostile pass H share: paths started together with small random
delays, and the invariants checked after every round."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from typing import Any, TypeVar
from uuid import UUID

import httpx

from engram import Kernel

T = TypeVar("T")

#: Statuses a REST caller may get in these races; anything else (a 500) is a finding.
TYPED = frozenset({200, 201, 202, 403, 404, 409, 422, 428, 429})


async def jittered(
    rng: random.Random, steps: Iterable[Callable[[], Awaitable[T]]], *, spread: float = 0.03
) -> list[T]:
    """Start every step at once, each after its own random delay of up to ``spread`` s."""

    async def late(step: Callable[[], Awaitable[T]], wait: float) -> T:
        await asyncio.sleep(wait)
        return await step()

    return list(await asyncio.gather(*(late(step, rng.uniform(0, spread)) for step in steps)))


def typed(responses: Iterable[httpx.Response]) -> list[str]:
    """The responses that are neither a success nor a typed problem (empty when all are)."""
    bad = []
    for response in responses:
        if response.status_code not in TYPED:
            bad.append(
                f"{response.request.method} {response.request.url.path}: "
                f"{response.status_code} {response.text[:300]}"
            )
        elif response.status_code >= 400:
            body = response.json()
            if not str(body.get("type", "")).startswith("urn:engram:problem:"):
                bad.append(f"untyped problem {response.status_code}: {response.text[:300]}")
    return bad


async def broken_invariants(
    kernel: Kernel, acknowledged: Iterable[tuple[UUID, UUID]] = ()
) -> list[str]:
    """Every invariant of the version store and the audit log that does not hold now.

    ``acknowledged``: (record id, version id) of writes a caller was told succeeded."""
    db = kernel.db
    found: list[str] = []
    rows = await db.fetch(
        "SELECT record_id, array_agg(version ORDER BY version) AS versions, "
        "count(*) FILTER (WHERE superseded_by IS NULL) AS heads "
        "FROM memories GROUP BY record_id"
    )
    for row in rows:
        versions = list(row["versions"])
        if row["heads"] != 1:
            found.append(f"{row['record_id']}: {row['heads']} heads")
        if versions != list(range(1, len(versions) + 1)):
            found.append(f"{row['record_id']}: versions {versions}")
    broken_chain = await db.fetch(
        "SELECT o.record_id, o.version FROM memories o LEFT JOIN memories n "
        "ON n.id = o.superseded_by WHERE o.superseded_by IS NOT NULL AND (n.id IS NULL "
        "OR n.record_id <> o.record_id OR n.version <> o.version + 1 "
        "OR o.status <> 'superseded' OR o.ingestion_time_end IS NULL)"
    )
    found += [f"{r['record_id']}: version {r['version']} badly closed" for r in broken_chain]
    open_ended = await db.fetch(
        "SELECT record_id FROM memories WHERE superseded_by IS NULL "
        "AND status <> 'forgotten' AND ingestion_time_end IS NOT NULL"
    )
    found += [f"{r['record_id']}: live head with an end" for r in open_ended]
    stranded = await db.fetch(
        "SELECT h.record_id FROM memories h WHERE h.superseded_by IS NULL "
        "AND h.status = 'consolidated' AND NOT EXISTS ("
        " SELECT 1 FROM memory_edges e JOIN memories s ON s.id = e.source_id "
        " JOIN memories t ON t.id = e.target_id JOIN memories sh ON sh.record_id = s.record_id "
        " WHERE e.kind = 'derived_from' AND t.record_id = h.record_id "
        " AND sh.superseded_by IS NULL AND (sh.status <> 'forgotten' OR EXISTS ("
        "  SELECT 1 FROM librarian_audit a WHERE a.record_id = sh.record_id"
        "  AND a.action = 'FORGET' AND a.decision = 'approved'"
        "  AND a.decision_type = 'external')))"
    )
    # A summary an agent forgot leaves its sources consolidated by design (ADR-018: the
    # knowledge is forgotten; a rollback of the batch restores them).
    found += [f"{r['record_id']}: consolidated with no live summary" for r in stranded]
    doubled = await db.fetch(
        "SELECT DISTINCT h.record_id FROM memories h JOIN memories t ON t.record_id = h.record_id "
        "JOIN memory_edges e ON e.target_id = t.id AND e.kind = 'derived_from' "
        "JOIN memories s ON s.id = e.source_id AND s.gate_decision_type = 'consolidation' "
        "JOIN memories sh ON sh.record_id = s.record_id AND sh.superseded_by IS NULL "
        "WHERE h.superseded_by IS NULL AND h.status IN ('active', 'challenged') "
        "AND sh.status <> 'forgotten'"
    )
    found += [f"{r['record_id']}: readable and in a live summary" for r in doubled]
    for record_id, version_id in acknowledged:
        owner = await db.fetchval("SELECT record_id FROM memories WHERE id = $1", version_id)
        if owner != record_id:
            found.append(f"acknowledged version {version_id} of {record_id} is not stored")
    verified = await kernel.audit.verify()
    if not verified.ok:
        found.append(f"audit verify: {verified}")
    state = await kernel.audit_state.compare(datetime.now(UTC))
    if not state.ok:
        found.append(f"audit state: {[d.to_json() for d in state.differences][:5]}")
    return found


def approved_version(response: httpx.Response) -> tuple[UUID, UUID] | None:
    """(record id, version id) of an approved write that stored a version, else None."""
    if response.status_code not in (200, 201):
        return None
    body: dict[str, Any] = response.json()
    record = body.get("record")
    if body.get("outcome") not in ("created", "updated") or not record:
        return None
    return UUID(record["record_id"]), UUID(record["id"])
