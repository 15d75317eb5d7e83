"""Runs the alembic migrations of :mod:`engram.infra.migrations` against a database URL.

Alembic's async environment runs its own event loop, so from async code these functions are
called through :func:`asyncio.to_thread`.
"""

from __future__ import annotations

import re
from pathlib import Path

import asyncpg
import structlog
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

from engram.errors import ConfigurationError, MigrationError

log = structlog.get_logger("engram.infra.migrate")

_SCRIPTS = Path(__file__).resolve().parent / "migrations"
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _sqlalchemy_url(url: str) -> str:
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url.removeprefix(prefix)
    if url.startswith("postgresql+asyncpg://"):
        return url
    raise ConfigurationError("database URLs must start with postgresql://")


def _config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.attributes["engram_url"] = _sqlalchemy_url(url)
    return config


def head_revision() -> str:
    """The newest revision the code knows."""
    head = ScriptDirectory.from_config(_config("postgresql://unused")).get_current_head()
    if head is None:  # pragma: no cover - the package always ships revisions
        raise MigrationError("no migration revisions found")
    return head


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` (an owner or superuser login) up to ``revision``."""
    try:
        command.upgrade(_config(url), revision)
    except Exception as exc:
        raise MigrationError(f"upgrade to {revision} failed: {exc}") from exc
    log.info("migrations.upgraded", revision=revision)


def downgrade(url: str, revision: str = "base") -> None:
    """Migrate the database at ``url`` down to ``revision``."""
    try:
        command.downgrade(_config(url), revision)
    except Exception as exc:
        raise MigrationError(f"downgrade to {revision} failed: {exc}") from exc
    log.info("migrations.downgraded", revision=revision)


async def ensure_database(admin_url: str, name: str) -> bool:
    """Create database ``name`` through ``admin_url`` unless it exists; True if created."""
    if not _IDENTIFIER.match(name):
        raise ConfigurationError(f"invalid database name {name!r}")
    conn = await asyncpg.connect(admin_url)
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if exists:
            return False
        # CREATE DATABASE takes no parameters; the name was validated above.
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    log.info("database.created", database=name)
    return True


def current_revision_sync(url: str) -> str | None:
    """The revision the database at ``url`` is at, read with alembic's own connection."""
    revisions: list[str] = []

    def record(rev: object, context: object) -> list[object]:
        del context
        revisions.extend(str(r) for r in _as_tuple(rev))
        return []

    config = _config(url)
    script = ScriptDirectory.from_config(config)
    from alembic.runtime.environment import EnvironmentContext  # noqa: PLC0415

    with EnvironmentContext(config, script, fn=record):
        script.run_env()
    return revisions[0] if revisions else None


def _as_tuple(rev: object) -> tuple[object, ...]:
    if rev is None:
        return ()
    if isinstance(rev, tuple | list):
        return tuple(rev)
    return (rev,)
