"""Each access level's deadline within a consolidation pass (ADR-019)."""

from __future__ import annotations

import itertools

import pytest

from engram.memory.consolidation.engine import LEVEL_RESERVE, level_deadline
from engram.memory.types import AccessLevel


def test_each_more_closed_level_keeps_a_share_and_the_most_closed_ends_with_the_pass() -> None:
    """Deadlines rise with the level's rank by ``LEVEL_RESERVE`` of the pass each, from 80 %
    of it for the most open level to the pass's own end for the most closed."""
    deadlines = [level_deadline(100.0, 1800.0, level) for level in AccessLevel]
    assert pytest.approx(100.0 + 1800.0) == deadlines[-1]
    assert pytest.approx(100.0 + 0.8 * 1800.0) == deadlines[0]
    gaps = [round(b - a, 9) for a, b in itertools.pairwise(deadlines)]
    assert [round(LEVEL_RESERVE * 1800.0, 9)] * (len(AccessLevel) - 1) == gaps
