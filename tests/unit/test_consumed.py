"""When a resolution step may go to the summary of a record a batch consumed
(engram.memory.gate.consumed.summary_denial)."""

from __future__ import annotations

from uuid import uuid4

from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.consumed import summary_denial
from engram.memory.store import Summary
from engram.memory.types import (
    AccessLevel,
    CallerIdentity,
    GateDecisionType,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    TrustLevel,
)

TRUSTED = caller_for_tier("boss", TrustLevel.TRUSTED)
STANDARD = caller_for_tier("worker", TrustLevel.STANDARD)
EXTERNAL = GateDecisionType.EXTERNAL


def belief(text: str, level: AccessLevel = AccessLevel.AGENT) -> MemoryRecord:
    """A belief at ``level``."""
    return MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="boss", access_level=level)


def summary(sources: int, level: AccessLevel = AccessLevel.AGENT) -> Summary:
    """A live summary made from ``sources`` records."""
    return Summary(belief("The API uses JWT bearer tokens.", level), uuid4(), sources)


COOKIES = belief("The API uses session cookies.")


def deny(
    made: Summary,
    writer: CallerIdentity,
    origin: GateDecisionType = EXTERNAL,
    grounds: MemoryRecord = COOKIES,
) -> str | None:
    """``summary_denial`` of a step by ``writer`` on a summary standing as trusted."""
    return summary_denial(
        made, writer=writer, decision_type=origin, standing=TrustLevel.TRUSTED, grounds=grounds
    )


def test_a_summary_of_one_record_goes_to_a_writer_who_may_change_it() -> None:
    """A trusted writer may change a compression (which stands as trusted)."""
    denial = deny(summary(1), TRUSTED)
    assert denial is None


def test_a_summary_of_several_records_is_never_changed() -> None:
    """Even a trusted writer's step is escalated on a summary that states other records."""
    denial = deny(summary(3), TRUSTED)
    assert denial is not None
    assert "2 other record(s)" in denial


def test_a_lower_tier_may_not_change_what_consolidation_wrote() -> None:
    """A standard writer's step on a compression consolidation wrote is escalated."""
    denial = deny(summary(1), STANDARD)
    assert denial is not None
    assert "may not change a record a trusted agent wrote" in denial


def test_grounds_hidden_from_the_summarys_readers_change_nothing() -> None:
    """Neither an agent's nor an internal write changes a summary on hidden grounds."""
    hidden = belief("The API uses session cookies.", AccessLevel.SENSITIVE)
    for writer, origin in ((TRUSTED, EXTERNAL), (TRUSTED, GateDecisionType.SELF_HEALING)):
        denial = deny(summary(1), writer, origin=origin, grounds=hidden)
        assert denial is not None
        assert "hidden from readers" in denial


def test_an_internal_writer_may_change_a_summary_its_grounds_are_shown_to() -> None:
    """An internal origin's step goes to a compression whose readers see its grounds."""
    denial = deny(summary(1), STANDARD, origin=GateDecisionType.SELF_HEALING)
    assert denial is None


def test_a_summary_consolidated_in_turn_is_not_changed() -> None:
    """A summary that is itself consolidated is not restated out of its own summary."""
    consumed = summary(1)
    hidden = Summary(
        consumed.head.model_copy(update={"status": MemoryStatus.CONSOLIDATED}),
        consumed.made_id,
        1,
    )
    denial = deny(hidden, TRUSTED)
    assert denial == "the claim's summary was itself consolidated"
