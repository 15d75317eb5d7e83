"""Placeholder values of the PII screen (engram.memory.gate.pii.heuristics.is_placeholder)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engram.memory.gate.pii.heuristics import (
    _PLACEHOLDER_MARKERS,
    _PLACEHOLDER_WORDS,
    is_placeholder,
)

#: Pieces of the markers in every case, letters IGNORECASE matches with ASCII ones (U+0130,
#: the dotless i, the long s, the Kelvin sign), and the characters around values.
_PIECES = st.sampled_from(
    [
        "YOUR", "yOuR_", "ExAmPlE", "PLACEHOLDER", "ChangeMe", "change-me", "REDACTED",
        "Dummy", "SAMPLE", "xXxX", "***", "...", "<", ">", "${", "$(", "{{", "%(", "$", "%",
        "%A%", "{", "[", "INSERT_", "Replace_Me", "replaceme", "NOT_A_REAL", "notareal",
        "FAKE", "NotReal", "VAULT:V1:", "vault:v12:", "\u0130nsert-", "\u0131nsert_",
        "\u017fample", "\u212aey", "a", "1", "Z", "é", "_", "-", ":", " ", "'", '"', "`",
        "ß", "\ufb01", "\u01c5", "Σ",
    ]
)  # fmt: skip


def _by_pattern(value: str) -> bool:
    """The placeholder rule with the marker pattern run on every value."""
    stripped = value.strip().strip("\"'`")
    if not stripped or stripped.lower() in _PLACEHOLDER_WORDS:
        return True
    if len(set(stripped.lower())) <= 2:
        return True
    return _PLACEHOLDER_MARKERS.search(stripped) is not None


@settings(max_examples=2000, deadline=None)
@given(value=st.lists(_PIECES, max_size=8).map("".join))
def test_a_value_skipped_by_the_marker_hints_is_one_the_pattern_finds_nothing_in(
    value: str,
) -> None:
    """The hints that spare the marker pattern answer as the pattern does, in any case."""
    assert _by_pattern(value) == is_placeholder(value)
