"""The per-agent budget of ratings: a burst, then the rate, and a bounded memory."""

from __future__ import annotations

import pytest

from engram.errors import RateLimited
from engram.retrieval import budget
from engram.retrieval.budget import FEEDBACK_BURST, FEEDBACK_PER_MINUTE, FeedbackBudget


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate() -> None:
    """An agent may rate a burst at once, then one rating per refill interval."""
    clock = Clock()
    limits = FeedbackBudget(clock)
    for _ in range(int(FEEDBACK_BURST)):
        limits.take("a")
    with pytest.raises(RateLimited) as refused:
        limits.take("a")
    assert 0 < refused.value.retry_after_seconds <= 60 / FEEDBACK_PER_MINUTE + 1e-9
    limits.take("b")  # another agent's budget is its own
    clock.now += 60 / FEEDBACK_PER_MINUTE
    limits.take("a")


def test_memory_stays_bounded_by_agents_rating_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Buckets that have refilled are forgotten once many agents were seen."""
    monkeypatch.setattr(budget, "MAX_TRACKED", 50)
    clock = Clock()
    limits = FeedbackBudget(clock)
    for n in range(200):
        limits.take(f"agent-{n}")
        clock.now += 1.0  # each bucket refills within a second of its one rating
    assert len(limits._buckets) <= 51
