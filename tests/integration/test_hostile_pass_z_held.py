"""Hostile pass Z, what held: a closed access level's records against an open level's plan
(the per-level candidate budget), and the webhook sink of a kernel closed and opened again
on another event loop in the same process.

Real embedded PostgreSQL, the real embedding model, real loopback servers; no mocks."""

from __future__ import annotations

import asyncio
from uuid import UUID

from engram import Kernel, open_kernel
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.consolidation import ConsolidationCandidate
from engram.memory.types import AccessLevel
from tests.conftest import ScratchDatabase
from tests.integration.consolidation_helpers import DEEP, engine_with
from tests.integration.pass_y_helpers import topics
from tests.integration.pass_z_helpers import recurring
from tests.integration.test_webhook_relay import Receiver, _serve, escalation


async def test_a_closed_levels_older_records_do_not_take_an_open_levels_candidate_budget(
    kernel: Kernel,
) -> None:
    """``max_candidates`` 3; six related episodes at the sensitive level, written first (the
    planner reads the oldest records first), then a topic of three at the agent level. Rule
    (ADR-019): each level is read with a budget of its own, so the agent level's plan is the
    same whatever the sensitive level holds: its topic is planned whole, in the same
    candidate, before and after the sensitive records exist."""
    await recurring(kernel, AccessLevel.SENSITIVE, 6)
    (agent,) = await topics(kernel, 1, AccessLevel.AGENT)
    engine = engine_with(kernel, max_candidates=3)
    both = await engine.evaluate_candidates(DEEP, levels=(AccessLevel.AGENT, AccessLevel.SENSITIVE))
    alone = await engine.evaluate_candidates(DEEP, levels=(AccessLevel.AGENT,))

    def of_agent(planned: list[ConsolidationCandidate]) -> list[tuple[str, frozenset[UUID]]]:
        return [
            (c.content, frozenset(s.record_id for s in c.sources))
            for c in planned
            if c.access_level is AccessLevel.AGENT
        ]

    assert of_agent(both) == of_agent(alone)
    assert [frozenset(agent)] == [sources for _, sources in of_agent(both)]
    sensitive = [c for c in both if c.access_level is AccessLevel.SENSITIVE]
    assert sum(len(c.sources) for c in sensitive) <= 3  # its own budget, not the agent's


async def _one_life(
    database: ScratchDatabase, embedder: FastembedEmbedder, url: str, n: int
) -> None:
    """Open a kernel whose webhook is ``url``, queue the ``n``-th escalation, wait until its
    relay has sent it, close the kernel."""
    settings = EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        retry_initial_wait_seconds=0.01,
        webhook_url=url,
    )
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        await kernel.admin_queue.deliver(escalation(n))
        for _ in range(500):
            sent = await kernel.db.fetchval(
                "SELECT count(*) FROM escalations WHERE webhook_sent_at IS NOT NULL"
            )
            if sent == n:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"escalation {n} not sent")


async def test_a_kernel_opened_again_on_a_new_event_loop_still_delivers_to_its_webhook(
    database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """A kernel with a webhook is opened, sends an escalation, and is closed, in one
    ``asyncio.run``; then again in a second ``asyncio.run`` (each on a thread of its own, as
    a program that runs the kernel twice would). Rule: nothing the first kernel made (its
    sink's HTTP client and lock, the relay's task and event) outlives it or is bound to its
    loop: the second kernel's relay sends its escalation, and the receiver gets each once."""
    receiver = Receiver()
    server = _serve(receiver)
    try:
        for n in (1, 2):
            await asyncio.to_thread(asyncio.run, _one_life(database, embedder, receiver.url, n))
    finally:
        server.shutdown()
        server.server_close()
    expected = [escalation(n).key for n in (1, 2)]
    assert expected == [body["key"] for body in receiver.accepted]
