"""Alembic environment: async (asyncpg through SQLAlchemy), one transaction for the run,
which first takes the migration lock: processes migrating one database at once (kernels
started together) run one after another, and each later one finds the schema at head.

The URL comes from ``config.attributes["engram_url"]`` (set by :mod:`engram.infra.migrate`),
never from an ini file, so credentials are not written anywhere.
"""

from __future__ import annotations

import asyncio

import structlog
from alembic import context
from sqlalchemy import pool, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from engram.infra.migrate import SQL

config = context.config
log = structlog.get_logger("engram.infra.migrate")


def _take_lock(connection: Connection) -> None:
    """Take the migration lock; say so, once, when another run holds it and this one waits."""
    if connection.execute(text(SQL["migration_lock_try"])).scalar():
        return
    holder = connection.execute(text(SQL["migration_lock_holder"])).scalar()
    log.warning("migrations.waiting_for_lock", holder_pid=holder)
    connection.execute(text(SQL["migration_lock"]))
    log.info("migrations.lock_taken")


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None, transactional_ddl=True)
    with context.begin_transaction():
        _take_lock(connection)  # before the revision is read
        context.run_migrations()


async def _run_async(url: str) -> None:
    engine = create_async_engine(url, poolclass=pool.NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("engram migrations run online only: use `engram migrate`")

asyncio.run(_run_async(str(config.attributes["engram_url"])))
