"""How often one agent may rate what it retrieved (``Retrieval.feedback``).

Ratings are the learned advisor's reward signal and every useful one slows a record's decay,
so an agent that rates without limit could fill the table, start the advisor's training runs
(every 500 ratings) on its own and keep its favourite records from decaying.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from engram.errors import RateLimited

#: Ratings one agent may give per minute, and at once: more than an agent reading its hits
#: rates, few enough that no agent fills the table or starts the advisor's training runs
#: (every 500 ratings) on its own.
FEEDBACK_PER_MINUTE = 120.0
FEEDBACK_BURST = 60.0
#: Agents tracked before the refilled buckets are dropped.
MAX_TRACKED = 10_000
#: Seconds an emptied bucket takes to fill again.
_REFILL = FEEDBACK_BURST / FEEDBACK_PER_MINUTE * 60


class FeedbackBudget:
    """A token bucket of ratings per agent, in this process (:data:`FEEDBACK_PER_MINUTE`);
    :meth:`unlimited` for a kernel of its own whose only agent is simulated."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._limited = True
        self._buckets: dict[str, tuple[float, float]] = {}
        self._limit = MAX_TRACKED
        self._pruned = clock()

    @classmethod
    def unlimited(cls) -> FeedbackBudget:
        """A budget that never runs out, for a kernel whose only agent is simulated."""
        budget = cls()
        budget._limited = False
        return budget

    def take(self, agent_id: str) -> None:
        """Spend one rating of ``agent_id``'s budget, or raise :class:`RateLimited`."""
        if not self._limited:
            return
        now = self._clock()
        tokens, then = self._buckets.get(agent_id, (FEEDBACK_BURST, now))
        tokens = min(FEEDBACK_BURST, tokens + max(0.0, now - then) * FEEDBACK_PER_MINUTE / 60)
        if tokens < 1.0:
            self._buckets[agent_id] = (tokens, now)
            wait = (1.0 - tokens) * 60 / FEEDBACK_PER_MINUTE
            raise RateLimited("too many ratings; try again shortly", retry_after_seconds=wait)
        self._buckets[agent_id] = (tokens - 1.0, now)
        tracked = len(self._buckets)
        if tracked > self._limit or (tracked > MAX_TRACKED and now - self._pruned > _REFILL):
            self._forget_full(now)
            # many agents rating at once: look again when twice as many are tracked, or once
            # every bucket may have refilled since
            self._limit = max(MAX_TRACKED, 2 * len(self._buckets))
            self._pruned = now

    def _forget_full(self, now: float) -> None:
        """Drop the buckets that have refilled since (a new bucket starts full, so nothing
        changes for their agents); the dict stays bounded by the agents rating right now."""
        refill = FEEDBACK_PER_MINUTE / 60
        self._buckets = {
            agent: (tokens, then)
            for agent, (tokens, then) in self._buckets.items()
            if tokens + (now - then) * refill < FEEDBACK_BURST
        }
