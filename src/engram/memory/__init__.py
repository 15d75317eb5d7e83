"""The memory subsystem: what may be remembered, and how it is kept.

Packages, lowest first (``.importlinter`` holds the order): ``types``, ``schemas`` and the pure
helpers; ``store`` (version rows) and ``conflict`` (detection); ``temporal`` (as-of reads,
decay); ``audit`` (the hash-chained log); ``gate`` (the Librarian Gate); ``admin`` (quarantine
desk, audit replay). The names below are the ones adapters and embedders need.
"""

from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.requests import GateRequest, GateResult, WriteOutcome
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    TrustLevel,
)

__all__ = [
    "AccessLevel",
    "CallerIdentity",
    "GateAction",
    "GateDecision",
    "GateDecisionType",
    "GateRequest",
    "GateResult",
    "MemoryRecord",
    "MemoryStatus",
    "MemoryType",
    "TrustLevel",
    "WriteOutcome",
    "caller_for_tier",
]
