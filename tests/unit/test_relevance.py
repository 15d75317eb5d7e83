"""The relevance curves (engram.retrieval.relevance): bounds, order and the calibration's
shape."""

from __future__ import annotations

import math

import pytest

from engram.retrieval.relevance import SIMILARITY_ONLY, WITH_WORDS, Calibration

CURVES = [WITH_WORDS, SIMILARITY_ONLY]


@pytest.mark.parametrize("curve", CURVES)
def test_relevance_stays_in_0_1_and_falls_with_the_value_within_a_search(
    curve: Calibration,
) -> None:
    """For one search (one best value), a lower value never gets a higher relevance, and
    every value the ranking can produce (similarity 0-1 plus up to 0.3) maps into [0, 1]."""
    for best in (0.2, 0.5, 0.8, 1.3):
        values = [best - step / 50 for step in range(60)]
        found = [curve(value, best) for value in values]
        assert all(0.0 <= r <= 1.0 for r in found)
        assert found == sorted(found, reverse=True)
        assert found[0] > found[-1]


@pytest.mark.parametrize("curve", CURVES)
def test_a_clear_leader_is_more_relevant_than_one_among_equals(curve: Calibration) -> None:
    """The same value counts for more when it is the best of its search than when a better
    candidate stands before it; a search whose best is stronger has a more relevant top."""
    assert curve(0.6, 0.6) > curve(0.6, 0.7)
    assert curve(0.8, 0.8) > curve(0.5, 0.5)
    assert curve.slope > 0
    assert curve.gap_slope > 0


def test_extreme_inputs_saturate_instead_of_overflowing() -> None:
    """Values far outside what a search produces give 0 or 1, not an overflow error."""
    curve = Calibration(slope=1000.0, gap_slope=0.0, intercept=0.0)
    assert 1.0 == curve(10.0, 10.0)
    assert 0.0 == curve(-10.0, -10.0)
    assert math.isclose(0.5, Calibration(1.0, 1.0, 0.0)(0.0, 0.0))
