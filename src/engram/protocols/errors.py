"""What the adapters (HTTP, MCP, CLI) share about errors: one lookup and one wording.

Each adapter says what an engram error means to its clients in one table keyed by error class
(``http.problems.ERROR_STATUS``, ``mcp.tools.ERROR_KINDS``, ``cli.output.EXIT_CODES``), and
reads it with :func:`lookup`: the entry of the nearest listed class in the error's ancestry
wins, so a subclass no table names takes the meaning of its family. Every table lists
:class:`EngramError`, its default.

Input that does not fit a pydantic model is described by :func:`problems_of` as
``where: what`` per problem, the same way in every adapter; the offending value is never
quoted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from engram.errors import EngramError

T = TypeVar("T")


class _Invalid(Protocol):
    """A pydantic validation error (FastAPI's ``RequestValidationError`` included)."""

    def errors(self) -> Sequence[Any]: ...


def lookup(table: Mapping[type[EngramError], T], exc: EngramError) -> T:
    """The entry of the nearest class of ``exc`` that ``table`` lists (its ``EngramError``
    entry, the default, when no closer one is listed)."""
    for kind in type(exc).__mro__:
        if issubclass(kind, EngramError) and kind in table:
            return table[kind]
    return table[EngramError]


def problems_of(exc: _Invalid, *, whole: str = "input") -> list[str]:
    """``where: what`` for each problem pydantic found (``whole`` names a problem of the
    input as a whole); the offending value is never quoted. A location may name a client's
    field, so callers that store or send these escape them."""
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error.get("loc", ())) or whole
        what = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        problems.append(f"{where}: {what}")
    return problems
