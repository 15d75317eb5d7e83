"""One training run, shared by `engram advisor train` and the scheduled jobs: read the
decisions of a window from the database, train a policy by GRPO off the event loop, and
store it as the next candidate (ADR-020). Nothing is promoted here."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta

from engram.infra.db import DatabaseAdapter
from engram.memory.rl.decisions import training_data
from engram.memory.rl.grpo import GRPOConfig
from engram.memory.rl.models import ModelRow, ModelStore
from engram.memory.rl.training import train_policy
from engram.memory.rl.windows import HORIZON, MIN_DECISIONS, WINDOW


@dataclass(frozen=True, slots=True)
class TrainingRun:
    """What a run did: the candidate it stored, or why it stored none."""

    model: ModelRow | None
    decisions: int
    skipped: int
    reason: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "model": None if self.model is None else self.model.to_json(),
            "decisions": self.decisions,
            "skipped_decisions": self.skipped,
            "reason": self.reason,
        }


async def train_candidate(
    db: DatabaseAdapter,
    *,
    until: datetime,
    window: timedelta = WINDOW,
    horizon: timedelta = HORIZON,
    min_decisions: int = MIN_DECISIONS,
    config: GRPOConfig | None = None,
) -> TrainingRun:
    """Train on the decisions of [``until - window``, ``until``), each with the feedback of
    ``horizon`` after it, and store a candidate. Scheduled and manual runs pass ``until = now -
    horizon``: a decision whose horizon has not passed yet has an outcome still to come, and
    would teach that new records earn nothing."""
    data = await training_data(db, since=until - window, until=until, horizon=horizon)
    n = len(data.examples)
    if n < min_decisions:
        return TrainingRun(None, n, data.skipped, f"{n} decisions; at least {min_decisions}")
    result = await asyncio.to_thread(
        train_policy, data.examples, version="rl@candidate", config=config
    )
    model = await ModelStore(db).save(result, data_from=data.data_from, data_until=data.data_until)
    return TrainingRun(model, n, data.skipped)
