"""The embedded server's start and stop after crashes (issue 11), on a real cluster per test.

A reused pid is staged with a live `sleep` process: its pid is written where a dead holder's or
a killed postmaster's pid was, which is what a pid reused after a crash looks like."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import psutil
import pytest

from engram.errors import EmbeddedServerError
from engram.infra.embedded_server import EmbeddedPostgres


@pytest.fixture
def stranger() -> Iterator[psutil.Process]:
    """A live process that is neither engram nor PostgreSQL, to wear a reused pid."""
    process = subprocess.Popen(["sleep", "120"])  # noqa: S607 - coreutils
    yield psutil.Process(process.pid)
    process.kill()
    process.wait(5)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[EmbeddedPostgres]:
    """A started embedded server in a fresh directory; stopped (or killed) afterwards."""
    embedded = EmbeddedPostgres(tmp_path / "pg")
    embedded.start()
    yield embedded
    embedded.stop()
    for process in _cluster(embedded.pgdata):
        process.kill()


def _cluster(pgdata: Path) -> list[psutil.Process]:
    """Live PostgreSQL processes of the cluster in ``pgdata`` (they run with it as cwd)."""
    found = []
    for process in psutil.process_iter(["name"]):
        try:
            if (
                process.info["name"] == "postgres"
                and process.status() != psutil.STATUS_ZOMBIE
                and Path(process.cwd()) == pgdata
            ):
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split()[0])


def _select_one(embedded: EmbeddedPostgres) -> int:
    async def run() -> int:
        conn = await asyncpg.connect(embedded.admin_url(), timeout=10)
        try:
            value: int = await conn.fetchval("SELECT 1")
            return value
        finally:
            await conn.close()

    return asyncio.run(run())


def test_a_holder_pid_now_worn_by_another_process_does_not_keep_the_server_running(
    server: EmbeddedPostgres, stranger: psutil.Process
) -> None:
    """A dead holder whose pid was reused (other start time) is dropped, so the stop stops."""
    handles = server.pgdata / ".handle_pids.json"
    holders = server.pgdata / ".engram_holders.json"
    handles.write_text(json.dumps([os.getpid(), stranger.pid]))
    started = json.loads(holders.read_text())
    holders.write_text(json.dumps({**started, str(stranger.pid): stranger.create_time() - 3600}))

    server.stop()

    assert [] == _cluster(server.pgdata)
    assert [] == json.loads(handles.read_text())
    assert stranger.is_running()


def test_a_live_holder_of_unknown_start_keeps_the_server_running(
    server: EmbeddedPostgres, stranger: psutil.Process
) -> None:
    """A live pid the package registered (no start time of ours) is a holder: no stop."""
    handles = server.pgdata / ".handle_pids.json"
    handles.write_text(json.dumps([os.getpid(), stranger.pid]))

    server.stop()

    assert _cluster(server.pgdata)
    assert [stranger.pid] == json.loads(handles.read_text())
    handles.write_text("[]")  # the stranger lets go; the fixture's teardown cleans up


def test_a_killed_postmaster_whose_pid_was_reused_does_not_stop_the_next_start(
    server: EmbeddedPostgres, stranger: psutil.Process
) -> None:
    """A postmaster.pid naming a live non-PostgreSQL process is stale: the next start serves."""
    pgdata = server.pgdata
    os.kill(_postmaster_pid(pgdata), signal.SIGKILL)
    server.stop()
    lines = (pgdata / "postmaster.pid").read_text().splitlines()
    (pgdata / "postmaster.pid").write_text("\n".join([str(stranger.pid), *lines[1:]]) + "\n")

    again = EmbeddedPostgres(pgdata)
    again.start()
    try:
        assert 1 == _select_one(again)
        assert _postmaster_pid(pgdata) != stranger.pid
    finally:
        again.stop()
    assert [] == _cluster(pgdata)
    assert stranger.is_running()


def test_two_handles_in_one_process_share_the_server_until_the_last_stops(
    server: EmbeddedPostgres,
) -> None:
    """A second handle on the directory in this process keeps the server up past the first stop."""
    second = EmbeddedPostgres(server.pgdata)
    second.start()
    server.stop()
    try:
        assert 1 == _select_one(second)
    finally:
        second.stop()
    assert [] == _cluster(server.pgdata)


@pytest.mark.skipif(os.geteuid() != 0, reason="the package opens the data dir only as root")
def test_a_first_start_that_fails_as_root_leaves_the_data_dir_private(tmp_path: Path) -> None:
    """As root the package opens the data dir to other users before initdb (its own user
    must reach the cluster) and engram narrowed it back only once the server was up: a
    first start whose initdb failed left it 0755 until the next start. It is narrowed (and
    given to the cluster's user, as after a start that succeeds) on the way out too."""
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o700)
    (data_dir / "pg").mkdir()
    (data_dir / "pg" / "left-by-someone").write_text("not a cluster")

    with pytest.raises(EmbeddedServerError, match="not empty"):
        EmbeddedPostgres(data_dir / "pg").start()

    assert 0o700 == data_dir.stat().st_mode & 0o777
    assert (data_dir / "pg").stat().st_uid == data_dir.stat().st_uid
