"""Setting a kernel's home up: the data dir, the database and its schema, the model directory.

What both compositions (:mod:`engram.kernel` and the lighter :mod:`engram.admin_kernel`)
open first, and what ``engram migrate`` and ``engram prepare-model`` do on their own.

Only ``engram serve`` (and so ``make run``), ``engram prepare-model`` and commands given
``--init`` may create an embedded data directory; every other command refuses a directory
that holds no database, so a mistyped ``ENGRAM_DATA_DIR`` is an error rather than a new,
empty database.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path

import structlog

from engram.config import EngramSettings
from engram.errors import (
    ConfigurationError,
    DatabaseError,
    EmbeddedServerError,
    MigrationError,
    ModelFilesError,
)
from engram.infra import migrate, server_log
from engram.infra.db import DatabaseAdapter
from engram.infra.embedded_server import DATABASE, EmbeddedPostgres, make_private
from engram.infra.model_files import ensure_default_model, missing_files
from engram.infra.postgres import PostgresDatabase
from engram.infra.resilience import CircuitBreaker, Resilience

log = structlog.get_logger("engram.provision")

#: The login every kernel works as (migrations run as the owner, never at run time).
RUNTIME_ROLE = "engram_runtime"


class NoDatabaseHere(ConfigurationError):
    """An admin command was pointed at an embedded data dir that holds no database."""

    @classmethod
    def at(cls, settings: EngramSettings) -> NoDatabaseHere:
        """The error for ``settings``' data dir, saying where it looked."""
        where = settings.data_dir
        found = "does not exist" if not where.exists() else "holds no engram database"
        return cls(
            f"{where} {found} (looked for {settings.pgdata_dir / 'PG_VERSION'}); "
            "set ENGRAM_DATA_DIR to the directory `engram serve` uses, or pass --init "
            "to create a new one there"
        )


def has_database(settings: EngramSettings) -> bool:
    """Whether the configured kernel has a database to open without creating one.

    An external database always counts (its URL names it); an embedded one counts once its
    PostgreSQL cluster has been initialised in the data dir.
    """
    if not settings.embedded:
        return True
    return (settings.pgdata_dir / "PG_VERSION").is_file()


def require_database(settings: EngramSettings) -> None:
    """Raise :class:`NoDatabaseHere`, saying where it looked, unless :func:`has_database`."""
    if not has_database(settings):
        raise NoDatabaseHere.at(settings)


async def database_urls(settings: EngramSettings, stack: AsyncExitStack) -> tuple[str, str | None]:
    """The runtime URL and the migration URL (None when the kernel may not migrate).

    Without ``ENGRAM_DATABASE_URL`` the embedded server is started (or attached to) in the
    data dir, and stopped through ``stack``.
    """
    if settings.database_url is not None:
        migration = settings.migration_database_url
        return settings.database_url.get_secret_value(), (
            migration.get_secret_value() if migration is not None else None
        )
    server = EmbeddedPostgres(settings.pgdata_dir)
    await asyncio.to_thread(server.start)
    stack.callback(server.stop)
    await migrate.ensure_database(server.admin_url(), DATABASE)
    # Migrations run as the bootstrap superuser, which switches to the owner role itself.
    return server.url(user=RUNTIME_ROLE), server.admin_url(DATABASE)


async def connect_database(
    settings: EngramSettings, url: str, stack: AsyncExitStack
) -> PostgresDatabase:
    """The runtime pool, behind the circuit breaker and retries; closed through ``stack``."""
    breaker = CircuitBreaker(
        "postgres",
        fail_max=settings.breaker_fail_max,
        reset_seconds=settings.breaker_reset_seconds,
        first_reset_seconds=settings.breaker_first_reset_seconds,
    )
    try:
        db = await PostgresDatabase.connect(
            url,
            resilience=Resilience(
                breaker,
                retries=settings.retry_attempts,
                initial_wait_seconds=settings.retry_initial_wait_seconds,
            ),
            min_size=settings.db_pool_min_size,
            max_size=settings.db_pool_max_size,
            command_timeout=settings.db_command_timeout_seconds,
        )
    except DatabaseError as exc:
        if migrate.role_missing(exc, RUNTIME_ROLE):
            # The first migration creates the role: no retry can mend its absence.
            raise MigrationError(
                f"the database holds no engram schema (its login role {RUNTIME_ROLE} does not "
                "exist): it was never migrated; run `engram migrate`, or start with "
                "ENGRAM_MIGRATE_ON_START=true"
            ) from exc
        raise
    stack.push_async_callback(db.close)
    return db


async def schema_revision(db: DatabaseAdapter) -> str | None:
    """The migration revision the database is at (``None`` before the first one)."""
    value = await db.fetchval("SELECT version_num FROM public.alembic_version")
    return None if value is None else str(value)


async def check_schema(db: DatabaseAdapter, head: str) -> None:
    """Raise :class:`MigrationError` unless the schema is at ``head``; one a newer engram
    migrated says so (migrating cannot help there)."""
    current = await schema_revision(db)
    if current is not None and current not in migrate.known_revisions():
        raise migrate.newer_schema(current)
    if current != head:
        raise MigrationError(f"schema at {current}, code expects {head}: run `engram migrate`")


async def run_migrations(settings: EngramSettings, revision: str = "head") -> str:
    """Migrate the configured database to ``revision`` and return the revision it is at.

    ``revision`` is ``head`` or a revision of this engram: alembic's other ways of naming a
    target (``base``, relative steps such as ``-1`` or ``0021+1``, branch names) are refused
    before the database is touched, as ``upgrade`` to them changed nothing and said so as
    if it had done what was asked, or failed in alembic's words."""
    _check_target(revision)
    if settings.database_url is not None:
        if settings.migration_database_url is None:
            raise ConfigurationError(
                "ENGRAM_MIGRATION_DATABASE_URL is required to migrate an external database"
            )
        url = settings.migration_database_url.get_secret_value()
        await asyncio.to_thread(migrate.upgrade, url, revision)
        return _reached(revision, await asyncio.to_thread(migrate.current_revision_sync, url))
    server = EmbeddedPostgres(settings.pgdata_dir)
    await asyncio.to_thread(server.start)
    logged = server_log.mark(server.pgdata)
    try:
        await migrate.ensure_database(server.admin_url(), DATABASE)
        url = server.admin_url(DATABASE)
        try:
            await asyncio.to_thread(migrate.upgrade, url, revision)
        except MigrationError as exc:
            # A PANIC (the write-ahead log on a full disk) ends every session: the migration's
            # own error may read only "connection was closed"; the server's log says why.
            panic = server_log.panic_since(server.pgdata, logged)
            if panic is None:
                raise
            raise MigrationError(f"{exc.message}; the database server logged {panic}") from exc
        reached = _reached(revision, await asyncio.to_thread(migrate.current_revision_sync, url))
    except BaseException:
        # The failure is what the operator must read; a stop failing after it (on the same
        # full disk, say) is logged, not raised in its place.
        try:
            await asyncio.to_thread(server.stop)
        except EmbeddedServerError as exc:
            log.warning("embedded_pg.stop_failed", error=exc.message)
        raise
    await asyncio.to_thread(server.stop)
    return reached


def _check_target(revision: str) -> None:
    """Refuse a migration target that is neither ``head`` nor a revision of this engram."""
    if revision != "head" and revision not in migrate.known_revisions():
        head = migrate.head_revision()
        raise MigrationError(
            f"--revision {revision!r} names no revision of this engram: give `head` or one of "
            f"0001 to {head}; nothing was changed"
        )


def _reached(revision: str, current: str | None) -> str:
    """The revision an upgrade to ``revision`` left the schema at. An upgrade to a revision
    the schema is already past changes nothing (alembic moves only forward), which read as
    success: it is refused, saying so."""
    reached = current or "base"
    if revision in migrate.known_revisions() and reached != revision:
        raise MigrationError(
            f"the schema is at revision {reached}, past {revision}: `engram migrate` moves a "
            "schema forward only; nothing was changed"
        )
    return reached


def prepare_model(settings: EngramSettings) -> tuple[bool, Path]:
    """Make sure the embedding model directory is complete; True if files were copied."""
    if settings.embedding_model_path is not None:
        absent = missing_files(settings.model_dir)
        if absent:
            raise ModelFilesError(f"{settings.model_dir} lacks {', '.join(absent)}")
        return False, settings.model_dir
    make_private(settings.data_dir)  # before the model dir inside it is made 0755
    return ensure_default_model(settings.model_dir), settings.model_dir
