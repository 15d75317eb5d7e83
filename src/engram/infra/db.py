"""The database port: what the memory code may ask of PostgreSQL.

Implementations translate driver errors into :mod:`engram.errors` at this boundary, so callers
never see a driver exception. Statements use positional parameters (``$1``); values are never
formatted into SQL text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

Row = Mapping[str, Any]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PoolUsage:
    """A snapshot of a connection pool, for the metrics.

    ``waiting`` counts callers asking for a connection right now; ``wait_seconds`` is the time
    all callers have spent asking so far (its rate is the average number waiting).
    """

    size: int
    idle: int
    max_size: int
    waiting: int
    wait_seconds: float

    @property
    def in_use(self) -> int:
        """Open connections lent out."""
        return self.size - self.idle


class Connection(Protocol):
    """One database session; inside :meth:`DatabaseAdapter.transaction` every call shares it."""

    async def execute(self, query: str, *args: Any) -> str:
        """Run a statement and return its status tag (``INSERT 0 1``)."""
        ...

    async def executemany(self, query: str, args: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each argument tuple."""
        ...

    async def fetch(self, query: str, *args: Any) -> list[Row]:
        """Run a query and return all rows."""
        ...

    async def fetchrow(self, query: str, *args: Any) -> Row | None:
        """Run a query and return the first row, or ``None``."""
        ...

    async def fetchval(self, query: str, *args: Any) -> Any:
        """Run a query and return the first column of the first row."""
        ...


class DatabaseAdapter(Connection, Protocol):
    """A pool of connections with explicit, short transactions.

    The query methods inherited from :class:`Connection` each run on a pooled connection
    in autocommit mode.
    """

    def transaction(self) -> AbstractAsyncContextManager[Connection]:
        """A connection inside one transaction: committed on exit, rolled back on error."""
        ...

    def session(self) -> AbstractAsyncContextManager[Connection]:
        """A connection of its own for as long as the block runs, in autocommit mode: for
        session state such as advisory locks. On exit every advisory lock it still holds is
        released before the connection goes back to the pool."""
        ...

    async def run_in_transaction(self, fn: Callable[[Connection], Awaitable[T]]) -> T:
        """Run ``fn`` in a transaction; on a lost connection or a transient error roll back and
        run it again (with backoff, through the circuit breaker). ``fn`` must be safe to
        repeat: a retry may follow a COMMIT whose acknowledgement was lost."""
        ...

    async def run(self, fn: Callable[[Connection], Awaitable[T]]) -> T:
        """Run ``fn`` on one pooled connection in autocommit mode, retried as
        :meth:`run_in_transaction` is. For work done in one statement (its own implicit
        transaction): ``fn`` must be safe to repeat, as a retry may follow a statement that
        committed before its answer was lost."""
        ...

    async def ping(self) -> None:
        """Raise :class:`engram.errors.DatabaseError` unless the database answers ``SELECT 1``."""
        ...

    async def close(self) -> None:
        """Close every connection of the pool."""
        ...
