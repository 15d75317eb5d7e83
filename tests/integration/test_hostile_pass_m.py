"""Hostile pass M: randomised differential runs. A seed draws the caller's operations through
the three adapters, interleaved with a higher-tier agent's writes it may not read (store B
only); every answer the caller gets must be the same in both stores, up to fresh ids,
instants and timings. Real embedded PostgreSQL and the real embedding model, no mocks."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engram.infra.embedded_server import EmbeddedPostgres
from engram.infra.fastembed_embedder import FastembedEmbedder
from tests.integration.random_steps import run
from tests.integration.random_twins import Twin, prepare, steps, untied
from tests.integration.twin_helpers import (
    Store,
    differences,
    drop_database,
    normalised,
    open_store,
    scratch_database,
)


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
) -> list[tuple[int, str, Any, Any]]:
    async with (
        _store(server, template, embedder) as a,
        _store(server, template, embedder) as b,
    ):
        probes: dict[int, int] = {}  # store B runs first: it numbers the hidden ids it probes
        right = await run(Twin(b, caller, hidden=True, probes=probes), sequence)
        left = await run(Twin(a, caller, hidden=False, probes=probes), sequence)
    return differences(untied(normalised(left)), untied(normalised(right)))


@pytest.mark.parametrize(("seed", "caller"), [(1, "writer"), (2, "intern")])
async def test_random_sequences_answer_alike_beside_hidden_records(
    pg_server: EmbeddedPostgres,
    template_db: str,
    embedder: FastembedEmbedder,
    seed: int,
    caller: str,
) -> None:
    """A seeded sequence of the caller's operations answers alike in a store that also holds
    a higher-tier agent's records near its content."""
    sequence = steps(seed, 40)
    assert [] == await _differences(pg_server, template_db, embedder, caller, sequence)
