"""The named-SQL file loader (engram.infra.sql): names, fragments, the shipped files."""

from __future__ import annotations

import pytest

from engram.infra.sql import load_queries, parse_queries


def test_sql_blocks_are_named_and_fragments_included() -> None:
    """Statements are found by name and ``{{fragment}}`` is replaced by its block."""
    queries = parse_queries(
        "-- fragment: cols\nid, name\n\n-- name: get_one\nSELECT {{cols}} FROM t WHERE id = $1\n"
    )
    assert {"get_one": "SELECT id, name FROM t WHERE id = $1"} == dict(queries)


def test_fragments_may_include_fragments_but_not_in_a_cycle() -> None:
    """A fragment's own ``{{name}}`` is replaced too; fragments that include each other fail
    at load time instead of looping."""
    queries = parse_queries(
        "-- fragment: cols\nid, {{more}}\n-- fragment: more\nname\n"
        "-- name: get_one\nSELECT {{cols}} FROM t\n"
    )
    assert dict(queries) == {"get_one": "SELECT id, name FROM t"}
    with pytest.raises(ValueError, match="cycle"):
        parse_queries("-- fragment: a\n{{b}}\n-- fragment: b\n{{a}}\n-- name: q\nSELECT {{a}}\n")


def test_sql_duplicates_and_unknown_fragments_are_errors() -> None:
    """A name defined twice, or a missing fragment, fails loudly at load time."""
    with pytest.raises(ValueError, match="twice"):
        parse_queries("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n")
    with pytest.raises(ValueError, match="unknown SQL fragment"):
        parse_queries("-- name: a\nSELECT {{nope}}\n")


def test_shipped_sql_files_parse() -> None:
    """The statements the memory code uses exist in the packaged files."""
    versions = load_queries("engram.memory.store", "versions.sql")
    audit = load_queries("engram.memory.audit", "audit.sql")
    assert {"head", "candidates", "insert_version", "close_head", "forget_head"} <= set(versions)
    assert {"append_entry", "page_after", "hold_lane_heads", "insert_checkpoint"} <= set(audit)
    assert all("{{" not in sql for sql in [*versions.values(), *audit.values()])
