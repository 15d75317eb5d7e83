"""Alembic environment: async (asyncpg through SQLAlchemy), one transaction for the run.

The URL comes from ``config.attributes["engram_url"]`` (set by :mod:`engram.infra.migrate`),
never from an ini file, so credentials are not written anywhere.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import pool
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

config = context.config


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None, transactional_ddl=True)
    with context.begin_transaction():
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
