"""Hostile pass AF: probes that held (no fix needed); each docstring states the rule probed."""

from __future__ import annotations

import random
from uuid import UUID

from engram import Kernel
from engram.errors import EngramError
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateAction,
    GateDecisionType,
    MemoryStatus,
)
from tests.integration.consolidation_helpers import head_of
from tests.integration.gate_helpers import BOSS, belief, create
from tests.integration.race_helpers import broken_invariants, jittered

ADMIN = CallerIdentity.system("cli:probe")


async def test_a_release_racing_a_forget_never_leaves_a_forgotten_record_readable(
    kernel: Kernel,
) -> None:
    """A quarantine release and the writer's FORGET of the same record, started at once over
    twenty rounds: whichever wins, the record ends forgotten (a release after the forget is
    refused, one before it is undone by it), the store's invariants hold, and every step
    ends with an answer or a typed refusal, never a database error."""
    rng = random.Random(11)  # noqa: S311 - interleavings, not secrets
    answers: list[str] = []
    for n in range(20):
        made = await kernel.gate.evaluate(
            create(belief(f"Round {n}: the courier desk is reached at desk{n}@example.com."), BOSS)
        )
        assert made.record_id is not None, made.reason
        record_id: UUID = made.record_id
        head = await head_of(kernel, record_id)
        assert AccessLevel.SENSITIVE is head.access_level

        async def release(record: UUID = record_id) -> str:
            try:
                await kernel.quarantine.release(record, admin=ADMIN, reason="a shared desk")
            except EngramError as exc:
                return type(exc).__name__
            return "released"

        async def forget(version: int = head.version, record: UUID = record_id) -> str:
            current = await head_of(kernel, record)
            result = await kernel.gate.evaluate(
                GateRequest(
                    GateAction.FORGET,
                    current,
                    BOSS,
                    GateDecisionType.EXTERNAL,
                    expected_version=version,
                )
            )
            return result.outcome.value

        answers += await jittered(rng, [release, forget])
        assert MemoryStatus.FORGOTTEN is (await head_of(kernel, record_id)).status, answers
    assert [] == await broken_invariants(kernel)
    assert set(answers) <= {"released", "forgotten", "Quarantine", "NotFound"}, answers
