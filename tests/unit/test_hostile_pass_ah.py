"""Hostile pass AH, unit half: how deep JSON is cut before the MCP SDK reads it (the
integration half, tests/integration/test_hostile_pass_ah.py, shows why)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engram.protocols.mcp.depth import MARKER, cut_deep, cut_deep_bytes


def _depth(value: Any) -> int:
    """Levels of containers in a parsed JSON value."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, level)
            members = item.values() if isinstance(item, dict) else item
            pending += [(member, level + 1) for member in members]
    return deepest


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def test_shallow_text_is_left_alone() -> None:
    """Text no deeper than the limit is not rewritten."""
    assert cut_deep(_nested(10), limit=10) is None
    assert cut_deep('{"a": [1, 2, {"b": [3]}]}', limit=4) is None


def test_a_deep_branch_becomes_the_marker_and_the_rest_is_kept() -> None:
    """Only the part past the limit changes; members around it keep their values."""
    text = '{"id": 7, "deep": ' + _nested(30) + ', "after": "kept"}'
    cut = cut_deep(text, limit=5)
    assert cut is not None
    parsed = json.loads(cut)
    assert (7, "kept", 5) == (parsed["id"], parsed["after"], _depth(parsed))
    assert json.loads(MARKER) in cut


def test_brackets_and_escaped_quotes_in_strings_do_not_count() -> None:
    """Brackets inside strings, escaped quotes and backslashes are text, not nesting."""
    tricky = '"[[[{{{ \\" ]]] \\\\"'
    text = '{"s": ' + tricky + ', "n": ' + _nested(12) + ', "t": ' + tricky + "}"
    cut = cut_deep(text, limit=4)
    assert cut is not None
    parsed = json.loads(cut)
    assert (json.loads(tricky), json.loads(tricky), 4) == (parsed["s"], parsed["t"], _depth(parsed))


def test_arrays_are_cut_like_objects() -> None:
    """Nested arrays count as nesting too."""
    text = '{"tags": ' + "[" * 40 + "1" + "]" * 40 + "}"
    cut = cut_deep(text, limit=8)
    assert cut is not None
    assert 8 == _depth(json.loads(cut))


@pytest.mark.parametrize(
    "text",
    [
        '{"a":' * 80 + "1",  # never closed
        "]" + "[" * 80,  # closes first
        '{"a": "' + "[" * 80,  # an unterminated string
    ],
)
def test_unbalanced_text_is_left_to_the_parser(text: str) -> None:
    """Text that is not balanced JSON is not rewritten: the parser refuses it."""
    assert cut_deep(text, limit=8) is None


def test_bytes_that_are_not_utf8_are_left_to_the_parser() -> None:
    """A body that is not UTF-8 is left to the parser; one that is is cut."""
    assert cut_deep_bytes(b"\xff" + _nested(80).encode(), limit=8) is None
    cut = cut_deep_bytes(_nested(80).encode(), limit=8)
    assert cut is not None
    assert 8 == _depth(json.loads(cut))
