"""What the adapters (HTTP, MCP, CLI) share about errors: one lookup and one wording.

Each adapter says what an engram error means to its clients in one table keyed by error class
(``http.problems.ERROR_STATUS``, ``mcp.tools.ERROR_KINDS``, ``cli.output.EXIT_CODES``), and
reads it with :func:`lookup`: the entry of the nearest listed class in the error's ancestry
wins, so a subclass no table names takes the meaning of its family. Every table lists
:class:`EngramError`, its default.

Input that does not fit a pydantic model is described by :func:`problems_of` (defined with the
type rules in :mod:`engram.memory.schemas`, which word the same problems) as ``where: what``
per problem, the same way in every adapter; the offending value is never quoted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from engram.errors import EngramError
from engram.memory.schemas import problems_of

T = TypeVar("T")


def lookup(table: Mapping[type[EngramError], T], exc: EngramError) -> T:
    """The entry of the nearest class of ``exc`` that ``table`` lists (its ``EngramError``
    entry, the default, when no closer one is listed)."""
    for kind in type(exc).__mro__:
        if issubclass(kind, EngramError) and kind in table:
            return table[kind]
    return table[EngramError]


__all__ = ["lookup", "problems_of"]
