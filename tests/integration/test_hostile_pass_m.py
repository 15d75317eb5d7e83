"""Hostile pass M: randomised differential runs. A seed draws the caller's operations through
the three adapters, interleaved with a higher-tier agent's writes it may not read (store B
only); every answer the caller gets must be the same in both stores, up to fresh ids,
instants and timings, and none may be a server error. Real embedded PostgreSQL and the real
embedding model, no mocks.

What the runs found is about consolidation's scheduling, not its reads: the event trigger
and a pass's candidate budget counted records the caller may not read. Both are fixed (each
access level is watched and consolidated on its own, ADR-019's amendment); the two tests
below failed before."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from engram.infra.embedded_server import EmbeddedPostgres
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.consolidation import ConsolidationTrigger
from engram.protocols.inprocess import AgentSession
from tests.integration.consolidation_helpers import DAY, engine_with
from tests.integration.random_steps import run
from tests.integration.random_twins import Twin, linked_in_order, prepare, steps, untied
from tests.integration.twin_helpers import (
    Store,
    differences,
    drop_database,
    normalised,
    open_store,
    scratch_database,
    twin_a,
    twin_b,
)

__all__ = ["twin_a", "twin_b"]


@contextlib.asynccontextmanager
async def _store(
    server: EmbeddedPostgres, template: str, embedder: FastembedEmbedder
) -> AsyncIterator[Store]:
    database = await scratch_database(server, template)
    try:
        async with contextlib.aclosing(open_store(database, embedder)) as stores:
            async for store in stores:
                await prepare(store)
                yield store
    finally:
        await drop_database(database)


async def _differences(
    server: EmbeddedPostgres,
    template: str,
    embedder: FastembedEmbedder,
    caller: str,
    sequence: list[dict[str, Any]],
) -> tuple[list[tuple[int, str, Any, Any]], list[Any]]:
    """Where the caller's answers differ, and both transcripts."""
    async with (
        _store(server, template, embedder) as a,
        _store(server, template, embedder) as b,
    ):
        probes: dict[int, int] = {}  # store B runs first: it numbers the hidden ids it probes
        right = await run(Twin(b, caller, hidden=True, probes=probes), sequence)
        left = await run(Twin(a, caller, hidden=False, probes=probes), sequence)
    return differences(
        linked_in_order(normalised(untied(left))), linked_in_order(normalised(untied(right)))
    ), [left, right]


def _seeds() -> list[tuple[int, str]]:
    """Three seeds in the suite (one per caller); ``ENGRAM_PASS_M_SEEDS=first-last`` runs
    those too, for every caller (about 15 s a seed and caller at 80 steps, set with
    ``ENGRAM_PASS_M_STEPS``)."""
    chosen = [(1, "writer"), (2, "intern"), (3, "narrow")]
    first, _, last = os.environ.get("ENGRAM_PASS_M_SEEDS", "").partition("-")
    if first:
        chosen += [(n, c) for n in range(int(first), int(last or first) + 1) for c in CALLERS]
    return chosen


CALLERS = ("writer", "intern", "narrow")
STEPS = int(os.environ.get("ENGRAM_PASS_M_STEPS", "40"))


@pytest.mark.parametrize(("seed", "caller"), _seeds())
async def test_random_sequences_answer_alike_beside_hidden_records(
    pg_server: EmbeddedPostgres,
    template_db: str,
    embedder: FastembedEmbedder,
    seed: int,
    caller: str,
) -> None:
    """A seeded sequence of the caller's operations answers alike in a store that also holds
    a higher-tier agent's records near its content (the first differences are shown with
    the caller's step that got them)."""
    sequence = steps(seed, STEPS)
    found, transcripts = await _differences(pg_server, template_db, embedder, caller, sequence)
    asked = [step for step in sequence if not step.get("hidden")]
    assert [] == [(asked[n], path, a, b) for n, path, a, b in found[:5]]
    text = json.dumps(transcripts, default=str)
    assert re.search(r"\[5\d\d, ", text) is None  # no REST answer was a server error
    assert '"kind": "internal"' not in text  # nor an MCP one


#: One observation told five ways (pairwise close: Layer 2 links each to the others).
ETL = [
    "The nightly orders_daily ETL finished late again, well past its deadline.",
    "orders_daily ETL was late again this morning and only finished after the deadline.",
    "Once more the nightly orders_daily ETL missed its deadline.",
    "The orders_daily nightly ETL ran late again today.",
    "Again the orders_daily ETL overran its morning deadline overnight.",
]


def _episode(n: int, level: str = "agent") -> dict[str, Any]:
    when = (DAY + timedelta(days=n)).isoformat()
    return {"type": "episode", "content": ETL[n], "event_time": when, "access_level": level}


async def test_hidden_writes_do_not_start_the_consolidation_of_a_callers_topic(
    twin_a: Store, twin_b: Store
) -> None:
    """An event-driven pass (threshold three) ran after the writer's first two accounts of a
    late job; it wrote a third since. In store B the trusted agent has since written two
    sensitive accounts of the same job, which Layer 2 links to the writer's: the watch then
    calls for a pass, and the pass consolidates the writer's three records, which in store A
    stay active."""
    statuses = []
    for store, hidden in ((twin_a, False), (twin_b, True)):
        await prepare(store)
        writer = AgentSession(store.kernel, store.principals["writer"].caller)
        ids = [(await writer.remember(_episode(n))).record_id for n in range(2)]
        engine = engine_with(store.kernel, event_threshold=3)
        await store.kernel.events.settled()
        await engine.run(ConsolidationTrigger.EVENT_DRIVEN)  # too few: nothing consolidated
        since = datetime.now(UTC)
        ids.append((await writer.remember(_episode(2))).record_id)
        if hidden:
            boss = AgentSession(store.kernel, store.principals["boss"].caller)
            for n in (3, 4):
                assert (await boss.remember(_episode(n, "sensitive"))).record_id is not None
        await store.kernel.events.settled()
        due = await engine.watch.event_due(since)  # what the scheduler's job asks
        if due is not None:
            await engine.run(ConsolidationTrigger.EVENT_DRIVEN, levels=due.levels)
        caller = store.principals["writer"].caller
        heads = [await store.kernel.temporal.current(i, caller=caller) for i in ids if i]
        statuses.append([None if h is None else h.status.value for h in heads])
    assert statuses[0] == ["active"] * 3
    assert statuses[0] == statuses[1]


async def test_hidden_records_do_not_keep_a_callers_topic_out_of_a_deep_pass(
    twin_a: Store, twin_b: Store
) -> None:
    """A deep pass reading at most four records consolidates the writer's three accounts of
    a late job in store A; in store B the trusted agent's three older sensitive notes take
    three of the four places, and the writer's records stay active."""
    statuses = []
    for store, hidden in ((twin_a, False), (twin_b, True)):
        await prepare(store)
        if hidden:
            boss = AgentSession(store.kernel, store.principals["boss"].caller)
            for n in range(3):
                note = {**_episode(n, "sensitive"), "content": f"Vendor call {n} went nowhere."}
                assert (await boss.remember(note)).record_id is not None
        writer = AgentSession(store.kernel, store.principals["writer"].caller)
        ids = [(await writer.remember(_episode(n))).record_id for n in range(3)]
        await store.kernel.events.settled()
        await engine_with(store.kernel, max_candidates=4).run(ConsolidationTrigger.SCHEDULED_DEEP)
        caller = store.principals["writer"].caller
        heads = [await store.kernel.temporal.current(i, caller=caller) for i in ids if i]
        statuses.append([None if h is None else h.status.value for h in heads])
    assert statuses[0] == ["consolidated"] * 3
    assert statuses[0] == statuses[1]
