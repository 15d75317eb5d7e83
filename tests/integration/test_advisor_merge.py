"""A learned advisor's UPDATE: an outside CREATE merged into the caller's own nearest record
as its next version (ADR-020), through the real Gate, store and audit log."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import replace
from datetime import UTC, datetime
from uuid import UUID

import asyncpg
import numpy as np
import pytest

from engram import Kernel
from engram.memory.gate.advisor import (
    AdvisorAction,
    AdvisorContext,
    AdvisorDecision,
    HeuristicAdvisor,
)
from engram.memory.gate.learned import RLAdvisor
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.rl.features import FEATURE_COUNT
from engram.memory.rl.policy import ACTIONS, AdvisorPolicy, allowed_actions
from engram.memory.types import AccessLevel, GateDecision, MemoryRecord, TrustLevel
from tests.conftest import ScratchDatabase
from tests.integration.gate_helpers import (
    BOSS,
    EXTERNAL,
    INTERN,
    OTHER,
    WRITER,
    belief,
    create,
)

BEFORE = "The data team's standup is at 09:30 every weekday."
CHANGE = "The data team moved its standup from 09:30 to 10:15."


MERGES = AdvisorPolicy("rl@merge", np.zeros((3, FEATURE_COUNT)), np.asarray([0.0, 0.0, 9.0]))


def _merging(kernel: Kernel) -> None:
    """Serve a policy that merges wherever the Gate allows it."""
    kernel.gate.use_advisor(RLAdvisor(HeuristicAdvisor(kernel.conflicts), MERGES))


def _stopped_by_access_alone(result: GateResult) -> None:
    """The write's state would have allowed a merge: what stopped it is the access rule."""
    advice = result.layer2_decision
    assert advice is not None
    assert advice.features is not None
    assert 1.0 == allowed_actions(advice.features)[ACTIONS.index("UPDATE")]
    assert not advice.merge_allowed


async def _chain(kernel: Kernel, record_id: UUID) -> list[dict[str, object]]:
    rows = await kernel.db.fetch(
        "SELECT id, version, content, superseded_by, source_agent FROM engram.memories "
        "WHERE record_id = $1 ORDER BY version",
        record_id,
    )
    return [dict(r) for r in rows]


async def test_a_stated_change_becomes_the_next_version_of_the_agents_own_record(
    kernel: Kernel,
) -> None:
    """The change is stored as version 2 of the record it changes: the caller gets that
    record's id back, the old content stays in its history behind a `supersedes` edge, the
    audit row says `updated` and verifies, and a search of current records no longer offers
    the old value."""
    first = await kernel.gate.evaluate(create(belief(BEFORE), WRITER))
    assert "created" == first.outcome.value, first.reason
    _merging(kernel)
    merged = await kernel.gate.evaluate(create(belief(CHANGE), WRITER))
    assert GateDecision.APPROVED == merged.decision, merged.reason
    assert "updated" == merged.outcome.value, merged.reason
    assert first.record_id == merged.record_id
    assert 2 == merged.version
    assert merged.layer2_decision is not None
    assert "rl@merge" == merged.layer2_decision.source
    assert first.record_id is not None
    chain = await _chain(kernel, first.record_id)
    assert [BEFORE, CHANGE] == [row["content"] for row in chain]
    assert chain[0]["superseded_by"] == chain[1]["id"]
    assert chain[1]["superseded_by"] is None
    edge = await kernel.db.fetchrow(
        "SELECT kind, provenance FROM engram.memory_edges WHERE source_id = $1 AND target_id = $2",
        chain[1]["id"],
        chain[0]["id"],
    )
    assert edge is not None
    assert "supersedes" == edge["kind"]
    assert "merge" == edge["provenance"]["reason"]
    audit = await kernel.db.fetchrow(
        "SELECT action, outcome, record_id, version_id FROM engram.librarian_audit "
        "WHERE decision_id = $1",
        merged.decision_id,
    )
    assert ("CREATE", "updated") == (audit["action"], audit["outcome"])
    assert (first.record_id, chain[1]["id"]) == (audit["record_id"], audit["version_id"])
    assert (await kernel.audit.verify()).ok
    found = await kernel.retrieval.search(WRITER, "when is the data team standup", limit=5)
    contents = [hit.record.content for hit in found.hits]
    assert CHANGE in contents
    assert BEFORE not in contents
    # replay under the same model decides the same; under the heuristic the merge would
    # have been a new record, and replay says so
    same = await kernel.replay.replay(advisor="rl", model=MERGES)
    assert [] == [d.reasons for d in same.changed]
    heuristic = await kernel.replay.replay()
    assert [merged.decision_id] == [UUID(d.decision_id) for d in heuristic.changed]
    assert "created" == heuristic.changed[0].replayed.outcome


async def test_another_agents_record_is_never_merged_into(kernel: Kernel) -> None:
    """The same change written by another agent is a new record; the first agent's record is
    untouched."""
    first = await kernel.gate.evaluate(create(belief(BEFORE), WRITER))
    assert first.record_id is not None
    _merging(kernel)
    theirs = await kernel.gate.evaluate(create(belief(CHANGE, source_agent=OTHER.agent_id), OTHER))
    assert "created" == theirs.outcome.value, theirs.reason
    _stopped_by_access_alone(theirs)
    assert theirs.record_id != first.record_id
    assert [BEFORE] == [row["content"] for row in await _chain(kernel, first.record_id)]


async def test_a_change_at_another_access_level_is_never_merged(kernel: Kernel) -> None:
    """A proposal whose level differs from the nearest record's (here: raised to `user`)
    would change who may read the record: it is a new record."""
    first = await kernel.gate.evaluate(create(belief(BEFORE), WRITER))
    assert first.record_id is not None
    _merging(kernel)
    other_level = await kernel.gate.evaluate(
        create(belief(CHANGE, access_level=AccessLevel.USER), WRITER)
    )
    assert "created" == other_level.outcome.value, other_level.reason
    _stopped_by_access_alone(other_level)
    assert [BEFORE] == [row["content"] for row in await _chain(kernel, first.record_id)]


async def test_concurrent_merges_into_one_record_keep_one_chain_and_lose_nothing(
    kernel: Kernel,
) -> None:
    """Four changes at once, each aimed at the same record: every write is approved, the
    record keeps one unbroken chain with one head, and every change is stored somewhere
    (a version of that record, or a record of its own when its advice was re-planned)."""
    first = await kernel.gate.evaluate(create(belief(BEFORE), WRITER))
    assert first.record_id is not None
    _merging(kernel)
    changes = [
        f"The data team moved its standup from 09:30 to {hour}:15." for hour in (10, 11, 13, 14)
    ]
    results = await asyncio.gather(
        *(kernel.gate.evaluate(create(belief(text), WRITER)) for text in changes)
    )
    assert all(GateDecision.APPROVED == r.decision for r in results), [r.reason for r in results]
    chain = await _chain(kernel, first.record_id)
    assert len(chain) >= 2  # at least one change was merged
    assert list(range(1, len(chain) + 1)) == [row["version"] for row in chain]
    assert 1 == sum(1 for row in chain if row["superseded_by"] is None)
    for older, newer in itertools.pairwise(chain):
        assert older["superseded_by"] == newer["id"]
    stored = {
        r["content"]
        for r in await kernel.db.fetch(
            "SELECT content FROM engram.memories WHERE content = ANY($1::text[])", changes
        )
    }
    assert set(changes) == stored
    assert (await kernel.audit.verify()).ok


class _RogueAdvisor:
    """An advisor that ignores the merge rule: it merges into whatever record is nearest."""

    version = "rogue@1"

    def __init__(self, kernel: Kernel) -> None:
        self._heuristic = HeuristicAdvisor(kernel.conflicts)

    async def advise(self, record: MemoryRecord, context: AdvisorContext) -> AdvisorDecision:
        decision = await self._heuristic.advise(record, context)
        nearest = max(context.neighbours, key=lambda n: n.similarity)
        return replace(
            decision, action=AdvisorAction.UPDATE, target_record_id=nearest.record.record_id
        )


async def test_the_write_path_refuses_a_merge_the_rule_does_not_allow(kernel: Kernel) -> None:
    """Defence in depth: whatever an advisor says, another agent's record is not rewritten;
    the write fails whole (no version, no audit row of a merge)."""
    first = await kernel.gate.evaluate(create(belief(BEFORE), WRITER))
    assert first.record_id is not None
    kernel.gate.use_advisor(_RogueAdvisor(kernel))
    with pytest.raises(RuntimeError, match="another agent"):
        await kernel.gate.evaluate(create(belief(CHANGE, source_agent=OTHER.agent_id), OTHER))
    assert [BEFORE] == [row["content"] for row in await _chain(kernel, first.record_id)]
    merged = await kernel.db.fetchval(
        "SELECT count(*) FROM engram.librarian_audit WHERE outcome = 'updated'"
    )
    assert 0 == merged
    assert (await kernel.audit.verify()).ok


async def test_a_change_carrying_personal_data_is_quarantined_apart_not_merged(
    kernel: Kernel,
) -> None:
    """Layer 1 quarantines a change that carries a phone number (level `sensitive`): it
    would raise who may read the record, so it is a record of its own and the agent's
    record keeps its level and content."""
    first = await kernel.gate.evaluate(create(belief(BEFORE), WRITER))
    assert first.record_id is not None
    _merging(kernel)
    pii = await kernel.gate.evaluate(
        create(belief(f"{CHANGE[:-1]}; ask Dana Whitfield on +1 415 555 0134."), WRITER)
    )
    assert GateDecision.APPROVED == pii.decision, pii.reason
    assert "created" == pii.outcome.value
    assert pii.modified_record is not None
    assert AccessLevel.SENSITIVE == pii.modified_record.access_level
    assert [BEFORE] == [row["content"] for row in await _chain(kernel, first.record_id)]


async def test_what_the_record_said_before_a_merge_stays_answerable(kernel: Kernel) -> None:
    """An as-of read before the merge answers with the old content, after it with the new."""
    first = await kernel.gate.evaluate(create(belief(BEFORE), WRITER))
    assert first.record_id is not None
    await asyncio.sleep(0.01)
    between = datetime.now(UTC)
    await asyncio.sleep(0.01)
    _merging(kernel)
    merged = await kernel.gate.evaluate(create(belief(CHANGE), WRITER))
    assert "updated" == merged.outcome.value
    then = await kernel.temporal.query(
        record_id=first.record_id, as_of_ingestion=between, caller=WRITER
    )
    now = await kernel.temporal.query(record_id=first.record_id, caller=WRITER)
    assert [BEFORE] == [r.content for r in then]
    assert [CHANGE] == [r.content for r in now]


async def test_a_restricted_agent_merges_only_into_its_own_record(kernel: Kernel) -> None:
    """The lowest writing tier: a restricted agent's change merges into its own record, but
    never into a trusted agent's record it can read."""
    theirs = await kernel.gate.evaluate(create(belief(BEFORE, source_agent=BOSS.agent_id), BOSS))
    # its own record lives in a namespace of its own, so that neither case is the other's
    # nearest record
    own = await kernel.gate.evaluate(
        create(belief(BEFORE, source_agent=INTERN.agent_id, namespace="intern"), INTERN)
    )
    assert theirs.record_id is not None
    assert own.record_id is not None
    _merging(kernel)
    mine = await kernel.gate.evaluate(create(belief(CHANGE, source_agent=INTERN.agent_id), INTERN))
    assert "created" == mine.outcome.value, mine.reason
    _stopped_by_access_alone(mine)
    assert [BEFORE] == [row["content"] for row in await _chain(kernel, theirs.record_id)]
    merged = await kernel.gate.evaluate(
        create(belief(CHANGE, source_agent=INTERN.agent_id, namespace="intern"), INTERN)
    )
    assert "updated" == merged.outcome.value, merged.reason
    assert own.record_id == merged.record_id
    assert [BEFORE, CHANGE] == [row["content"] for row in await _chain(kernel, own.record_id)]


@pytest.mark.parametrize("odd", ["\x00", "\ud800"])
async def test_odd_input_is_refused_before_any_merge(kernel: Kernel, odd: str) -> None:
    """A change carrying a NUL or a lone surrogate is refused by Layer 1, typed and audited;
    the record it would have merged into is untouched."""
    first = await kernel.gate.evaluate(create(belief(BEFORE), WRITER))
    assert first.record_id is not None
    _merging(kernel)
    refused = await kernel.gate.evaluate(create(belief(CHANGE + odd), WRITER))
    assert GateDecision.REJECTED == refused.decision
    assert [c.name for c in refused.failed_checks] == ["schema"]
    assert [BEFORE] == [row["content"] for row in await _chain(kernel, first.record_id)]
    audited = await kernel.db.fetchval(
        "SELECT decision FROM engram.librarian_audit WHERE decision_id = $1", refused.decision_id
    )
    assert "rejected" == audited


async def test_a_merge_racing_a_forget_of_its_record_loses_nothing(kernel: Kernel) -> None:
    """The agent forgets its record while a change to it is being written, five times over:
    both are approved each time, and the change is stored once, either as the forgotten
    record's last version (the merge came first) or as a record of its own."""
    _merging(kernel)
    for round_ in range(5):
        base = BEFORE.replace("data team", f"data team {round_}")
        change = CHANGE.replace("data team", f"data team {round_}")
        heuristic = kernel.gate.use_advisor(HeuristicAdvisor(kernel.conflicts))
        first = await kernel.gate.evaluate(create(belief(base), WRITER))
        kernel.gate.use_advisor(heuristic)
        assert first.record_id is not None
        assert first.modified_record is not None
        merged, forgot = await asyncio.gather(
            kernel.gate.evaluate(create(belief(change), WRITER)),
            kernel.gate.evaluate(GateRequest.forget(first.modified_record, WRITER, EXTERNAL)),
        )
        assert GateDecision.APPROVED == merged.decision, merged.reason
        assert forgot.decision in (GateDecision.APPROVED, GateDecision.CONFLICT), forgot.reason
        rows = await kernel.db.fetch(
            "SELECT record_id FROM engram.memories WHERE content = $1", change
        )
        assert 1 == len(rows)
        chain = await _chain(kernel, first.record_id)
        assert 1 == sum(1 for row in chain if row["superseded_by"] is None)
    assert (await kernel.audit.verify()).ok


async def test_killed_backends_during_merges_leave_each_change_once(
    quick_breaker_kernel: Kernel, database: ScratchDatabase
) -> None:
    """Backends killed while twelve changes merge into twelve records: every acknowledged
    write is stored once and audited once, every chain stays whole, and retrying each
    request id answers with what was stored without writing again."""
    kernel = quick_breaker_kernel
    writer = replace(WRITER, trust_level=TrustLevel.TRUSTED)
    teams = [f"team {n}" for n in range(12)]
    firsts = [
        await kernel.gate.evaluate(create(belief(BEFORE.replace("data team", t)), writer))
        for t in teams
    ]
    _merging(kernel)
    admin = await asyncpg.connect(database.admin_url)

    killed: list[bool] = []

    async def killer() -> None:
        for _ in range(5):
            await asyncio.sleep(0.03)
            killed.extend(
                await admin.fetchval(
                    "SELECT coalesce(array_agg(pg_terminate_backend(pid)), '{}') "
                    "FROM pg_stat_activity "
                    "WHERE datname = $1 AND usename = 'engram_runtime' AND state <> 'idle'",
                    database.name,
                )
            )

    def change(team: str) -> GateRequest:
        text = CHANGE.replace("data team", team)
        return create(belief(text), writer, request_id=f"change-{team}")

    try:
        writes = [kernel.gate.evaluate(change(t)) for t in teams]
        results, _ = await asyncio.gather(asyncio.gather(*writes, return_exceptions=True), killer())
    finally:
        await admin.close()
    assert any(killed)  # the fault was real: backends died while the merges ran
    await asyncio.sleep(0.3)  # the kills may have opened the breaker: let it probe again
    failed = [r for r in results if isinstance(r, BaseException)]
    assert all(type(r).__module__.startswith("engram") for r in failed), failed
    retried = [await kernel.gate.evaluate(change(t)) for t in teams]
    assert all(GateDecision.APPROVED == r.decision for r in retried), retried
    assert any("updated" == r.outcome.value for r in retried)  # the merge path was taken
    for t, first in zip(teams, firsts, strict=True):
        text = CHANGE.replace("data team", t)
        assert 1 == await kernel.db.fetchval(
            "SELECT count(*) FROM engram.memories WHERE content = $1", text
        )
        assert first.record_id is not None
        chain = await _chain(kernel, first.record_id)
        assert list(range(1, len(chain) + 1)) == [row["version"] for row in chain]
        assert 1 == sum(1 for row in chain if row["superseded_by"] is None)
    audited = await kernel.db.fetchval(
        "SELECT count(*) FROM engram.librarian_audit WHERE request_id LIKE 'change-%'"
    )
    assert len(teams) == audited
    assert (await kernel.audit.verify()).ok
