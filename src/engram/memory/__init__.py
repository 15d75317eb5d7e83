"""The memory subsystem: what may be remembered, and how it is kept.

Packages, lowest first (``.importlinter`` holds the order): ``types``, ``schemas`` and the pure
helpers; ``store`` (version rows) and ``conflict`` (detection); ``temporal`` (as-of reads,
decay); ``audit`` (the hash-chained log); ``gate`` (the Librarian Gate); ``admin`` (quarantine
desk, audit replay). The names below are the ones adapters and embedders need; they are
imported on first use, so importing one subpackage does not import the Gate.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    "caller_for_tier": "engram.memory.gate.access",
    "GateRequest": "engram.memory.gate.requests",
    "GateResult": "engram.memory.gate.requests",
    "WriteOutcome": "engram.memory.gate.requests",
    **dict.fromkeys(
        (
            "AccessLevel",
            "CallerIdentity",
            "GateAction",
            "GateDecision",
            "GateDecisionType",
            "MemoryRecord",
            "MemoryStatus",
            "MemoryType",
            "TrustLevel",
        ),
        "engram.memory.types",
    ),
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'engram.memory' has no attribute {name!r}")
    return getattr(import_module(home), name)
