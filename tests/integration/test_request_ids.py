"""Request ids used again (engram.memory.gate.replay): a replay tells no more than a read
would, a used id is not an answer to another request, and a rate-limit refusal leaves the id
free for the retry. Real kernel, real database."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

from engram import Kernel
from engram.memory.gate.requests import GateRequest, WriteOutcome
from engram.memory.types import AccessLevel, GateDecision
from engram.protocols.views import result_view
from tests.integration.gate_helpers import BOSS, EXTERNAL, STANDARD, WRITER, belief, create, update

TEXT = "The ledger service runs on PostgreSQL 16 in eu-west-1."


async def _audit_rows(kernel: Kernel) -> int:
    return int(await kernel.db.fetchval("SELECT count(*) FROM librarian_audit"))


async def test_a_replay_does_not_show_a_record_hidden_from_the_caller_since(
    kernel: Kernel,
) -> None:
    """A standard agent's record raised to sensitive by a trusted one: the agent's retry
    of its CREATE is answered as recorded, but without the record, which it may no longer
    read, and nothing in the answer names the hidden version."""
    made = await kernel.gate.evaluate(create(belief(TEXT), WRITER, request_id="k1"))
    assert made.record_id is not None
    raised = await kernel.gate.evaluate(
        update(
            made.record_id,
            TEXT + " Owner: ledger team.",
            1,
            BOSS,
            access_level=AccessLevel.SENSITIVE,
        )
    )
    assert raised.modified_record is not None
    again = await kernel.gate.evaluate(create(belief(TEXT), WRITER, request_id="k1"))
    assert (again.decision, again.outcome, again.replayed) == (
        GateDecision.APPROVED,
        WriteOutcome.CREATED,
        True,
    )
    assert (again.record_id, again.modified_record) == (made.record_id, None)
    assert str(raised.modified_record.id) not in json.dumps(result_view(again), default=str)


async def test_a_replay_points_past_versions_the_caller_may_not_read(kernel: Kernel) -> None:
    """The record went sensitive and back: the replayed first version's superseded_by names
    the readable third version, not the sensitive second."""
    made = await kernel.gate.evaluate(create(belief(TEXT), WRITER, request_id="k2"))
    assert made.record_id is not None
    hidden = await kernel.gate.evaluate(
        update(
            made.record_id, TEXT + " Owner: ledger.", 1, BOSS, access_level=AccessLevel.SENSITIVE
        )
    )
    back = await kernel.gate.evaluate(
        update(made.record_id, TEXT + " Owner: payments.", 2, BOSS, access_level=AccessLevel.AGENT)
    )
    assert hidden.modified_record is not None
    assert back.modified_record is not None
    again = await kernel.gate.evaluate(create(belief(TEXT), WRITER, request_id="k2"))
    assert again.replayed
    assert again.modified_record is not None
    assert back.modified_record.id == again.modified_record.superseded_by
    assert str(hidden.modified_record.id) not in json.dumps(result_view(again), default=str)


async def test_a_used_request_id_is_not_the_answer_to_another_request(kernel: Kernel) -> None:
    """The id of a CREATE sent with a FORGET of another record, or with an UPDATE of it:
    each is refused with the reason and audited, and the other record is untouched."""
    await kernel.gate.evaluate(create(belief(TEXT), WRITER, request_id="k3"))
    other = await kernel.gate.evaluate(
        create(belief("The billing service runs on MySQL 8 in us-east-1."), WRITER)
    )
    assert other.modified_record is not None
    assert other.record_id is not None
    before = await _audit_rows(kernel)
    forget = GateRequest.forget(other.modified_record, WRITER, EXTERNAL, request_id="k3")
    changed = update(other.record_id, "The billing service runs on MySQL 9.", 1, WRITER)
    for request in (forget, replace(changed, request_id="k3")):
        refused = await kernel.gate.evaluate(request)
        assert (refused.decision, refused.replayed) == (GateDecision.REJECTED, False)
        assert "request id 'k3' was used for a CREATE" in refused.reason
    assert before + 2 == await _audit_rows(kernel)
    head = await kernel.temporal.current(other.record_id)
    assert head is not None
    assert (head.version, head.status.value) == (1, "active")
    # the same id on another record of the same action: refused too
    moving = update(other.record_id, "The billing service runs on MySQL 8.4.", 1, WRITER)
    first = await kernel.gate.evaluate(replace(moving, request_id="k4"))
    assert first.approved, first.reason
    mine = await kernel.gate.evaluate(create(belief("The wiki runs on Confluence."), WRITER))
    assert mine.record_id is not None
    elsewhere = await kernel.gate.evaluate(
        replace(update(mine.record_id, "The wiki runs on Notion.", 1, WRITER), request_id="k4")
    )
    assert elsewhere.decision is GateDecision.REJECTED
    assert "another record" in elsewhere.reason


async def test_a_rate_limited_request_is_evaluated_again_under_the_same_id(
    kernel: Kernel,
) -> None:
    """Refused by the rate limit, a retry under the same request id after the wait is
    written (before, the refusal was replayed for ever)."""
    busy = replace(STANDARD, agent_id="agent-busy", writes_per_minute=120)
    for n in range(200):
        record = belief(f"Shard {n} of the ledger runs on host db-{n}.", source_agent="agent-busy")
        first = await kernel.gate.evaluate(create(record, busy, request_id=f"r{n}"))
        if first.decision is GateDecision.REJECTED:
            break
    assert first.decision is GateDecision.REJECTED
    assert first.retry_after_seconds is not None
    await asyncio.sleep(first.retry_after_seconds + 0.1)
    retry = await kernel.gate.evaluate(create(record, busy, request_id=f"r{n}"))
    assert (retry.decision, retry.outcome, retry.replayed) == (
        GateDecision.APPROVED,
        WriteOutcome.CREATED,
        False,
    )
    # and now the id is taken: a third try replays the write
    third = await kernel.gate.evaluate(create(record, busy, request_id=f"r{n}"))
    assert (third.replayed, third.record_id) == (True, retry.record_id)
    kept = await kernel.db.fetchval(
        "SELECT count(*) FROM librarian_audit WHERE agent_id = 'agent-busy' AND request_id LIKE $1",
        f"r{n}#rate-limited:%",
    )
    assert 1 == kept


async def test_a_key_raced_by_two_different_requests_does_one_and_refuses_the_other(
    kernel: Kernel,
) -> None:
    """A CREATE and a FORGET of another record sent at once under one key, five rounds:
    whichever is recorded first is carried out and the other is refused, so the FORGET is
    never answered with the CREATE's result, nor the record forgotten after a refusal."""
    for round_ in range(5):
        target = await kernel.gate.evaluate(
            create(belief(f"Service {round_} listens on port 90{round_}."), WRITER)
        )
        assert target.modified_record is not None
        key = f"race-{round_}"
        made, gone = await asyncio.gather(
            kernel.gate.evaluate(create(belief(f"{TEXT} Round {round_}."), WRITER, request_id=key)),
            kernel.gate.evaluate(
                GateRequest.forget(target.modified_record, WRITER, EXTERNAL, request_id=key)
            ),
        )
        outcomes = {made.outcome, gone.outcome}
        assert len([r for r in (made, gone) if r.approved]) == 1, (made.reason, gone.reason)
        if gone.approved:
            assert gone.outcome is WriteOutcome.FORGOTTEN
            assert made.decision is GateDecision.REJECTED
        else:
            assert outcomes == {WriteOutcome.CREATED, WriteOutcome.NONE}
            assert gone.decision is GateDecision.REJECTED
            head = await kernel.temporal.current(target.modified_record.record_id)
            assert head is not None
            assert head.status.value == "active"
    assert (await kernel.audit.verify()).ok
