"""Every named SQL statement of every module prepares against the migrated schema, as the
runtime role the kernel uses: a renamed column or a broken fragment fails here, not at run time."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module, resources

import asyncpg
import pytest
from pgvector.asyncpg import register_vector

from engram.infra.sql import parse_queries
from tests.conftest import ScratchDatabase

#: The modules that load named statements, each from a file of its own package.
OWNERS = (
    "engram.agents.registry",
    "engram.autonomy.catalogue",
    "engram.autonomy.healing",
    "engram.autonomy.state",
    "engram.infra.migrate",
    "engram.infra.outbox",
    "engram.memory.admin.quarantine",
    "engram.memory.admin.replay",
    "engram.memory.audit.log",
    "engram.memory.audit.state",
    "engram.memory.consolidation.candidates",
    "engram.memory.consolidation.reversal",
    "engram.memory.consolidation.watch",
    "engram.memory.gate.at_once",
    "engram.memory.gate.rate_limit",
    "engram.memory.gate.reopen",
    "engram.memory.rl.models",
    "engram.memory.store.versions",
    "engram.memory.temporal.engine",
    "engram.memory.temporal.numbering",
    "engram.memory.temporal.reads",
    "engram.notifications.dispatcher",
    "engram.retrieval.search",
)


def _statements() -> dict[str, str]:
    found: dict[str, str] = {}
    for owner in OWNERS:
        sql: Mapping[str, str] = import_module(owner).SQL
        found.update({f"{owner}:{name}": text for name, text in sql.items()})
    return found


def _sql_files() -> set[str]:
    """The .sql files shipped in the engram package."""
    root = resources.files("engram")
    files: set[str] = set()
    pending = [root]
    while pending:
        folder = pending.pop()
        for entry in folder.iterdir():
            if entry.is_dir():
                pending.append(entry)
            elif entry.name.endswith(".sql"):
                files.add(str(entry))
    return files


def test_every_sql_file_has_an_owner_listed_here() -> None:
    """Each .sql file sits beside (or in the ``sql`` folder of) one of OWNERS, so the
    preparation test below covers its statements."""
    owned: set[str] = set()
    for owner in OWNERS:
        folder = resources.files(import_module(owner).__package__ or "")
        for place in (folder, folder.joinpath("sql")):
            if place.is_dir():
                owned |= {str(e) for e in place.iterdir() if e.name.endswith(".sql")}
    assert _sql_files() <= owned, sorted(_sql_files() - owned)


@pytest.mark.parametrize("name", sorted(_statements()))
async def test_the_statement_prepares_as_the_runtime_role(
    database: ScratchDatabase, name: str
) -> None:
    """The statement parses, names existing objects and is permitted to the runtime role."""
    conn = await asyncpg.connect(database.runtime_url)
    try:
        await register_vector(conn)
        await conn.execute("SET search_path = engram, public")
        await conn.prepare(_statements()[name])
    finally:
        await conn.close()


def test_a_comment_in_a_fragment_never_comments_out_the_line_it_is_included_in() -> None:
    """A fragment's comment lines are dropped, so what follows its inclusion still counts."""
    queries = parse_queries(
        "-- fragment: f\n-- why f exists\nx = 1\n-- a trailing note\n"
        "-- name: q\nSELECT 1 WHERE {{f}} AND y = 2\n"
    )
    assert "SELECT 1 WHERE x = 1 AND y = 2" == queries["q"]
