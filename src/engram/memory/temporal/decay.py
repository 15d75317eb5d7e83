"""Relevance decay of fast-path records (CLS model): pure arithmetic, no I/O.

``relevance = base * exp(-λ_type * days since last access) * exp(-λ_type/10 * age in days)``,
bounded to ``[FLOOR, 1]``, where

* ``base`` starts at the record's importance (Layer 2) and grows with reinforcement, with
  diminishing returns: ``base = importance + (1 - importance) * (1 - exp(-r / 5))``, where
  ``r`` counts reads, at most ``DAILY_CAP`` of them per day;
* ``λ_type`` (per day) is smallest for procedural knowledge and largest for episodes;
* the age term keeps decaying however often a record is read: a caller hammering one record
  raises its base at most ``DAILY_CAP`` reads a day and cannot stop it ageing;
* ``FLOOR`` keeps every record findable; consolidation, not decay, removes things from the
  fast path.
"""

from __future__ import annotations

import math

from engram.memory.types import MemoryType

#: Decay rate per day since the last read; half-life = ln 2 / λ.
LAMBDA: dict[MemoryType, float] = {
    MemoryType.SKILL: 0.005,  # ~139 days
    MemoryType.DECISION: 0.01,  # ~69 days
    MemoryType.PREFERENCE: 0.01,
    MemoryType.ENTITY: 0.01,
    MemoryType.BELIEF: 0.02,  # ~35 days
    MemoryType.REFLECTION: 0.02,
    MemoryType.RESOURCE: 0.03,  # ~23 days
    MemoryType.EPISODE: 0.05,  # ~14 days
}
AGE_FRACTION = 0.1
DAILY_CAP = 5
REINFORCEMENT_SCALE = 5.0
FLOOR = 0.05


def reinforced_base(importance: float, reinforcements: float) -> float:
    """Importance raised by counted reads, approaching 1 with diminishing returns."""
    importance = min(1.0, max(0.0, importance))
    gain = 1.0 - math.exp(-max(0.0, reinforcements) / REINFORCEMENT_SCALE)
    return importance + (1.0 - importance) * gain


def relevance(
    memory_type: MemoryType,
    *,
    importance: float,
    reinforcements: float,
    days_since_access: float,
    age_days: float,
) -> float:
    """The decayed relevance of one record, in ``[FLOOR, 1]``."""
    rate = LAMBDA[memory_type]
    score = (
        reinforced_base(importance, reinforcements)
        * math.exp(-rate * max(0.0, days_since_access))
        * math.exp(-rate * AGE_FRACTION * max(0.0, age_days))
    )
    return min(1.0, max(FLOOR, score))
