"""Shared fixtures: one embedded PostgreSQL per test session, a migrated template database,
one fresh database per test, and one loaded embedding model per session."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from engram import Kernel, open_kernel
from engram.config import EMBEDDING_DIMENSION, EngramSettings
from engram.infra import migrate
from engram.infra.embedded_server import EmbeddedPostgres
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.infra.model_files import ensure_default_model
from tests.integration.scheduler_helpers import stop_made

TEMPLATE = "engram_template"
REPO = Path(__file__).resolve().parents[1]
#: The scrape-only metrics token (ENGRAM_METRICS_TOKEN) of the test kernels.
METRICS_TOKEN = "scrape-only-9f2c41d07b5e4a83"


@dataclass(frozen=True)
class ScratchDatabase:
    """A database of its own for one test, cloned from the migrated template."""

    name: str
    server: EmbeddedPostgres

    @property
    def runtime_url(self) -> str:
        """URL of the runtime role the kernel uses."""
        return self.server.url(user="engram_runtime", database=self.name)

    @property
    def admin_url(self) -> str:
        """URL of the bootstrap superuser (for setting up faults and inspecting catalogs)."""
        return self.server.admin_url(self.name)


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    """The embedded PostgreSQL with pgvector shared by the whole session."""
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg") / "data")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def template_db(pg_server: EmbeddedPostgres) -> str:
    """A database migrated to head once; every test database is a copy of it."""
    asyncio.run(migrate.ensure_database(pg_server.admin_url(), TEMPLATE))
    migrate.upgrade(pg_server.admin_url(TEMPLATE))
    return TEMPLATE


async def _admin(server: EmbeddedPostgres) -> asyncpg.Connection:
    return await asyncpg.connect(server.admin_url())


@pytest.fixture
async def database(pg_server: EmbeddedPostgres, template_db: str) -> AsyncIterator[ScratchDatabase]:
    """A fresh, migrated database for this test alone."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = await _admin(pg_server)
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    finally:
        await admin.close()
    yield ScratchDatabase(name, pg_server)
    admin = await _admin(pg_server)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture
async def empty_database(pg_server: EmbeddedPostgres) -> AsyncIterator[ScratchDatabase]:
    """A database with no schema at all (for migration tests)."""
    name = f"e_{uuid.uuid4().hex[:16]}"
    await migrate.ensure_database(pg_server.admin_url(), name)
    yield ScratchDatabase(name, pg_server)
    admin = await _admin(pg_server)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The default model directory, assembled from the installed packages if needed."""
    path = EngramSettings(data_dir=REPO / ".engram").model_dir
    ensure_default_model(path)
    return path


@pytest.fixture(scope="session")
def embedder(model_dir: Path) -> Iterator[FastembedEmbedder]:
    """The real embedding model, loaded once in its worker process for the session."""
    adapter = FastembedEmbedder(
        model_dir,
        model_name=EngramSettings().embedding_model_name,
        dimension=EMBEDDING_DIMENSION,
        workers=1,
        threads=2,
        timeout_seconds=30.0,
    )
    asyncio.run(adapter.start())
    yield adapter
    asyncio.run(adapter.close())


@pytest.fixture
async def kernel(database: ScratchDatabase, embedder: FastembedEmbedder) -> AsyncIterator[Kernel]:
    """A kernel on this test's own database, sharing the session's embedding model."""
    settings = EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        retry_initial_wait_seconds=0.01,
        db_pool_max_size=40,
        readiness_cache_seconds=0.0,  # each /readyz of a test sees the state it just made
        metrics_token=METRICS_TOKEN,
    )
    async with open_kernel(settings=settings, embeddings=embedder) as opened:
        yield opened


@pytest.fixture
async def stalled_kernel(database: ScratchDatabase, model_dir: Path) -> AsyncIterator[Kernel]:
    """A kernel whose embedding model cannot answer within its 1 ms limit (a real timeout)."""
    slow = FastembedEmbedder(
        model_dir, model_name="sentence-transformers/all-MiniLM-L6-v2-int8", timeout_seconds=0.001
    )
    settings = EngramSettings(database_url=database.runtime_url, migrate_on_start=False)
    try:
        async with open_kernel(settings=settings, embeddings=slow) as kernel:
            yield kernel
    finally:
        await slow.close()


@pytest.fixture
async def schedulers(kernel: Kernel) -> AsyncIterator[None]:
    """Stops the schedulers a test made (tests.integration.scheduler_helpers.scheduler) before
    the kernel closes its pool, whatever the test's outcome."""
    del kernel  # torn down after this fixture
    yield
    await stop_made()
