"""Who may write what (engram.memory.gate.access): the tier matrix and narrowing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engram.memory.gate.access import caller_for_tier, write_denial
from engram.memory.types import (
    AccessLevel,
    MemoryRecord,
    MemoryType,
    TrustLevel,
)


def belief(text: str, **fields: object) -> MemoryRecord:
    """Return a draft belief from agent a with the given content and fields."""
    return MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="a", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("trust", "memory_type", "level", "allowed"),
    [
        (TrustLevel.TRUSTED, MemoryType.DECISION, AccessLevel.SENSITIVE, True),
        (TrustLevel.STANDARD, MemoryType.DECISION, AccessLevel.USER, True),
        (TrustLevel.STANDARD, MemoryType.BELIEF, AccessLevel.SYSTEM, False),
        (TrustLevel.RESTRICTED, MemoryType.EPISODE, AccessLevel.AGENT, True),
        (TrustLevel.RESTRICTED, MemoryType.EPISODE, AccessLevel.USER, False),
        (TrustLevel.RESTRICTED, MemoryType.SKILL, AccessLevel.PUBLIC, False),
        (TrustLevel.READ_ONLY, MemoryType.BELIEF, AccessLevel.PUBLIC, False),
    ],
)
def test_access_matrix(
    trust: TrustLevel, memory_type: MemoryType, level: AccessLevel, allowed: bool
) -> None:
    """Each tier writes exactly the types and levels of the matrix in ADR-008."""
    caller = caller_for_tier("c", trust)
    record = MemoryRecord.draft(memory_type, "x", source_agent="c", access_level=level)
    assert allowed == (write_denial(caller, record) is None)


def test_narrowing_never_widens_a_tier() -> None:
    """A restricted caller claiming sensitive clearance still writes only up to agent."""
    caller = replace(
        caller_for_tier("c", TrustLevel.RESTRICTED), max_write_level=AccessLevel.SENSITIVE
    )
    record = belief("x is y.", access_level=AccessLevel.USER)
    assert "up to access level agent" in (write_denial(caller, record) or "")
