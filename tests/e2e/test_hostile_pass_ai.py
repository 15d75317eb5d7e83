"""Hostile pass AI: upgrades, migrations and start-up, run as an operator runs them.

Real processes on real data dirs: a database migrated by a newer engram (its revision
written into ``alembic_version`` as that engram would leave it), a model directory that is
empty, a port another process listens on.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from engram.config import EngramSettings
from engram.infra import migrate
from engram.infra.embedded_server import DATABASE, EmbeddedPostgres
from tests.e2e.conftest import Served
from tests.e2e.test_serve import ENGRAM, _env, _free_port, _postgres_for

#: A revision no engram of this code knows: the database was migrated by a later release.
NEWER = "9999"


def _run(
    args: list[str], env: dict[str, str], timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own CLI
        [*ENGRAM, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _sql(pgdata: Path, statement: str, database: str = DATABASE) -> object:
    """Run one statement on a database of the data dir as the superuser; its first value."""

    async def go() -> object:
        server = EmbeddedPostgres(pgdata)
        await asyncio.to_thread(server.start)
        try:
            conn = await asyncpg.connect(server.admin_url(database))
            try:
                return await conn.fetchval(statement)
            finally:
                await conn.close()
        finally:
            await asyncio.to_thread(server.stop)

    return asyncio.run(go())


def test_a_database_migrated_by_a_newer_engram_is_named_as_such_by_every_command(
    tmp_path: Path, model_dir: Path
) -> None:
    """After a downgrade of the package, the database is at a revision this code does not
    know. `engram migrate` said "Can't locate revision identified by '9999'", admin commands
    told the operator to run `engram migrate` (which cannot help), and `engram serve`
    printed a traceback and exited 3. Each now says, in one sentence, that the database was
    migrated by a newer engram and what to do; the revision is left as it was."""
    data_dir = tmp_path / "data"
    env = _env(data_dir, model_dir, ENGRAM_PORT=str(_free_port()))
    assert 0 == _run(["--init", "migrate"], env).returncode
    _sql(data_dir / "pg", f"UPDATE alembic_version SET version_num = '{NEWER}'")

    for args in (["migrate"], ["agents", "list"], ["serve"]):
        done = _run(args, env)
        assert 0 != done.returncode, (args, done.stderr[-2000:])
        assert "Traceback" not in done.stderr + done.stdout, (args, done.stderr[-3000:])
        assert f"engram: the database is at schema revision {NEWER}" in done.stderr, (
            args,
            done.stderr[-2000:],
        )
        assert f"newer engram than this one (which knows up to {migrate.head_revision()})" in (
            done.stderr
        ), (args, done.stderr[-2000:])
        assert "Can't locate" not in done.stderr
        assert "run `engram migrate`" not in done.stderr
    assert NEWER == _sql(data_dir / "pg", "SELECT version_num FROM alembic_version")
    assert [] == _postgres_for(data_dir / "pg")


def test_serve_that_cannot_open_its_kernel_says_why_in_one_line(
    tmp_path: Path, model_dir: Path
) -> None:
    """A start-up failure of the kernel (here an empty model directory) reached the
    operator as uvicorn's traceback of the lifespan and exit 3; it is now the error's own
    sentence after ``engram:`` and the exit code of its kind, and no server is left."""
    del model_dir
    empty = tmp_path / "model"
    empty.mkdir()
    env = _env(tmp_path / "data", empty, ENGRAM_PORT=str(_free_port()))
    done = _run(["serve"], env)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    assert 0 != done.returncode
    assert f"engram: model directory {empty} lacks model.onnx" in done.stderr, done.stderr[-2000:]
    assert [] == _postgres_for(tmp_path / "data" / "pg")


def test_serve_on_a_port_in_use_says_so(tmp_path: Path, model_dir: Path) -> None:
    """Another process listening on ENGRAM_PORT: one ``engram:`` line naming the address,
    a non-zero exit, no traceback, no server left running."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = _env(tmp_path / "data", model_dir, ENGRAM_PORT=str(port))
        done = _run(["serve"], env)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    assert 0 != done.returncode
    assert f"engram: cannot listen on 127.0.0.1:{port}" in done.stderr, done.stderr[-2000:]
    assert [] == _postgres_for(tmp_path / "data" / "pg")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 320 MiB tmpfs of its own (the test is skipped where mounting is not allowed)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(  # noqa: S603
        ["mount", "-t", "tmpfs", "-o", "size=320m", "tmpfs", str(mount_point)],  # noqa: S607
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs needs root: no small disk to fill here")
    try:
        yield mount_point
    finally:
        for process in _postgres_for(mount_point / "data" / "pg"):
            process.kill()
        subprocess.run(["umount", "-l", str(mount_point)], check=False)  # noqa: S603, S607


def test_a_full_disk_while_the_database_is_created_is_one_line_and_mends(
    small_disk: Path, model_dir: Path
) -> None:
    """The database is created (CREATE DATABASE) on every start that finds it absent. On a
    full disk the driver's DiskFullError escaped: a rich traceback and exit 1. It is now one
    `engram:` line with PostgreSQL's reason, exit 5, no server left running; once space is
    freed the same command creates the database and migrates it to head."""
    data_dir = small_disk / "data"
    env = _env(data_dir, model_dir)
    assert 0 == _run(["--init", "migrate"], env).returncode
    _sql(data_dir / "pg", "DROP DATABASE engram", "postgres")
    ballast = small_disk / "ballast"
    free = shutil.disk_usage(small_disk).free
    with ballast.open("wb") as filler:  # leave about 1 MiB: less than a database's copy
        filler.truncate(0)
        block = b"\0" * (1 << 20)
        for _ in range(free // len(block) - 1):
            filler.write(block)
    done = _run(["migrate"], env)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    assert 5 == done.returncode, done.stderr[-2000:]
    assert "engram: could not create database engram: " in done.stderr, done.stderr[-2000:]
    assert "(DiskFullError); Check free disk space." in done.stderr
    assert [] == _postgres_for(data_dir / "pg")

    ballast.unlink()
    again = _run(["migrate"], env)
    assert 0 == again.returncode, again.stderr[-2000:]
    assert f"schema at revision {migrate.head_revision()}" in again.stdout
    assert migrate.head_revision() == _sql(
        data_dir / "pg", "SELECT version_num FROM alembic_version"
    )


def _downgrade(pgdata: Path, revision: str) -> None:
    server = EmbeddedPostgres(pgdata)
    server.start()
    try:
        migrate.downgrade(server.admin_url(DATABASE), revision)
    finally:
        server.stop()


def _fill(disk: Path, leave_bytes: int) -> Path:
    """A ballast file taking all of ``disk`` but about ``leave_bytes``."""
    ballast = disk / "ballast"
    block = b"\0" * (1 << 20)
    with ballast.open("wb") as filler:
        for _ in range(max(0, shutil.disk_usage(disk).free - leave_bytes) // len(block)):
            filler.write(block)
    return ballast


_READS = (
    "INSERT INTO engram.memory_access (record_id, access_count, last_accessed_at, "
    "period_start, period_count, reinforcements) SELECT gen_random_uuid(), g % 50, now(), "
    "current_date, g % 7, 1.5 FROM generate_series(1, 100000) g"
)


def test_a_full_disk_during_a_migration_reports_the_migration_and_mends(
    small_disk: Path, model_dir: Path
) -> None:
    """Migration 0023 rewrites `memory_access`; on a full disk it fails and its transaction
    is rolled back, but the operator read only "embedded PostgreSQL failed to stop: No space
    left on device": stopping the server wrote its holder files on the same full disk, raised
    in place of the migration's error, and left a partial file and the stop to the package's
    exit hook. The migration's own reason is now the one line (PostgreSQL's message, not
    SQLAlchemy's quote of the statement), the server is stopped, nothing half-written stays,
    the schema and the counts are as before, and once space is freed the upgrade completes."""
    data_dir = small_disk / "data"
    pgdata = data_dir / "pg"
    env = _env(data_dir, model_dir)
    assert 0 == _run(["--init", "migrate"], env).returncode
    _downgrade(pgdata, "0022")
    _sql(pgdata, _READS)
    _sql(pgdata, "CHECKPOINT")
    ballast = _fill(small_disk, 6 << 20)

    done = _run(["migrate"], env)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    assert 1 == done.returncode, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if line.startswith("engram: ")]
    assert 1 == len(said), done.stderr[-2000:]
    said = said[0]
    # PostgreSQL's words depend on what ran out first: a table file (DiskFullError) or the
    # write-ahead log (a PANIC that ends every session: the migration's connection just
    # closes, and the PANIC is read from the server's log).
    assert said.startswith("engram: upgrade to head failed: "), done.stderr[-2000:]
    assert "No space left on device" in said
    assert "[SQL:" not in done.stderr
    assert [] == _postgres_for(pgdata)
    assert [] == sorted(p.name for p in pgdata.glob(".*.tmp"))

    ballast.unlink()
    assert "0022" == _sql(pgdata, "SELECT version_num FROM alembic_version")
    assert "100000 2450000" == _sql(
        pgdata, "SELECT count(*) || ' ' || sum(access_count) FROM engram.memory_access"
    )
    again = _run(["migrate"], env)
    assert 0 == again.returncode, (shutil.disk_usage(small_disk), again.stderr[-2000:])
    assert "100000 2450000" == _sql(
        pgdata, "SELECT count(*) || ' ' || sum(access_count[5]) FROM engram.memory_access"
    )


def test_a_data_dir_that_cannot_be_a_directory_is_one_line(tmp_path: Path) -> None:
    """ENGRAM_DATA_DIR naming a file (or a path under one): `engram serve` logged the
    traceback of FileExistsError (NotADirectoryError) from creating it, and `engram
    prepare-model` printed one; both now exit 2 saying the data dir cannot be used and why,
    and the file is left as it was."""
    taken = tmp_path / "not-a-dir"
    taken.write_text("someone's file\n")
    for data_dir in (taken, taken / "below"):
        env = _env(data_dir, tmp_path / "unused-model", ENGRAM_PORT=str(_free_port()))
        del env["ENGRAM_EMBEDDING_MODEL_PATH"]
        for args in (["serve"], ["prepare-model"]):
            done = _run(args, env)
            assert "Traceback" not in done.stderr + done.stdout, (args, done.stderr[-3000:])
            assert 2 == done.returncode, (args, done.stderr[-2000:])
            assert f"engram: data dir {data_dir} cannot be used: " in done.stderr, (
                args,
                done.stderr[-2000:],
            )
    assert "someone's file\n" == taken.read_text()


def test_a_full_disk_while_the_model_is_assembled_leaves_no_partial_copy(
    small_disk: Path,
) -> None:
    """`engram prepare-model` (and every start, which assembles the default model when it is
    absent) on a disk too full for the 23 MB ONNX file said "cannot write its output" (the
    CLI took the copy's ENOSPC for its standard output's) and left the partial copy
    (`.model.onnx.tmp`) holding what space there was. It now names the model directory and
    the reason, exit 1, removes the partial copy, and assembles the model once space is
    freed."""
    data_dir = small_disk / "data"
    env = _env(data_dir, small_disk / "unused")
    del env["ENGRAM_EMBEDDING_MODEL_PATH"]
    ballast = _fill(small_disk, 8 << 20)
    done = _run(["prepare-model"], env)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    assert 1 == done.returncode, done.stderr[-2000:]
    model_dir = EngramSettings(data_dir=data_dir).model_dir
    assert (
        f"engram: cannot assemble the embedding model in {model_dir}: No space left on device"
        in done.stderr
    ), done.stderr[-2000:]
    assert [] == sorted(p.name for p in model_dir.glob(".*.tmp"))

    ballast.unlink()
    again = _run(["prepare-model"], env)
    assert 0 == again.returncode, again.stderr[-2000:]
    assert f"embedding model assembled in {model_dir}" in again.stdout


def test_a_full_disk_when_the_cluster_is_created_says_why(
    small_disk: Path, model_dir: Path
) -> None:
    """initdb on a full disk: the one line was "embedded PostgreSQL failed to start: Command
    '(…/initdb', '--auth=trust', …)' returned non-zero exit status 1", the reason only in a
    log record of the package. The line now carries initdb's (or the server's) own words,
    and once space is freed the same command creates the cluster."""
    data_dir = small_disk / "data"
    env = _env(data_dir, model_dir)
    ballast = _fill(small_disk, 2 << 20)
    done = _run(["--init", "migrate"], env)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    assert 1 == done.returncode, done.stderr[-2000:]
    said = [line for line in done.stderr.splitlines() if line.startswith("engram: ")]
    assert 1 == len(said), done.stderr[-2000:]
    start = "engram: embedded PostgreSQL failed to start: "
    assert said[0].startswith(start), said
    # initdb's words, or the server's when initdb fitted but its first start did not.
    assert said[0].removeprefix(start).startswith(("initdb: error: ", "FATAL: ", "PANIC: ")), said
    assert said[0].endswith("No space left on device"), said
    assert [] == _postgres_for(data_dir / "pg")

    ballast.unlink()
    again = _run(["--init", "migrate"], env)
    assert 0 == again.returncode, again.stderr[-2000:]
    assert f"schema at revision {migrate.head_revision()}" in again.stdout


def test_sigterm_stops_serve_as_ctrl_c_does_with_exit_0(first_serve: Served) -> None:
    """docs/operations.md: SIGTERM (what systemd, Docker and Kubernetes send) starts the same
    graceful shutdown as Ctrl-C and the process exits 0. The shutdown ran, but uvicorn then
    raised SIGTERM again with its default action restored, so the process died of the
    signal: exit 143 to a supervisor, "engram: stopped" never said. It now exits 0, saying
    so, with the embedded server stopped."""
    process = first_serve.process
    pgdata = Path(first_serve.env["ENGRAM_DATA_DIR"]) / "pg"
    assert 200 == httpx.get(f"{first_serve.base}/readyz", timeout=5).status_code
    assert _postgres_for(pgdata)
    process.send_signal(signal.SIGTERM)
    process.wait(15)
    assert first_serve.reader is not None
    first_serve.reader.join(5)
    output = first_serve.output()
    assert 0 == process.returncode, output[-2000:]
    assert "engram: stopped" in output
    assert "Traceback" not in output
    assert [] == _postgres_for(pgdata)


def test_serve_on_a_database_never_migrated_says_to_migrate(
    tmp_path: Path, model_dir: Path
) -> None:
    """ENGRAM_MIGRATE_ON_START=false on a new data dir: the database is created but holds no
    schema and no roles, and the start failed with `role "engram_runtime" does not exist`,
    exit 5 ("try again later"), which no retry mends. It now says the database was never
    migrated and to run `engram migrate`, exit 1."""
    env = _env(
        tmp_path / "data", model_dir, ENGRAM_PORT=str(_free_port()), ENGRAM_MIGRATE_ON_START="false"
    )
    done = _run(["serve"], env)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    assert 1 == done.returncode, done.stderr[-2000:]
    assert "engram: the database holds no engram schema" in done.stderr, done.stderr[-2000:]
    assert "run `engram migrate`" in done.stderr
    assert [] == _postgres_for(tmp_path / "data" / "pg")


def test_init_migrate_to_a_revision_stops_there(tmp_path: Path, model_dir: Path) -> None:
    """`engram --init migrate --revision R` on a new data dir migrated to head before the
    command ran (the `--init` of every admin command), so R was ignored, and, since the
    schema was then past R, the command refused what it had been asked. The database is now
    created and migrated to R alone; a later `engram migrate` takes it to head."""
    data_dir = tmp_path / "data"
    env = _env(data_dir, model_dir)
    older = f"{int(migrate.head_revision()) - 1:04d}"

    stopped = _run(["--init", "migrate", "--revision", older], env)

    assert 0 == stopped.returncode, stopped.stderr
    assert f"schema at revision {older}" in stopped.stdout
    assert older == _sql(data_dir / "pg", "SELECT version_num FROM alembic_version")
    onward = _run(["migrate"], env)
    assert 0 == onward.returncode, onward.stderr
    assert migrate.head_revision() == _sql(
        data_dir / "pg", "SELECT version_num FROM alembic_version"
    )
