"""Hostile pass AI: start-up against a damaged model directory (the real model files) and a
cluster whose initdb was killed (the package's real initdb)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import asyncpg
import pytest

from engram.config import EMBEDDING_DIMENSION, EngramSettings
from engram.errors import MigrationError, ModelFilesError
from engram.infra import migrate
from engram.infra.embedded_server import EmbeddedPostgres
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.infra.inprocess_embedder import InProcessEmbedder
from engram.infra.local_model import LocalModel
from engram.infra.model_files import DIGESTS, ONNX_FILE, SIZES, digest, ensure_default_model
from engram.provision import run_migrations
from tests.conftest import ScratchDatabase

#: What a copy cut short leaves: the first 5 MB of the 23 MB ONNX file.
CUT = 5_000_000


def _truncated_copy(model_dir: Path, into: Path) -> Path:
    shutil.copytree(model_dir, into)
    with (into / ONNX_FILE).open("r+b") as onnx:
        onnx.truncate(CUT)
    return into


def test_a_truncated_default_model_is_assembled_again(model_dir: Path, tmp_path: Path) -> None:
    """The default model directory is trusted on its stamp alone, so a model.onnx cut short
    after it was assembled (a restore or a copy of the data dir stopped half way) stayed:
    `engram prepare-model` said "ready" and every start failed to load it. A file whose size
    is not the pinned one now has the directory assembled again, and checked."""
    assert {name: (model_dir / name).stat().st_size for name in SIZES} == SIZES
    damaged = _truncated_copy(model_dir, tmp_path / "models" / "default")
    assert ensure_default_model(damaged)
    assert DIGESTS[ONNX_FILE] == digest(damaged / ONNX_FILE)
    assert not ensure_default_model(damaged)  # complete again: cheap from now on


@pytest.mark.parametrize("kind", [InProcessEmbedder, FastembedEmbedder])
async def test_a_model_that_cannot_be_loaded_is_named_with_its_directory(
    model_dir: Path, tmp_path: Path, kind: type[LocalModel]
) -> None:
    """A model directory of the operator's (ENGRAM_EMBEDDING_MODEL_PATH) holding a damaged
    file failed the start with "embedding failed: InvalidProtobuf": an infrastructure error
    (exit 5, "try again later") naming neither the directory nor the cause. It is now a
    model-files error naming the directory and the way to restore the default model."""
    damaged = _truncated_copy(model_dir, tmp_path / "mine")
    embedder = kind(
        damaged,
        model_name=EngramSettings().embedding_model_name,
        dimension=EMBEDDING_DIMENSION,
        timeout_seconds=60.0,
    )
    try:
        with pytest.raises(ModelFilesError) as failed:
            await embedder.start()
    finally:
        await embedder.close()
    assert f"the embedding model in {damaged} cannot be loaded" in failed.value.message
    assert "engram prepare-model" in failed.value.message


# --- a first start killed while initdb ran ------------------------------------------------


def _package_binaries(tmp_path: Path) -> tuple[Path, str | None]:
    """The package's bin directory and the system user it runs PostgreSQL as."""
    server = EmbeddedPostgres(tmp_path / "probe" / "pg")
    server.start()
    try:
        inner = server._server
        return Path(inner.bin_path), inner.system_user
    finally:
        server.stop()


def _initdb_killed(pgdata: Path, bin_path: Path, user: str | None) -> None:
    """Run the package's initdb on ``pgdata`` and SIGKILL it (its whole process group) while
    one of its standalone backends holds the lock file, as a kill of the first `engram
    serve` does: PG_VERSION is written, the cluster is not complete."""
    pgdata.mkdir(parents=True)
    if user is not None:
        shutil.chown(pgdata, user, user)
    initdb = subprocess.Popen(  # noqa: S603 - the package's own initdb on a scratch directory
        [str(bin_path / "initdb"), "--auth=trust", "-U", "postgres", "-D", str(pgdata)],
        user=user,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    lock = pgdata / "postmaster.pid"
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and initdb.poll() is None:
            with contextlib.suppress(OSError):
                if lock.read_text().startswith("-"):
                    os.killpg(initdb.pid, signal.SIGKILL)
                    break
            time.sleep(0.002)
    finally:
        initdb.wait(10)
    assert (pgdata / "PG_VERSION").is_file()
    assert lock.read_text().startswith("-"), "initdb ended before it could be killed"


def test_a_first_start_killed_during_initdb_starts_again(tmp_path: Path) -> None:
    """SIGKILL of the first `engram serve` while initdb ran left PG_VERSION and a lock file
    naming the standalone backend by a negative pid. Every later start failed with "pid must
    be a positive integer (got -…)", for good. A cluster left so, holding no database but
    initdb's own, is now created again; one whose lock names a standalone backend that is
    gone but which holds databases is started as it is (the lock is stale)."""
    bin_path, user = _package_binaries(tmp_path)
    pgdata = tmp_path / "data" / "pg"
    _initdb_killed(pgdata, bin_path, user)

    server = EmbeddedPostgres(pgdata)
    server.start()
    try:
        asyncio.run(migrate.ensure_database(server.admin_url(), "engram"))
    finally:
        server.stop()

    # A standalone backend killed on a cluster that holds a database: the lock is stale.
    gone = subprocess.Popen(["true"])  # noqa: S607 - a pid that no longer runs
    gone.wait()
    (pgdata / "postmaster.pid").write_text(f"-{gone.pid}\n{pgdata}\n")
    server = EmbeddedPostgres(pgdata)
    server.start()
    try:

        async def names() -> list[str]:
            conn = await asyncpg.connect(server.admin_url())
            try:
                return [r["datname"] for r in await conn.fetch("SELECT datname FROM pg_database")]
            finally:
                await conn.close()

        assert {"engram", "postgres"} <= set(asyncio.run(names()))
    finally:
        server.stop()


async def test_migrate_to_a_revision_the_schema_is_past_is_refused(
    database: ScratchDatabase,
) -> None:
    """`engram migrate --revision 0022` on a schema at head changed nothing (alembic moves
    only forward) and said `schema at revision 0023`, exit 0, as if it had done what was
    asked. It is refused, saying the schema is past that revision and nothing was changed;
    asking for the revision the schema is at still succeeds."""
    settings = EngramSettings(
        database_url=database.runtime_url, migration_database_url=database.admin_url
    )
    head = migrate.head_revision()
    older = f"{int(head) - 1:04d}"

    with pytest.raises(MigrationError, match=f"at revision {head}, past {older}"):
        await run_migrations(settings, older)

    assert head == await run_migrations(settings, head)
    assert head == await run_migrations(settings)
