"""Setting a kernel's home up: the database schema, the model directory, the data dir.

What ``engram migrate``, ``engram prepare-model`` and the admin commands need before (or
instead of) a running kernel. Only ``engram serve`` (and so ``make run``), ``engram migrate``
with ``--init`` and ``engram prepare-model`` may create an embedded data directory; every
other command refuses a directory that holds no database, so a mistyped ``ENGRAM_DATA_DIR``
is an error rather than a new, empty database.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from engram.config import EngramSettings
from engram.errors import ConfigurationError, ModelFilesError
from engram.infra import migrate
from engram.infra.embedded_server import DATABASE, EmbeddedPostgres, make_private
from engram.infra.model_files import ensure_default_model, missing_files


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


async def run_migrations(settings: EngramSettings, revision: str = "head") -> str:
    """Migrate the configured database to ``revision`` and return the revision it is at."""
    if settings.database_url is not None:
        if settings.migration_database_url is None:
            raise ConfigurationError(
                "ENGRAM_MIGRATION_DATABASE_URL is required to migrate an external database"
            )
        url = settings.migration_database_url.get_secret_value()
        await asyncio.to_thread(migrate.upgrade, url, revision)
        return await asyncio.to_thread(migrate.current_revision_sync, url) or "base"
    server = EmbeddedPostgres(settings.pgdata_dir)
    await asyncio.to_thread(server.start)
    try:
        await migrate.ensure_database(server.admin_url(), DATABASE)
        url = server.admin_url(DATABASE)
        await asyncio.to_thread(migrate.upgrade, url, revision)
        return await asyncio.to_thread(migrate.current_revision_sync, url) or "base"
    finally:
        await asyncio.to_thread(server.stop)


def prepare_model(settings: EngramSettings) -> tuple[bool, Path]:
    """Make sure the embedding model directory is complete; True if files were copied."""
    if settings.embedding_model_path is not None:
        absent = missing_files(settings.model_dir)
        if absent:
            raise ModelFilesError(f"{settings.model_dir} lacks {', '.join(absent)}")
        return False, settings.model_dir
    make_private(settings.data_dir)  # before the model dir inside it is made 0755
    return ensure_default_model(settings.model_dir), settings.model_dir
