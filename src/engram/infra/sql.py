"""Named SQL statements kept in ``.sql`` files, one file per aggregate.

A file holds blocks headed ``-- name: statement_name``; a block headed ``-- fragment: name``
is text that statements include as ``{{name}}`` (a column list, say). A fragment may include
others, to a depth of :data:`MAX_DEPTH`. Statements take positional parameters (``$1``); no
value is ever formatted into them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType

_HEADER = re.compile(r"^--\s*(name|fragment):\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"\{\{([a-z_][a-z0-9_]*)\}\}")

#: How deep fragments may include fragments (deeper is taken for a cycle).
MAX_DEPTH = 4


def _blocks(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """The statements and the fragments of one file, by name (fragments not yet substituted)."""
    parts = _HEADER.split(text)
    statements: dict[str, str] = {}
    fragments: dict[str, str] = {}
    for kind, name, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        if name in statements or name in fragments:
            raise ValueError(f"SQL block {name!r} defined twice")
        if kind == "name":
            statements[name] = body.strip()
        else:
            # A fragment is included in the middle of a line: a comment in it would comment
            # out the rest of that line, so a fragment's comment lines are documentation only.
            fragments[name] = "\n".join(
                line for line in body.strip().splitlines() if not line.lstrip().startswith("--")
            )
    return statements, fragments


def parse_queries(text: str, shared: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """Statements of one file by name, fragments substituted (its own, or ``shared`` ones:
    the fragments of the file that owns them, such as the version store's column list)."""
    statements, own = _blocks(text)
    fragments = {**(shared or {}), **own}

    def include(match: re.Match[str]) -> str:
        try:
            return fragments[match.group(1)]
        except KeyError:
            raise ValueError(f"unknown SQL fragment {match.group(1)!r}") from None

    def expand(sql: str) -> str:
        for _ in range(MAX_DEPTH + 1):
            if _INCLUDE.search(sql) is None:
                return sql
            sql = _INCLUDE.sub(include, sql)
        raise ValueError("SQL fragments include each other deeper than MAX_DEPTH (a cycle?)")

    return MappingProxyType({name: expand(sql) for name, sql in statements.items()})


def _read(package: str, filename: str) -> str:
    return resources.files(package).joinpath(filename).read_text(encoding="utf-8")


def load_queries(
    package: str, filename: str, *, shared: Mapping[str, str] | None = None
) -> Mapping[str, str]:
    """Parse ``filename`` shipped inside ``package`` (``shared``: fragments it may include)."""
    return parse_queries(_read(package, filename), shared)


def load_fragments(package: str, filename: str) -> Mapping[str, str]:
    """The fragments of ``filename`` inside ``package``, for other files to include."""
    return MappingProxyType(_blocks(_read(package, filename))[1])


#: The nearest-neighbour order a pgvector index serves (cosine distance to the statement's
#: first parameter), as the statements that walk it write it.
_INDEX_ORDER = re.compile(r"ORDER BY ((?:[a-z]+\.)?embedding <=> \$1(?:::vector)?)$", re.MULTILINE)


def exact_scan(sql: str) -> str:
    """``sql``, a statement whose one inner ``ORDER BY embedding <=> $1`` the HNSW
    index serves, ordered instead by an expression no index serves (the same distance plus
    zero): the planner then measures every version that passes the statement's filter and
    keeps the nearest, exactly. The index scan counts the versions it visits that the filter
    refuses towards its limit (``hnsw.max_scan_tuples``); this one does not stop early."""
    exact, found = _INDEX_ORDER.subn(r"ORDER BY (\1) + 0", sql)
    if found != 1:
        raise ValueError("the statement has no single nearest-neighbour order to replace")
    return exact
