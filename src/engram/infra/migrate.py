"""Runs the alembic migrations of :mod:`engram.infra.migrations` against a database URL.

Alembic's async environment runs its own event loop, so from async code these functions are
called through :func:`asyncio.to_thread`.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING

import asyncpg
import structlog

from engram.errors import ConfigurationError, DatabaseError, MigrationError
from engram.infra.sql import load_queries

if TYPE_CHECKING:
    from alembic.config import Config

log = structlog.get_logger("engram.infra.migrate")

#: Statements of the migration run (read by the alembic environment, ``migrations/env.py``).
SQL = load_queries("engram.infra", "migrate.sql")

_SCRIPTS = Path(__file__).resolve().parent / "migrations"
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# A revision file's own two assignments (alembic's template writes them at top level).
_REVISION = re.compile(r"^revision(?:\s*:\s*str)?\s*=\s*[\"']([^\"']+)[\"']", re.MULTILINE)
_DOWN = re.compile(r"^down_revision(?:\s*:[^=]+)?\s*=\s*(?:None|[\"']([^\"']+)[\"'])", re.MULTILINE)


def _sqlalchemy_url(url: str) -> str:
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url.removeprefix(prefix)
    if url.startswith("postgresql+asyncpg://"):
        return url
    raise ConfigurationError("database URLs must start with postgresql://")


def _config(url: str) -> Config:
    # alembic (and SQLAlchemy under it) costs about half a second to import; only the
    # commands that migrate pay for it.
    from alembic.config import Config  # noqa: PLC0415

    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.attributes["engram_url"] = _sqlalchemy_url(url)
    return config


def head_revision() -> str:
    """The newest revision the code knows: the one revision no other revision follows.

    Read from the revision files' ``revision`` / ``down_revision`` lines rather than through
    alembic, so a kernel that does not migrate never imports it (a unit test keeps the two
    answers equal).
    """
    return _revisions()[0]


def known_revisions() -> frozenset[str]:
    """Every revision the code has a file for (a database at any other was migrated by a
    newer engram)."""
    return _revisions()[1]


@functools.cache
def _revisions() -> tuple[str, frozenset[str]]:
    """The head revision and every revision, read once from the files."""
    revisions: set[str] = set()
    followed: set[str] = set()
    for path in (_SCRIPTS / "versions").glob("*.py"):
        if path.name.startswith("_"):
            continue
        text = path.read_text(encoding="utf-8")
        revision, down = _REVISION.search(text), _DOWN.search(text)
        if revision is None or down is None:
            raise MigrationError(f"revision file {path.name} names no revision")
        revisions.add(revision.group(1))
        if down.group(1) is not None:
            followed.add(down.group(1))
    heads = revisions - followed
    if len(heads) != 1:
        raise MigrationError(f"expected one head revision, found {sorted(heads) or 'none'}")
    return heads.pop(), frozenset(revisions)


def newer_schema(current: str) -> MigrationError:
    """The error for a database at ``current``, a revision this code does not know.

    It was migrated by a later engram (this one is a downgrade of the package): no migration
    of this code can move it, and a kernel of this code must not write to it.
    """
    return MigrationError(
        f"the database is at schema revision {current}, written by a newer engram than this "
        f"one (which knows up to {head_revision()}): run that release or a later one, or "
        "restore the backup taken before the upgrade; nothing was changed"
    )


def _unknown_revision(url: str) -> str | None:
    """The database's revision when the code does not know it (None otherwise, or unread)."""
    try:
        current = current_revision_sync(url)
    except Exception:  # noqa: BLE001 - only a diagnosis of a failure already being raised
        return None
    return current if current is not None and current not in known_revisions() else None


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` (an owner or superuser login) up to ``revision``."""
    from alembic import command  # noqa: PLC0415

    try:
        command.upgrade(_config(url), revision)
    except Exception as exc:
        current = _unknown_revision(url)
        if current is not None:
            raise newer_schema(current) from exc
        raise MigrationError(f"upgrade to {revision} failed: {_cause(exc)}") from exc
    log.info("migrations.upgraded", revision=revision)


def downgrade(url: str, revision: str = "base") -> None:
    """Migrate the database at ``url`` down to ``revision``."""
    from alembic import command  # noqa: PLC0415

    try:
        command.downgrade(_config(url), revision)
    except Exception as exc:
        current = _unknown_revision(url)
        if current is not None:
            raise newer_schema(current) from exc
        raise MigrationError(f"downgrade to {revision} failed: {_cause(exc)}") from exc
    log.info("migrations.downgraded", revision=revision)


async def ensure_database(admin_url: str, name: str) -> bool:
    """Create database ``name`` through ``admin_url`` unless it exists; True if created."""
    if not _IDENTIFIER.fullmatch(name):
        raise ConfigurationError(f"invalid database name {name!r}")
    try:
        conn = await asyncpg.connect(admin_url)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        raise DatabaseError(f"cannot connect to create database {name}: {_reason(exc)}") from exc
    try:
        exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if exists:
            return False
        # CREATE DATABASE takes no parameters; the name was validated above.
        await conn.execute(f'CREATE DATABASE "{name}"')
    except (asyncpg.DuplicateDatabaseError, asyncpg.UniqueViolationError):
        # Another process (a kernel started beside this one) created it since the check:
        # CREATE DATABASE then fails on the catalog's unique index, or as a duplicate.
        return False
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        # A full disk, above all: PostgreSQL removes what it had copied, nothing is left.
        raise DatabaseError(f"could not create database {name}: {_reason(exc)}") from exc
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

    from alembic.runtime.environment import EnvironmentContext  # noqa: PLC0415
    from alembic.script import ScriptDirectory  # noqa: PLC0415

    config = _config(url)
    script = ScriptDirectory.from_config(config)

    with EnvironmentContext(config, script, fn=record):
        script.run_env()
    return revisions[0] if revisions else None


def role_missing(exc: BaseException, role: str) -> bool:
    """Whether ``exc`` (a failed connection, or an error raised from one) says login role
    ``role`` does not exist: the database was never migrated, as the first migration creates
    the role."""
    cause = exc if isinstance(exc, asyncpg.PostgresError) else exc.__cause__
    return isinstance(cause, asyncpg.InvalidAuthorizationSpecificationError) and (
        f'role "{role}" does not exist' in str(cause)
    )


def _cause(exc: BaseException) -> str:
    """What PostgreSQL said, when the failure came from it: SQLAlchemy's wrapping quotes the
    whole statement (a migration's, pages long) and a link; the server's message and hint
    are the reason. Any other failure is told as it is."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, asyncpg.PostgresError):
            return _reason(seen)
        seen = seen.__cause__ or seen.__context__
    return str(exc)


def _reason(exc: BaseException) -> str:
    """The first line of a driver error (PostgreSQL's message names no row or secret here)."""
    text = str(exc).strip().splitlines()
    hint = getattr(exc, "hint", None)
    more = f"; {hint}" if isinstance(hint, str) and hint else ""
    return f"{text[0] if text else ''} ({type(exc).__name__}){more}"


def _as_tuple(rev: object) -> tuple[object, ...]:
    if rev is None:
        return ()
    if isinstance(rev, tuple | list):
        return tuple(rev)
    return (rev,)
