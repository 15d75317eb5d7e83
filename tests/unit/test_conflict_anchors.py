"""The moments a statement names and whether it reports a reading taken then (the features
``old_anchored``, ``new_anchored``, ``anchors_differ`` and ``old_observation``)."""

from __future__ import annotations

import time

import pytest

from engram.memory.conflict.anchors import anchors, observation
from engram.memory.conflict.features import FEATURES, pair_features
from engram.memory.types import MemoryRecord, MemoryType


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Cert expiry report, 1 Feb run: 17 certificates expire.", {"1 feb"}),
        ("Viewing arranged for March 10 at 17:30.", {"march 10", "clock:1050.0"}),
        ("The deploy was yesterday; tonight we roll back.", {"yesterday", "tonight"}),
        ("Spring mock results averaged 62%.", {"spring"}),
        ("Released on 3 April 2024.", {"3 april", "date:738979.0"}),
        ("The store closes early.", set()),
        # a month's name only when capitalised: "may" is a verb here
        ("We may 2x the pool.", set()),
    ],
)
def test_the_moments_a_statement_names(text: str, expected: set[str]) -> None:
    """Words of time as written, days and months (capitalised), times of day and dates."""
    assert frozenset(expected) == anchors(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Cert expiry report, 1 Feb run: 17 certificates expire within 30 days.", True),
        ("Supplier audit on 14 Feb found 4 minor nonconformities.", True),
        ("The supplier audit found 4 minor nonconformities.", False),  # no moment named
        ("Store 42 closes at 21:00 Monday to Saturday.", False),  # a standing state
    ],
)
def test_an_observation_is_a_reading_at_a_moment_it_names(text: str, expected: bool) -> None:
    """A reading or a result, and a moment named: both are needed."""
    assert expected is observation(text)


def _record(content: str) -> MemoryRecord:
    return MemoryRecord.draft(type=MemoryType.EPISODE, content=content, source_agent="t")


def test_the_pair_features_carry_both_sides_anchors() -> None:
    """Two readings at two moments: both anchored, differently, the older an observation."""
    old = _record("Cert expiry report, 1 Feb run: 17 certificates expire within 30 days.")
    new = _record("Cert expiry report, 1 Mar run: only 3 certificates expire within 30 days.")
    values = dict(zip(FEATURES, pair_features(old, new, 0.8), strict=True))
    assert (1.0, 1.0, 1.0, 1.0) == (
        values["old_anchored"],
        values["new_anchored"],
        values["anchors_differ"],
        values["old_observation"],
    )
    same = dict(zip(FEATURES, pair_features(old, old, 1.0), strict=True))
    assert 0.0 == same["anchors_differ"]


def _cpu_seconds(text: str) -> float:
    """The least CPU time of five cold reads of one text's moments."""
    best = float("inf")
    for _ in range(5):
        anchors.cache_clear()
        observation.cache_clear()
        started = time.thread_time()  # CPU time: a loaded machine's waits are not the reader's
        observation(text)
        best = min(best, time.thread_time() - started)
    return best


def test_a_long_text_is_read_in_linear_time() -> None:
    """A record may hold 16,000 characters of anything: reading its moments grows with its length.

    A fixed bound in seconds failed on a slow CI machine (0.73 s of CPU for a text read here in
    0.08 s), so the test compares one text with itself four times over: a linear reader takes
    about four times as long, a quadratic one sixteen times.
    """
    for text in ("1 " * 8000, "Jan " * 4000, "x" * 16000, "report " * 2300):
        once, four_times = _cpu_seconds(text), _cpu_seconds(text * 4)
        assert four_times < 8 * max(once, 0.001), (text[:8], once, four_times)
        assert four_times < 10.0
