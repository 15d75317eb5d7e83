"""The relevance curves (engram.retrieval.relevance): bounds, order and the calibration's
shape."""

from __future__ import annotations

import math
import random

import pytest

from benchmarks.relevance_calibration import fit
from engram.retrieval.relevance import SIMILARITY_ONLY, WITH_WORDS, Calibration, beside_best

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


def test_beside_best_measures_every_value_against_the_largest() -> None:
    """Each value is mapped beside the best of its search; an empty search maps nothing."""
    curve = Calibration(slope=5.0, gap_slope=10.0, intercept=-3.0)
    found = beside_best({"a": 0.8, "b": 0.5, "c": 0.7}, curve)
    assert found == {"a": curve(0.8, 0.8), "b": curve(0.5, 0.8), "c": curve(0.7, 0.8)}
    assert {} == beside_best({}, curve)


def test_the_calibration_fit_recovers_a_known_curve() -> None:
    """Labels drawn from a known curve give back its parameters (the benchmark's fit)."""
    truth = Calibration(slope=6.0, gap_slope=9.0, intercept=-4.0)
    rng = random.Random(7)  # noqa: S311 - synthetic labels, not secrets
    rows = []
    for _ in range(20_000):
        best = rng.uniform(0.3, 1.2)
        value = best - rng.uniform(0.0, 0.4)
        rows.append((value, best, float(rng.random() < truth(value, best))))
    found = fit(rows)
    assert abs(found.slope - truth.slope) < 1.0, found
    assert abs(found.gap_slope - truth.gap_slope) < 1.5, found
    assert abs(found.intercept - truth.intercept) < 0.7, found
