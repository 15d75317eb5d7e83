"""The MCP tools' published schemas, list cursors and their documentation (no kernel)."""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import get_args

import pytest

from engram.memory import schemas
from engram.memory.types import MemoryRecord, MemoryType
from engram.protocols.mcp.outputs import ErrorKind
from engram.protocols.mcp.results import ERROR_KINDS
from engram.protocols.mcp.schema import TOOL_NAMES, cursor_position, page_cursor
from engram.protocols.mcp.tools import EngramTools
from engram.retrieval import arguments, search

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def test_tag_filters_accept_what_records_may_carry() -> None:
    """A tag filter's limits are the record schema's limits on metadata.tags."""
    assert (schemas.MAX_TAGS, schemas.MAX_TAG_CHARS) == (
        arguments.MAX_TAG_FILTERS,
        arguments.MAX_TAG_CHARS,
    )


def test_a_cursor_stands_for_its_records_ingestion_time_and_id() -> None:
    """page_cursor and cursor_position round-trip; the cursor is URL-safe text."""
    record = MemoryRecord.draft(MemoryType.BELIEF, "Cursors are opaque.", source_agent="a")
    stamped = record.model_copy(update={"ingestion_time": datetime(2026, 5, 1, 12, tzinfo=UTC)})
    cursor = page_cursor(stamped)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", cursor)
    assert (stamped.ingestion_time, stamped.id) == cursor_position(cursor)


#: A time without its zone and an id (fixed, so that the test ids are the same in every run).
NAIVE = base64.urlsafe_b64encode(
    b"2026-01-01T00:00:00|b3164623-7f46-4655-b24d-c96b8686bc8c"
).decode()


@pytest.mark.parametrize(
    "cursor", ["", "!!!", "\x00", "bm90IGEgY3Vyc29y", "MjAyNi0wMS0wMXx4", NAIVE, NAIVE[:-9]]
)
def test_anything_else_is_not_a_cursor(cursor: str) -> None:
    """Text that is not a cursor list returned (naive instants included) is a ValueError."""
    with pytest.raises(ValueError, match="not a cursor"):
        cursor_position(cursor)


def test_the_output_schemas_name_every_error_kind() -> None:
    """Each kind an engram error maps to, and the kinds of the adapter's own failures, is one
    the output schemas list."""
    kinds = {*ERROR_KINDS.values(), "unknown_tool", "internal", "invalid_input"}
    assert kinds == set(get_args(ErrorKind))


def test_input_schemas_stay_lean() -> None:
    """No tool's input schema passes 3 KiB, and health takes no argument."""
    sizes = {tool.name: len(_compact(tool.input_schema)) for tool in EngramTools.definitions()}
    assert [] == [name for name, size in sizes.items() if size > 3 * 1024], sizes
    health = next(t for t in EngramTools.definitions() if t.name == "health")
    assert {} == health.input_schema["properties"]


def _compact(schema: object) -> str:
    return json.dumps(schema, separators=(",", ":"))


def test_the_documentation_lists_every_tool_and_the_default_floor() -> None:
    """docs/mcp.md has a table row for each tool and states the default min_score."""
    text = DOC.read_text()
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", text, re.MULTILINE))
    assert set(TOOL_NAMES) <= rows
    assert f"`min_score` defaults to {search.DEFAULT_MIN_SCORE}" in text
