"""Hostile pass AD: what a caller reads must not change with records it may not read.

Every test here failed on the code it was written against. Real embedded PostgreSQL, the real
embedding model (or a real timeout of it), no mocks.
"""

from __future__ import annotations

from engram import Kernel
from engram.memory.types import AccessLevel, WriteOutcome
from tests.integration.gate_helpers import BOSS, INTERN, OTHER, belief, create

LEDGER = "The ledger service runs on PostgreSQL 16 in the Frankfurt region."


async def _repeat_beside(
    kernel: Kernel, namespace: str, *, hidden: bool, repeated: str = LEDGER
) -> WriteOutcome:
    """An agent-level record of LEDGER, then the trusted agent's agent-level ``repeated``
    (LEDGER, or a text equal to it once normalised); with ``hidden``, the trusted agent stored
    LEDGER at ``sensitive`` first."""
    if hidden:
        secret = await kernel.gate.evaluate(
            create(
                belief(
                    LEDGER,
                    namespace=namespace,
                    access_level=AccessLevel.SENSITIVE,
                    source_agent=BOSS.agent_id,
                ),
                BOSS,
            )
        )
        assert secret.outcome is WriteOutcome.CREATED, secret.reason
    shared = await kernel.gate.evaluate(
        create(belief(LEDGER, namespace=namespace, source_agent=OTHER.agent_id), OTHER)
    )
    assert shared.outcome is WriteOutcome.CREATED, shared.reason
    again = await kernel.gate.evaluate(
        create(belief(repeated, namespace=namespace, source_agent=BOSS.agent_id), BOSS)
    )
    assert again.record_id is not None, again.reason
    if again.outcome is WriteOutcome.REINFORCED:
        assert again.record_id == shared.record_id
    return again.outcome


async def test_an_exact_duplicate_above_a_proposals_level_hides_none_at_its_level(
    stalled_kernel: Kernel,
) -> None:
    """High. The exact-duplicate look-up took the oldest active head of the content among
    every level the writer reads, and the Gate then set it aside when it stood above the
    proposal's level (its readers may not read it): an older copy the trusted writer kept at
    ``sensitive`` hid the copy at the proposal's own level. Without an embedding (the model
    timed out, a degraded write) that look-up is the only duplicate check, so the trusted
    agent's agent-level repetition was stored as a second record instead of reinforcing the
    one agent-level readers have: what a restricted reader lists changed with a record it may
    not read."""
    kernel = stalled_kernel
    assert await _repeat_beside(kernel, "plain", hidden=False) is WriteOutcome.REINFORCED
    assert await _repeat_beside(kernel, "beside", hidden=True) is WriteOutcome.REINFORCED
    for namespace in ("plain", "beside"):
        listed = await kernel.temporal.page(caller=INTERN, namespace=namespace)
        assert [r.content for r in listed] == [LEDGER]


async def test_an_exact_duplicate_above_a_proposals_level_hides_none_with_the_model(
    kernel: Kernel,
) -> None:
    """High. The same with the model answering: a text equal to the stored one only once
    normalised (NFKC folds fullwidth letters; the model reads them as other tokens) is no
    near duplicate, so the exact look-up alone could find the agent-level copy, and the
    older sensitive copy hid it."""
    wide = LEDGER.replace("ledger", "\uff4c\uff45\uff44\uff47\uff45\uff52")
    outcome = await _repeat_beside(kernel, "plain", hidden=False, repeated=wide)
    assert outcome is WriteOutcome.REINFORCED
    outcome = await _repeat_beside(kernel, "beside", hidden=True, repeated=wide)
    assert outcome is WriteOutcome.REINFORCED
    for namespace in ("plain", "beside"):
        listed = await kernel.temporal.page(caller=INTERN, namespace=namespace)
        assert [r.content for r in listed] == [LEDGER]
