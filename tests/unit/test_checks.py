"""The Gate's Layer 1 checks (engram.memory.gate.checks)."""

from __future__ import annotations

from engram.memory.gate import pii
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.checks import Layer1Input, run_layer1
from engram.memory.gate.rate_limit import RateLimiter
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateAction,
    GateDecisionType,
    MemoryRecord,
    MemoryType,
    TrustLevel,
)

EXTERNAL = GateDecisionType.EXTERNAL


STANDARD = caller_for_tier("a", TrustLevel.STANDARD)


def belief(text: str, **fields: object) -> MemoryRecord:
    """Return a draft belief from agent a with the given content and fields."""
    return MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="a", **fields)  # type: ignore[arg-type]


class Clock:
    """A hand-driven monotonic clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _layer1(record: MemoryRecord, **fields: object) -> object:
    data: dict[str, object] = {
        "action": GateAction.CREATE,
        "record": record,
        "caller": STANDARD,
        "decision_type": EXTERNAL,
        "expected_version": None,
        "head": None,
    }
    data.update(fields)
    return run_layer1(Layer1Input(**data), RateLimiter(Clock()))  # type: ignore[arg-type]


def test_layer1_quarantine_changes_level_and_records_kinds_only() -> None:
    """A PII hit returns a sensitive copy of the record that names kinds, not values."""
    outcome = _layer1(belief("Reach the owner at lena.fischer@example-mail.de about it."))
    assert outcome.passed  # type: ignore[attr-defined]
    assert AccessLevel.SENSITIVE == outcome.record.access_level  # type: ignore[attr-defined]
    expected = {"kinds": ["email"], "detector": pii.DETECTOR_VERSION}
    assert expected == outcome.record.metadata["pii"]  # type: ignore[attr-defined]


def test_layer1_internal_origins_skip_access_and_rate() -> None:
    """Internal origins report access and rate limiting as not applied."""
    outcome = _layer1(
        belief("Summaries are rebuilt nightly."),
        caller=CallerIdentity("ro", TrustLevel.READ_ONLY),
        decision_type=GateDecisionType.CONSOLIDATION,
    )
    details = {c.name: c.detail for c in outcome.checks}  # type: ignore[attr-defined]
    assert "not applied to internal origins" == details["access"] == details["rate_limit"]
