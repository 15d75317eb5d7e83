"""Odd write input every adapter must refuse with a typed, audited rejection (issue 11).

Each :class:`OddInput` is a proposal that is fine but for one value PostgreSQL, UTF-8 or the
JSON the audit log stores cannot hold as sent: a NUL, a lone surrogate, a non-finite number, an
instant outside what UTC can express, or metadata nested hundreds of levels deep. The HTTP, MCP
and in-process tests send the same catalogue; hypothesis strategies below make more of them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

CONTENT = "The ledger service runs on PostgreSQL 16 in eu-west-1."
BASE: dict[str, Any] = {"type": "belief", "content": CONTENT}


def nested(depth: int, leaf: Any = "bottom") -> dict[str, Any]:
    """A metadata mapping ``depth`` objects deep."""
    value: Any = leaf
    for _ in range(depth - 1):
        value = {"level": value}
    result: dict[str, Any] = {"level": value}
    return result


@dataclass(frozen=True)
class _Text:
    text: str


def wire(value: Any) -> bytes:
    """The JSON text a client sends: ``NaN`` literals and ``\\ud800`` escapes included. It
    recurses on nothing, so nesting of any depth encodes."""
    out: list[str] = []
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        parts: list[Any] = []
        if isinstance(item, _Text):
            out.append(item.text)
        elif isinstance(item, dict):
            for key, member in item.items():
                parts += [_Text(","), _Text(json.dumps(key) + ":"), member]
            pending += [_Text("}"), *reversed(parts[1:]), _Text("{")]
        elif isinstance(item, list):
            for member in item:
                parts += [_Text(","), member]
            pending += [_Text("]"), *reversed(parts[1:]), _Text("[")]
        else:
            out.append(json.dumps(item, allow_nan=True))
    return "".join(out).encode("ascii")


@dataclass(frozen=True)
class OddInput:
    """One proposal with one odd value, and the field its rejection must name."""

    name: str
    changes: dict[str, Any]
    field: str

    @property
    def body(self) -> dict[str, Any]:
        """The whole proposal as a parsed JSON object."""
        return {**BASE, **self.changes}

    def wire(self, body: dict[str, Any] | None = None) -> bytes:
        """The JSON text a client sends (of the whole proposal unless ``body`` is given)."""
        return wire(self.body if body is None else body)


ODD_INPUTS = (
    OddInput("nul-in-metadata-value", {"metadata": {"note": "before\x00after"}}, "metadata"),
    OddInput("nul-in-metadata-key", {"metadata": {"no\x00te": "a note"}}, "metadata"),
    OddInput("nul-in-nested-metadata", {"metadata": {"tags": ["ok", "b\x00d"]}}, "metadata"),
    OddInput("nul-in-content", {"content": CONTENT[:-1] + "\x00."}, "content"),
    OddInput("nul-in-classification", {"classification": "internal\x00"}, "classification"),
    OddInput("event-time-past-9999", {"event_time": "9999-12-31T23:59:59-14:00"}, "event_time"),
    OddInput("event-time-before-0001", {"event_time": "0001-01-01T00:00:00+14:00"}, "event_time"),
    OddInput("nan-confidence", {"source_confidence": math.nan}, "source_confidence"),
    OddInput("infinite-confidence", {"source_confidence": math.inf}, "source_confidence"),
    OddInput("nan-in-metadata", {"metadata": {"weight": math.nan}}, "metadata"),
    OddInput("infinity-in-metadata", {"metadata": {"weight": -math.inf}}, "metadata"),
    OddInput("lone-surrogate-in-content", {"content": CONTENT[:-1] + "\ud800."}, "content"),
    OddInput("lone-surrogate-in-metadata-value", {"metadata": {"note": "\udfff"}}, "metadata"),
    OddInput("lone-surrogate-in-metadata-key", {"metadata": {"\ud83d": "x"}}, "metadata"),
    OddInput("lone-surrogate-in-namespace", {"namespace": "ops\udc00"}, "namespace"),
    # 500, not 900: a body nested near the JSON parser's limit (about 900 levels, less the
    # depth of the stack that reads it, so less under a tracer) is refused as a whole body
    OddInput("metadata-500-deep", {"metadata": nested(500)}, "metadata"),
)
ODD_IDS = [odd.name for odd in ODD_INPUTS]

#: Characters no stored text may hold: NUL, and the surrogate halves (never valid alone).
_BAD_CHARACTERS = st.sampled_from(["\x00"]) | st.characters(
    min_codepoint=0xD800, max_codepoint=0xDFFF
)
_BAD_TEXT = st.builds(
    lambda head, bad, tail: head + bad + tail,
    st.text(max_size=12),
    _BAD_CHARACTERS,
    st.text(max_size=12),
)
_NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
_OFFSET = st.integers(min_value=1, max_value=14 * 60).map(lambda m: f"{m // 60:02d}:{m % 60:02d}")


def _late(offset: str) -> str:
    return f"9999-12-31T23:59:59-{offset}"


def _early(offset: str) -> str:
    return f"0001-01-01T00:00:00+{offset}"


#: Instants that exist with their offset but not in UTC.
BEYOND_UTC = st.one_of(_OFFSET.map(_late), _OFFSET.map(_early))

#: One odd change to a proposal (merged over a valid belief).
ODD_CHANGES = st.one_of(
    st.builds(lambda t: {"content": CONTENT + t}, _BAD_TEXT),
    st.builds(lambda t: {"metadata": {"note": t}}, _BAD_TEXT),
    st.builds(lambda t: {"metadata": {t: "value"}}, _BAD_TEXT),
    st.builds(lambda t: {"metadata": {"tags": ["fine", t]}}, _BAD_TEXT),
    st.builds(lambda t: {"classification": t}, _BAD_TEXT),
    st.builds(lambda t: {"namespace": "ops" + t}, _BAD_TEXT),
    st.builds(lambda n: {"source_confidence": n}, _NON_FINITE),
    st.builds(lambda n: {"metadata": {"weight": n}}, _NON_FINITE),
    st.builds(lambda t: {"event_time": t}, BEYOND_UTC),
    st.builds(lambda d: {"metadata": nested(d)}, st.integers(min_value=64, max_value=900)),
)

#: Search queries no index can take: a NUL or a lone surrogate somewhere in the words.
ODD_QUERIES = st.builds(lambda t: "ledger " + t, _BAD_TEXT)
