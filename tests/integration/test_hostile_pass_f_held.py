"""Hostile pass F, the open questions and the regressions: a readable chain that showed a
hidden version (settled by the reader's numbering, ADR-009 amended 2026-11-27), a validity
ended by a claim raised later (undone since ADR-010's amendment of 2026-11-28), and search answers
that must not move when hidden records are added. Real embedded PostgreSQL and the real
embedding model, no mocks.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from engram import Kernel
from engram.memory.types import AccessLevel
from engram.retrieval.search import Retrieval, SearchTuning
from tests.integration.consolidation_helpers import head_of
from tests.integration.gate_helpers import BOSS, INTERN, WRITER, belief, create, update
from tests.integration.test_gate_access_isolation import _approved
from tests.integration.test_layer2_hostile import APRIL, MARCH, V20, V21

# --- design questions -----------------------------------------


async def test_a_readable_chain_does_not_show_that_a_hidden_version_existed(
    kernel: Kernel,
) -> None:
    """A record is agent-level, then sensitive for one version, then agent-level again. The
    restricted reader's chain leaves the sensitive version out, numbers the others 1 and 2
    (not 1 and 3), and the first version is known until the next one it may read was
    written, not until the hidden version was."""
    created = await _approved(kernel, create(belief(V20, source_agent=BOSS.agent_id), BOSS))
    assert created.record_id is not None
    await _approved(
        kernel,
        update(
            created.record_id,
            "The incident bridge for the payments outage is room Orion on floor nine.",
            1,
            BOSS,
            access_level=AccessLevel.SENSITIVE,
        ),
    )
    await asyncio.sleep(0.01)
    await _approved(kernel, update(created.record_id, V21, 2, BOSS, access_level=AccessLevel.AGENT))
    chain = await kernel.temporal.get_version_chain(created.record_id, caller=INTERN)
    assert [1, 2] == [v.version for v in chain]
    assert chain[0].ingestion_time_end == chain[1].ingestion_time


async def test_a_validity_ended_by_a_claim_raised_later_is_not_shown_ended(
    kernel: Kernel,
) -> None:
    """v2.1 supersedes v2.0 (both agent-level, one writer): v2.0's validity ends in April. The
    trusted agent then raises v2.1 to sensitive. The restricted reader read v2.0 as still
    ended in April, on the grounds of a claim it may no longer read; the resolution is now
    undone (ADR-010, amended 2026-11-28) and v2.0 reads as valid."""
    older = await _approved(kernel, create(belief(V20, event_time=MARCH), WRITER))
    assert older.record_id is not None
    await kernel.events.settled()
    newer = await _approved(kernel, create(belief(V21, event_time=APRIL), WRITER))
    assert newer.record_id is not None
    await kernel.events.settled()
    ended = await kernel.temporal.current(older.record_id, caller=INTERN, count_read=False)
    assert ended is not None
    assert ended.event_time_end is not None, "the supersession did not happen"
    await _approved(
        kernel,
        update(newer.record_id, V21, 1, BOSS, access_level=AccessLevel.SENSITIVE, event_time=APRIL),
    )
    await kernel.events.settled()
    now = await kernel.temporal.current(older.record_id, caller=INTERN, count_read=False)
    assert now is not None
    assert now.event_time_end is None


# --- search: hidden records change nothing a restricted caller gets (regression) -----------

_READABLE = [
    "The checkout service on pay-gw-03 retries a failed card payment three times.",
    "Card payments in checkout time out after eight seconds at the payment provider.",
    "The checkout team owns the payment retry policy and reviews it every quarter.",
    "Refunds are issued by the billing service, not by checkout.",
]
_HIDDEN = [
    "Checkout on pay-gw-03 retries a failed card payment three times, per the Orion review.",
    "After the third failed card payment retry, checkout cancels the order and emails Orion.",
    "Payment retries on pay-gw-03 are capped at three by the fraud team.",
]
_QUERY = "How many times does checkout on pay-gw-03 retry a failed card payment?"


def _answer(found: Any) -> list[tuple[str, Any, Any, dict[str, int]]]:
    hits = [(str(h.record.id), h.similarity, h.relevance, dict(h.ranks)) for h in found.hits]
    return [*hits, ("legs", None, None, dict(found.legs))]


async def test_search_answers_do_not_move_when_hidden_records_are_added(kernel: Kernel) -> None:
    """Current, history (include_superseded), as-of-ingestion and as-of-event searches, with
    and without a floor, by the vector leg alone and with the text leg beside it: the
    restricted caller's hits, similarities, relevances, ranks and leg counts are the same
    before and after the trusted agent adds sensitive records nearer to the query (each with
    a second version) than anything it may read."""
    for n, text in enumerate(_READABLE):
        made = await _approved(kernel, create(belief(text, source_agent=BOSS.agent_id), BOSS))
        assert made.record_id is not None
        if n == 0:  # a history to search
            await _approved(kernel, update(made.record_id, text + " Confirmed.", 1, BOSS))
    await kernel.events.settled()
    modes: dict[str, dict[str, Any]] = {
        "current": {},
        "floor": {"min_score": 0.5},
        "superseded": {"include_superseded": True},
        "as_of": {"as_of_ingestion": datetime.now(UTC)},
        "as_of_event": {"as_of_event": datetime.now(UTC)},
        "narrow": {"limit": 1},
    }

    both_legs = Retrieval(
        kernel.db, kernel.embeddings, kernel.temporal, tuning=SearchTuning(text_leg=True)
    )

    async def answers() -> dict[str, Any]:
        out = {}
        for name, kwargs in modes.items():
            for retrieval in (kernel.retrieval, both_legs):
                found = await retrieval.search(INTERN, _QUERY, **{"min_score": 0.0, **kwargs})
                out[f"{name}/{retrieval is both_legs}"] = _answer(found)
        assert out["current/True"][-1][-1].get("text"), "no text leg ran"
        return out

    before = await answers()
    for text in _HIDDEN:
        made = await _approved(
            kernel,
            create(
                belief(text, source_agent=BOSS.agent_id, access_level=AccessLevel.SENSITIVE),
                BOSS,
            ),
        )
        assert "created" == made.outcome.value, made.reason
        assert made.record_id is not None
        head = await head_of(kernel, made.record_id)
        await _approved(
            kernel,
            update(
                made.record_id, text + " Still true.", head.version, BOSS, access_level="sensitive"
            ),
        )
    await kernel.events.settled()
    trusted = await kernel.retrieval.search(BOSS, _QUERY, min_score=0.0)
    assert any(h.record.access_level is AccessLevel.SENSITIVE for h in trusted.hits[:3])
    assert before == await answers()
