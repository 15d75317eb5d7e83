"""Reads of records over time: bi-temporal as-of queries, version chains, read counting and
decay (ADR-003, ADR-009). Retrieval may import this package and ``engram.memory.types`` only.
"""

from engram.memory.temporal.engine import DEFAULT_LIMIT, TemporalEngine, restate_decay
from engram.memory.types import readable_levels

__all__ = ["DEFAULT_LIMIT", "TemporalEngine", "readable_levels", "restate_decay"]
