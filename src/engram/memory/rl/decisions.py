"""The advisor's training data, read from the database and nothing else (ADR-020).

Each outside CREATE that Layer 2 approved recorded the state it saw in its audit row
(:mod:`engram.memory.rl.features`); the outcome of an ADD or a merge (UPDATE) is read from
``memory_feedback`` within ``horizon`` after the decision: the ratings of the version it
stored (a record an ADD created and a later merge changed has one version per decision), with,
for an ADD, the ratings its nearest record got in that time
(:class:`~engram.memory.rl.reward.Outcome`), and whether the access rules let it merge. The action
taken is whatever advisor decided (heuristic or a policy); the reference action is the
heuristic's answer recorded in the state, so decisions of a learned advisor train the next
one as well.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from engram.infra.db import DatabaseAdapter
from engram.memory.rl.features import FEATURE_NAMES, features_from_json
from engram.memory.rl.models import SQL
from engram.memory.rl.reward import Outcome, TrainingExample
from engram.memory.rl.windows import HORIZON

#: Ratings of the admitted record and of the nearest one by the same agent this close in time
#: count as one answer found twice (a search returning both).
SAME_ANSWER = timedelta(seconds=2)
#: Most decisions read for one training run.
MAX_DECISIONS = 200_000
_HEURISTIC_NOOP = FEATURE_NAMES.index("heuristic_noop")


@dataclass(frozen=True, slots=True)
class TrainingData:
    """Examples, the range of decisions they came from, and what could not be used."""

    examples: tuple[TrainingExample, ...]
    data_from: datetime | None
    data_until: datetime | None
    skipped: int  # decisions recorded under another feature schema or without a state


@dataclass(frozen=True, slots=True)
class _Logged:
    """One decision as its audit row recorded it."""

    state: tuple[float, ...]
    action: str
    record_id: UUID | None
    version_id: UUID | None
    nearest: UUID | None
    at: datetime
    merge_allowed: bool


def _nearest(features: Mapping[str, Any]) -> UUID | None:
    value = features.get("nearest")
    try:
        return None if value is None else UUID(str(value))
    except ValueError:
        return None


async def training_data(
    db: DatabaseAdapter,
    *,
    since: datetime,
    until: datetime,
    horizon: timedelta = HORIZON,
    limit: int = MAX_DECISIONS,
) -> TrainingData:
    """The examples of decisions made in [``since``, ``until``)."""
    rows = list(reversed(await db.fetch(SQL["decisions"], since, until, limit)))
    parsed: list[_Logged] = []
    skipped = 0
    for row in rows:
        advice = row["advice"] or {}
        features = advice.get("features")
        if not isinstance(features, Mapping):
            skipped += 1
            continue
        state = features_from_json(features)
        if state is None:
            skipped += 1
            continue
        action = str(advice.get("action"))
        action = action if action in ("NOOP", "UPDATE") else "ADD"
        # a merged record is its own nearest: nothing of it is redundant with itself
        nearest = None if action == "UPDATE" else _nearest(features)
        parsed.append(
            _Logged(
                state,
                action,
                row["record_id"],
                row["version_id"],
                nearest,
                row["occurred_at"],
                features.get("merge_allowed") is True,
            )
        )
    stored = [(i, d) for i, d in enumerate(parsed) if d.action != "NOOP" and d.version_id]
    outcomes: dict[int, Outcome] = {}
    if stored:
        found = await db.fetch(
            SQL["outcomes"],
            [d.record_id for _i, d in stored],
            [d.nearest for _i, d in stored],
            [d.at for _i, d in stored],
            [d.version_id for _i, d in stored],
            horizon,
            SAME_ANSWER,
        )
        outcomes = {
            stored[int(r["n"]) - 1][0]: Outcome(
                int(r["useful"]),
                int(r["redundant"]),
                int(r["not_useful"]),
                int(r["nearest_stale"]),
                int(r["nearest_lost"]),
            )
            for r in found
        }
    examples = tuple(
        TrainingExample(
            d.state,
            d.action,
            "NOOP" if d.state[_HEURISTIC_NOOP] >= 1.0 else "ADD",
            outcomes.get(i, Outcome()),
            merge_allowed=d.merge_allowed,
        )
        for i, d in enumerate(parsed)
    )
    times = [d.at for d in parsed]
    return TrainingData(examples, min(times, default=None), max(times, default=None), skipped)
