"""What storage can hold, and the JSON-safe, bounded form refused input takes in the audit."""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from engram.memory.storable import (
    MAX_AUDITED_INPUT_BYTES,
    MAX_INPUT_BYTES,
    MAX_NESTING,
    NON_FINITE,
    audited_input,
    escape_text,
    input_bytes,
    instant_problem,
    json_safe,
    json_text,
    text_problem,
    value_problems,
)


def _deep(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain text, accents é and emoji 🐘", None),
        ("a\x00b", "contains a NUL character"),
        ("\ud800", "contains a lone surrogate (not valid Unicode)"),
        ("tail \udfff", "contains a lone surrogate (not valid Unicode)"),
    ],
)
def test_text_problem_names_nul_and_lone_surrogates(text: str, expected: str | None) -> None:
    """NUL and unpaired surrogate code points are found; any valid Unicode passes."""
    assert expected == text_problem(text)


def test_instant_problem_finds_instants_without_a_utc_form() -> None:
    """An aware instant past 9999 or before year 1 in UTC is refused; naive ones are left to
    the schema check."""
    assert instant_problem(datetime.fromisoformat("9999-12-31T23:59:59-14:00"))
    assert instant_problem(datetime.fromisoformat("0001-01-01T00:00:00+14:00"))
    assert None is instant_problem(datetime(9999, 12, 31, 23, 59, tzinfo=UTC))
    assert None is instant_problem(datetime(9999, 12, 31, 23, 59))


def test_value_problems_are_named_once_without_quoting_the_value() -> None:
    """Each kind of problem is reported once, and no offending text appears in the report."""
    problems = value_problems(
        {"a\x00": ["secret\x00one", "secret\x00two"], "b": [math.nan, math.inf], "c": "\ud800"}
    )
    assert [
        "a key contains a NUL character",
        "a string contains a lone surrogate (not valid Unicode)",
        NON_FINITE,
        "a string contains a NUL character",
    ] == problems
    assert "secret" not in " ".join(problems)


def test_value_problems_bound_depth_and_cycles_without_recursion() -> None:
    """Nesting to the limit passes; deeper nesting, a cycle and 100 000 levels are refused."""
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    assert [] == value_problems(_deep(MAX_NESTING))
    deeper = [f"nested deeper than {MAX_NESTING} levels"]
    assert deeper == value_problems(_deep(MAX_NESTING + 1))
    assert deeper == value_problems(cycle)
    assert deeper == value_problems(_deep(100_000))


def test_escape_text_writes_the_escape_of_what_storage_cannot_hold() -> None:
    """NUL and lone surrogates become their six-character escapes; other text is unchanged."""
    assert "a\\u0000b\\ud800c" == escape_text("a\x00b\ud800c")
    assert "é 🐘" == escape_text("é 🐘")


def test_json_safe_leaves_json_values_as_they_are() -> None:
    """A value storage can hold has the same JSON text after the copy and is not flagged."""
    value = {"a": [1, 2.5, True, None, "é"], "b": {"c": (1, 2)}, "d": ""}
    safe = json_safe(value)
    assert json.dumps(value, sort_keys=True) == json.dumps(safe.value, sort_keys=True)
    assert not safe.altered


def test_json_safe_escapes_what_json_or_storage_cannot_hold() -> None:
    """NUL, surrogates, NaN, sets, non-JSON objects, deep nesting and cycles all come out as
    JSON that encodes to UTF-8, flagged as altered."""
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    record_id = uuid.uuid4()
    safe = json_safe(
        {
            "k\x00": "v\ud800",
            1: math.nan,
            "inf": -math.inf,
            "set": {3},
            "id": record_id,
            "deep": _deep(5000),
            "cycle": cycle,
        }
    )
    assert safe.altered
    text = json_text(safe.value)
    text.encode("utf-8")
    assert "\x00" not in text
    assert ("v\\ud800", "NaN", "-Infinity", [3], str(record_id)) == (
        safe.value["k\\u0000"],
        safe.value["1"],
        safe.value["inf"],
        safe.value["set"],
        safe.value["id"],
    )
    assert f"<nested deeper than {MAX_NESTING} levels>" in text


def test_audited_input_keeps_small_input_whole_and_large_input_as_an_excerpt() -> None:
    """Input up to the bound is kept whole; beyond it an excerpt, the size and the SHA-256."""
    small = {"type": "belief", "content": "x" * 100}
    assert {"raw": small} == audited_input(small)
    large = {"content": "é" * 20_000}
    kept = audited_input(large)["raw"]
    full = json_text(large).encode()
    assert (len(full), hashlib.sha256(full).hexdigest(), True) == (
        kept["bytes"],
        kept["sha256"],
        kept["truncated"],
    )
    assert len(kept["excerpt"].encode()) <= MAX_AUDITED_INPUT_BYTES
    assert full.decode().startswith(kept["excerpt"])


def test_audited_input_flags_escaped_input() -> None:
    """Input that had to be escaped says so, so a reader knows it is not byte for byte."""
    assert {"raw": {"c": "\\u0000"}, "escaped": True} == audited_input({"c": "\x00"})


def test_input_bytes_measures_the_json_and_the_bound_is_far_above_a_valid_record() -> None:
    """The size is that of the canonical JSON; a maximal valid record fits well within the cap."""
    assert len('{"a":"é"}'.encode()) == input_bytes({"a": "é"})
    largest = {"content": "é" * 16_000, "metadata": {"blob": "x" * 16_000}}
    assert input_bytes(largest) < MAX_INPUT_BYTES // 4
