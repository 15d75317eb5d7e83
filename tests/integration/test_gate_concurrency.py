"""Optimistic locking under real concurrency: racing updaters on separate connections."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from engram import Kernel
from engram.infra.db import Connection
from engram.memory.audit import LANES, AuditEntry
from engram.memory.types import GateDecision
from tests.integration.gate_helpers import STANDARD, belief, create, update

# Generous enough that the rate limiter never takes part in these races.
UNLIMITED = replace(STANDARD, writes_per_minute=1_000_000)

WRITERS = 32
ROUNDS = 6


@pytest.mark.slow
async def test_racing_updaters_one_wins_per_version_and_the_chain_never_forks(
    kernel: Kernel,
) -> None:
    """32 updaters with one expected version: one success, the rest CONFLICT, every round."""
    first = await kernel.gate.evaluate(
        create(belief("The feature flag service is Unleash."), UNLIMITED)
    )
    assert first.record_id is not None
    record_id = first.record_id
    attempts = successes = conflicts = 0
    for round_no in range(ROUNDS):
        expected = 1 + successes
        results = await asyncio.gather(
            *(
                kernel.gate.evaluate(
                    update(
                        record_id,
                        f"The feature flag service is build {round_no}-{writer} of Unleash.",
                        expected,
                        UNLIMITED,
                    )
                )
                for writer in range(WRITERS)
            )
        )
        attempts += len(results)
        won = [r for r in results if r.decision is GateDecision.APPROVED]
        lost = [r for r in results if r.decision is GateDecision.CONFLICT]
        assert 1 == len(won), [r.reason for r in results if r not in won][:3]
        assert WRITERS - 1 == len(lost)
        assert all(r.current_version == expected + 1 for r in lost)
        successes += len(won)
        conflicts += len(lost)

    assert attempts == successes + conflicts
    versions = await kernel.db.fetch(
        "SELECT version, id, superseded_by FROM memories WHERE record_id = $1 ORDER BY version",
        record_id,
    )
    assert list(range(1, 2 + successes)) == [row["version"] for row in versions]
    heads = [row for row in versions if row["superseded_by"] is None]
    assert 1 == len(heads)
    assert 1 + successes == heads[0]["version"]
    for older, newer in itertools.pairwise(versions):
        assert newer["id"] == older["superseded_by"]
    assert 1 + attempts == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    report = await kernel.audit.verify()
    assert report.ok, report


@pytest.mark.slow
async def test_concurrent_creates_are_all_audited_in_verifiable_lanes(kernel: Kernel) -> None:
    """64 concurrent CREATEs commit 64 versions and 64 audit rows whose chain verifies."""
    results = await asyncio.gather(
        *(
            kernel.gate.evaluate(
                create(belief(f"Service number {n} runs on port {8000 + n}."), UNLIMITED)
            )
            for n in range(64)
        )
    )
    assert all(r.decision is GateDecision.APPROVED for r in results)
    assert 64 == await kernel.db.fetchval("SELECT count(*) FROM memories")
    lanes = await kernel.db.fetchval("SELECT count(DISTINCT lane) FROM librarian_audit")
    assert lanes > 1
    report = await kernel.audit.verify()
    assert (True, 64) == (report.ok, report.rows_checked)


async def test_appends_racing_for_one_lane_chain_in_commit_order(kernel: Kernel) -> None:
    """24 transactions append to the same lane at once: each links to the one before it."""

    def entry(n: int) -> AuditEntry:
        decision_id = uuid.UUID(int=uuid.uuid4().int // LANES * LANES + 3)  # lane 3
        return AuditEntry(
            decision_id=decision_id,
            request_id=f"race-{n}",
            occurred_at=datetime.now(UTC),
            action="CREATE",
            decision="rejected",
            outcome="none",
            decision_type="external",
            reason="racing append",
            agent_id="racer",
            caller="{}",
            record_id=None,
            version_id=None,
            input_snapshot="{}",
            layer1_checks="[]",
            layer2_decision=None,
            decision_source="layer1",
            duration_ms=float(n),
        )

    async def append(n: int) -> int:
        async def body(conn: Connection) -> int:
            seq = await kernel.audit.append(conn, entry(n))
            await asyncio.sleep(0.01)  # hold the lane so that the others queue behind it
            return seq

        return await kernel.db.run_in_transaction(body)

    seqs = await asyncio.gather(*(append(n) for n in range(24)))
    assert 24 == len(set(seqs))
    rows = await kernel.db.fetch(
        "SELECT seq, prev_hash, row_hash FROM librarian_audit WHERE lane = 3 ORDER BY seq"
    )
    assert 24 == len(rows)
    for older, newer in itertools.pairwise(rows):
        assert bytes(newer["prev_hash"]) == bytes(older["row_hash"])
    head = await kernel.db.fetchrow(
        "SELECT last_seq, last_hash FROM audit_chain_heads WHERE lane = 3"
    )
    assert (rows[-1]["seq"], bytes(rows[-1]["row_hash"])) == (
        head["last_seq"],
        bytes(head["last_hash"]),
    )
    report = await kernel.audit.verify()
    assert (True, 24) == (report.ok, report.rows_checked)
