"""asyncpg implementation of the database port.

This module is the one boundary where asyncpg's exceptions become engram's: a unique
violation becomes :class:`~engram.errors.UniqueViolation` naming its constraint, a lost
connection :class:`~engram.errors.DatabaseUnavailable`, and so on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TypeVar

import asyncpg
import structlog
from asyncpg.pool import PoolConnectionProxy
from pgvector.asyncpg import register_vector

from engram.errors import (
    DatabaseError,
    DatabaseInterrupted,
    DatabaseUnavailable,
    EngramError,
    PermissionDenied,
    TransientDatabaseError,
    UniqueViolation,
)
from engram.infra.db import Connection, PoolUsage, Row
from engram.infra.resilience import CircuitBreaker, Resilience

T = TypeVar("T")
log = structlog.get_logger("engram.infra.postgres")

#: Schema that holds engram's tables; the vector type lives where the extension put it.
SCHEMA = "engram"

_TRANSIENT_SQLSTATES = frozenset({"40001", "40P01", "55P03"})  # serialization, deadlock, lock
#: SQLSTATE classes of a statement the server stopped: insufficient resources, operator
#: intervention (a cancel, a statement timeout), system (I/O) errors. The server's condition,
#: not the request's fault: answered as unavailable, never as an internal error.
_INTERRUPTED_CLASSES = frozenset({"53", "57", "58"})


_DRIVER_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    OSError,
    TimeoutError,
)


def _reraise(exc: Exception) -> Exception:
    """The exception to raise for ``exc``: driver errors translated, anything else as it is
    (errors raised by the caller's own code inside a transaction pass through untouched)."""
    return translate(exc) if isinstance(exc, _DRIVER_ERRORS) else exc


def translate(exc: BaseException) -> EngramError:
    """Map a driver or socket exception to the project's error hierarchy."""
    if isinstance(exc, EngramError):
        return exc
    if isinstance(exc, asyncpg.UniqueViolationError):
        return UniqueViolation(constraint=exc.constraint_name)
    if isinstance(exc, asyncpg.InsufficientPrivilegeError):
        return PermissionDenied(str(exc), sqlstate=exc.sqlstate)
    if isinstance(
        exc,
        asyncpg.PostgresConnectionError
        | asyncpg.CannotConnectNowError
        | asyncpg.TooManyConnectionsError
        | asyncpg.AdminShutdownError
        | asyncpg.CrashShutdownError
        | asyncpg.ConnectionDoesNotExistError
        | asyncpg.InterfaceError
        | asyncpg.exceptions.InternalClientError
        | ConnectionError
        | OSError
        | TimeoutError,
    ):
        return DatabaseUnavailable(f"database unreachable: {type(exc).__name__}: {exc}")
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = getattr(exc, "sqlstate", None)
        if sqlstate in _TRANSIENT_SQLSTATES:
            return TransientDatabaseError(str(exc), sqlstate=sqlstate)
        if sqlstate is not None and sqlstate[:2] in _INTERRUPTED_CLASSES:
            return DatabaseInterrupted(str(exc), sqlstate=sqlstate)
        return DatabaseError(str(exc), sqlstate=sqlstate)
    return DatabaseError(f"{type(exc).__name__}: {exc}")


class _Session:
    """A :class:`Connection` over one asyncpg connection, translating its errors."""

    def __init__(self, conn: asyncpg.Connection[Any] | PoolConnectionProxy[Any]) -> None:
        self._conn = conn

    async def execute(self, query: str, *args: Any) -> str:
        try:
            return await self._conn.execute(query, *args)
        except Exception as exc:
            raise translate(exc) from exc

    async def executemany(self, query: str, args: Sequence[Sequence[Any]]) -> None:
        try:
            await self._conn.executemany(query, args)
        except Exception as exc:
            raise translate(exc) from exc

    async def fetch(self, query: str, *args: Any) -> list[Row]:
        try:
            return list(await self._conn.fetch(query, *args))
        except Exception as exc:
            raise translate(exc) from exc

    async def fetchrow(self, query: str, *args: Any) -> Row | None:
        try:
            return await self._conn.fetchrow(query, *args)
        except Exception as exc:
            raise translate(exc) from exc

    async def fetchval(self, query: str, *args: Any) -> Any:
        try:
            return await self._conn.fetchval(query, *args)
        except Exception as exc:
            raise translate(exc) from exc


def _encode_json(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


async def _init_connection(conn: asyncpg.Connection[Any]) -> None:
    # jsonb is exchanged as Python objects; plain json stays text (the audit log hashes it).
    await conn.set_type_codec(
        "jsonb", encoder=_encode_json, decoder=json.loads, schema="pg_catalog"
    )
    try:
        await register_vector(conn)
    except ValueError as exc:  # the extension is not installed yet (before migrations)
        if "unknown type" not in str(exc):
            raise
        return
    # Filtered nearest-neighbour queries keep scanning the HNSW graph until they have enough
    # rows that pass the filter (pgvector >= 0.8), in exact distance order.
    await conn.execute("SET hnsw.iterative_scan = strict_order")


async def _keep_session(conn: asyncpg.Connection[Any]) -> None:
    """Reset hook on release. asyncpg has already rolled back any open transaction; engram
    changes no session state after ``_init_connection``, so the extra ``RESET ALL`` round trip
    asyncpg would otherwise make on every release is skipped (and the session settings of
    ``_init_connection`` survive)."""
    del conn


class PostgresDatabase:
    """A pool of asyncpg connections implementing :class:`engram.infra.db.DatabaseAdapter`."""

    def __init__(self, pool: asyncpg.Pool[Any], resilience: Resilience) -> None:
        self._pool = pool
        self._resilience = resilience
        self._waiting = 0
        self._wait_seconds = 0.0

    @property
    def breaker(self) -> CircuitBreaker:
        """The circuit breaker every call of this pool goes through."""
        return self._resilience.breaker

    def pool_usage(self) -> PoolUsage:
        """How the pool is used now (read by the metrics on each scrape)."""
        return PoolUsage(
            size=self._pool.get_size(),
            idle=self._pool.get_idle_size(),
            max_size=self._pool.get_max_size(),
            waiting=self._waiting,
            wait_seconds=self._wait_seconds,
        )

    @classmethod
    async def connect(
        cls,
        dsn: str,
        *,
        resilience: Resilience,
        min_size: int = 2,
        max_size: int = 10,
        command_timeout: float = 30.0,
    ) -> PostgresDatabase:
        """Open a pool to ``dsn`` with engram's schema first on the search path."""
        try:
            pool = await asyncpg.create_pool(
                dsn,
                min_size=min_size,
                max_size=max_size,
                command_timeout=command_timeout,
                init=_init_connection,
                reset=_keep_session,
                server_settings={
                    "search_path": f"{SCHEMA}, public",
                    "application_name": "engram",
                    "timezone": "UTC",
                },
            )
        except Exception as exc:
            raise translate(exc) from exc
        return cls(pool, resilience)

    async def _on_error(self, exc: Exception) -> Exception:
        error = _reraise(exc)
        if isinstance(error, DatabaseUnavailable):
            # One dead connection usually means the server restarted or killed backends: the
            # idle ones in the pool are dead too. Replace them all before the next attempt.
            await self._pool.expire_connections()
        return error

    @asynccontextmanager
    async def _acquire(self) -> AsyncIterator[PoolConnectionProxy[Any]]:
        """A pooled connection, counting the callers waiting for one and how long they wait."""
        self._waiting += 1
        started = time.perf_counter()
        try:
            conn = await self._pool.acquire()
        finally:
            self._waiting -= 1
            self._wait_seconds += time.perf_counter() - started
        try:
            yield conn
        finally:
            await self._pool.release(conn)

    @asynccontextmanager
    async def _session(self, *, in_transaction: bool) -> AsyncIterator[Connection]:
        """A pooled connection (inside a transaction if asked); driver errors translated."""
        try:
            async with self._acquire() as conn:
                if in_transaction:
                    async with conn.transaction():
                        yield _Session(conn)
                else:
                    yield _Session(conn)
        except Exception as exc:
            error = await self._on_error(exc)
            if error is exc:
                raise
            raise error from exc

    async def _call(
        self, fn: Callable[[Connection], Awaitable[T]], *, in_transaction: bool = False
    ) -> T:
        async def attempt() -> T:
            async with self._session(in_transaction=in_transaction) as conn:
                return await fn(conn)

        return await self._resilience.call(attempt)

    async def execute(self, query: str, *args: Any) -> str:
        return await self._call(lambda c: c.execute(query, *args))

    async def executemany(self, query: str, args: Sequence[Sequence[Any]]) -> None:
        await self._call(lambda c: c.executemany(query, args))

    async def fetch(self, query: str, *args: Any) -> list[Row]:
        return await self._call(lambda c: c.fetch(query, *args))

    async def fetchrow(self, query: str, *args: Any) -> Row | None:
        return await self._call(lambda c: c.fetchrow(query, *args))

    async def fetchval(self, query: str, *args: Any) -> Any:
        return await self._call(lambda c: c.fetchval(query, *args))

    async def run_in_transaction(self, fn: Callable[[Connection], Awaitable[T]]) -> T:
        return await self._call(fn, in_transaction=True)

    async def run(self, fn: Callable[[Connection], Awaitable[T]]) -> T:
        return await self._call(fn)

    def transaction(self) -> AbstractAsyncContextManager[Connection]:
        """One connection inside one transaction; not retried (the caller decides)."""
        return self._session(in_transaction=True)

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Connection]:
        """A pooled connection held for the block; its advisory locks end with it."""
        async with self._session(in_transaction=False) as conn:
            try:
                yield conn
            finally:
                # A lock left on a pooled connection would outlive its holder: released even
                # when the block is cancelled.
                with contextlib.suppress(DatabaseError, asyncio.CancelledError):
                    await asyncio.shield(conn.execute("SELECT pg_advisory_unlock_all()"))

    async def ping(self) -> None:
        value = await self.fetchval("SELECT 1")
        if value != 1:
            raise DatabaseError(f"SELECT 1 returned {value!r}")

    async def close(self) -> None:
        try:
            await self._pool.close()
        except Exception as exc:  # noqa: BLE001 - closing must not mask the shutdown path
            log.warning("db.close_failed", error=type(exc).__name__)
