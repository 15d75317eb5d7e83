"""Fixtures shared by integration test modules."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engram import Kernel, open_kernel
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from tests.conftest import ScratchDatabase


@pytest.fixture
async def quick_breaker_kernel(
    database: ScratchDatabase, embedder: FastembedEmbedder
) -> AsyncIterator[Kernel]:
    """A kernel whose breaker re-probes after 0.2 s and whose retries wait 10 ms."""
    settings = EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        breaker_reset_seconds=0.2,
        retry_initial_wait_seconds=0.01,
        db_pool_max_size=30,
    )
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        yield kernel
