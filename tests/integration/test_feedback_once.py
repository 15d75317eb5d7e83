"""A rating is stored once per request (engram.retrieval.feedback, migration 0017): retries
under one key, keys reused for another record, odd keys, concurrent retries, keys per agent,
and the same rules through MCP and REST."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any
from uuid import UUID

import pytest

from engram import Kernel
from engram.errors import NotFound, ValidationFailed
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.requests import GateRequest
from engram.memory.storable import MAX_REQUEST_ID
from engram.memory.types import GateDecisionType, TrustLevel
from engram.protocols.mcp.tools import EngramTools
from tests.integration import test_http_api as http_api
from tests.integration.retrieval_helpers import FACTS, READER, WRITER, seed
from tests.integration.test_http_api import Api, assert_problem

OTHER = caller_for_tier("other-reader", TrustLevel.STANDARD)
api = http_api.api


async def _ratings(kernel: Kernel, record_id: UUID | None = None) -> list[tuple[Any, ...]]:
    rows = await kernel.db.fetch(
        "SELECT record_id, agent_id, useful, signal, request_key FROM memory_feedback "
        "WHERE $1::uuid IS NULL OR record_id = $1 ORDER BY id",
        record_id,
    )
    return [tuple(r) for r in rows]


async def test_a_retry_under_one_key_stores_nothing_and_answers_with_the_first(
    kernel: Kernel,
) -> None:
    """The second call under the key (even with another verdict and signal: bodies are not
    compared) stores nothing, answers with the first rating, and counts no second read."""
    ids = await seed(kernel)
    record = ids[FACTS[1]]
    first = await kernel.retrieval.feedback(READER, record, useful=True, request_id="k-1")
    again = await kernel.retrieval.feedback(
        READER, record, useful=False, signal="ignored", request_id="k-1"
    )
    assert (first.replayed, again.replayed) == (False, True)
    assert replace(again, replayed=False) == first
    assert await _ratings(kernel) == [(record, "reader", True, "explicit", "k-1")]
    await kernel.temporal.flush_reads()
    assert 1 == await kernel.db.fetchval(
        "SELECT access_count[5] FROM memory_access WHERE record_id = $1", record
    )


async def test_without_a_key_every_call_is_its_own_rating(kernel: Kernel) -> None:
    """Two calls without a key are two ratings, each under a key the kernel drew."""
    ids = await seed(kernel)
    record = ids[FACTS[0]]
    for _ in range(2):
        receipt = await kernel.retrieval.feedback(READER, record, useful=True)
        assert not receipt.replayed
    keys = [row[4] for row in await _ratings(kernel)]
    assert len(keys) == 2
    assert len(set(keys)) == 2
    assert all(key.startswith("kernel:") for key in keys)


async def test_a_key_used_for_another_record_is_refused_and_stores_nothing(
    kernel: Kernel,
) -> None:
    """A key belongs to one rating: sent for another record, it is a typed rejection."""
    ids = await seed(kernel)
    await kernel.retrieval.feedback(READER, ids[FACTS[0]], useful=True, request_id="k-2")
    with pytest.raises(ValidationFailed, match="another record"):
        await kernel.retrieval.feedback(READER, ids[FACTS[1]], useful=True, request_id="k-2")
    assert await _ratings(kernel) == [(ids[FACTS[0]], "reader", True, "explicit", "k-2")]


async def test_keys_belong_to_their_agent(kernel: Kernel) -> None:
    """Another agent's rating under the same key is its own rating, of any record."""
    ids = await seed(kernel)
    await kernel.retrieval.feedback(READER, ids[FACTS[0]], useful=True, request_id="shared")
    theirs = await kernel.retrieval.feedback(
        OTHER, ids[FACTS[1]], useful=False, request_id="shared"
    )
    assert not theirs.replayed
    assert [row[1] for row in await _ratings(kernel)] == ["reader", "other-reader"]


async def test_a_retry_after_the_record_was_forgotten_is_not_found_and_stores_nothing(
    kernel: Kernel,
) -> None:
    """A replay reads the record again: forgotten since, it is unknown to the caller, as any
    rating of it would be; the first rating stays as it was."""
    ids = await seed(kernel)
    record = ids[FACTS[2]]
    await kernel.retrieval.feedback(READER, record, useful=True, request_id="k-3")
    head = await kernel.temporal.current(record)
    assert head is not None
    gone = await kernel.gate.evaluate(GateRequest.forget(head, WRITER, GateDecisionType.EXTERNAL))
    assert gone.approved, gone.reason
    with pytest.raises(NotFound):
        await kernel.retrieval.feedback(READER, record, useful=True, request_id="k-3")
    assert len(await _ratings(kernel)) == 1


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "1-320 characters"),
        ("x" * (MAX_REQUEST_ID + 1), "1-320 characters"),
        ("a\x00b", "NUL or a lone surrogate"),
        ("a\ud800b", "NUL or a lone surrogate"),
        (17, "a string"),
    ],
    ids=["empty", "too-long", "nul", "lone-surrogate", "not-a-string"],
)
async def test_an_odd_key_is_a_typed_rejection_and_stores_nothing(
    kernel: Kernel, key: Any, problem: str
) -> None:
    """An in-process caller may pass anything as the key; storage never sees a bad one."""
    ids = await seed(kernel)
    with pytest.raises(ValidationFailed, match=problem):
        await kernel.retrieval.feedback(READER, ids[FACTS[0]], useful=True, request_id=key)
    assert await _ratings(kernel) == []


async def test_concurrent_calls_under_one_key_store_one_rating(kernel: Kernel) -> None:
    """Eight calls under one key at once: one rating; every answer is that rating, and
    exactly one of them stored it."""
    ids = await seed(kernel)
    record = ids[FACTS[3]]
    answers = await asyncio.gather(
        *(
            kernel.retrieval.feedback(READER, record, useful=True, request_id="race")
            for _ in range(8)
        )
    )
    assert len(await _ratings(kernel)) == 1
    assert sorted(a.replayed for a in answers) == [False] + [True] * 7
    assert len({replace(a, replayed=False) for a in answers}) == 1


async def test_mcp_feedback_under_one_request_id_is_stored_once(kernel: Kernel) -> None:
    """The feedback tool's request_id: a retry is answered with the first rating, marked
    replayed; the id sent for another record is an error result; one rating in all."""
    tools = EngramTools(kernel)
    _, token = await kernel.agents.add("mcp-reader", TrustLevel.STANDARD)
    reader = await kernel.agents.authenticate(token)
    ids = await seed(kernel)
    arguments = {"record_id": str(ids[FACTS[0]]), "useful": True, "request_id": "m-1"}
    bodies = []
    for _ in range(2):
        result = await tools.call("feedback", arguments, reader)
        assert not result.is_error, result
        assert isinstance(result.structured_content, dict)
        bodies.append(result.structured_content)
    assert [b.pop("replayed") for b in bodies] == [False, True]
    assert bodies[0] == bodies[1]
    assert len(await _ratings(kernel)) == 1
    other = {**arguments, "record_id": str(ids[FACTS[1]])}
    refused = await tools.call("feedback", other, reader)
    assert refused.is_error
    assert len(await _ratings(kernel)) == 1


async def test_rest_feedback_refuses_a_malformed_key_and_stores_nothing(api: Api) -> None:
    """A malformed Idempotency-Key is a 422 naming the header; a key reused for another
    record is a 422 too; either way nothing is stored."""
    kernel = api.kernel
    reader = await api.agent("rest-reader", TrustLevel.STANDARD)
    ids = await seed(kernel)
    body = {"record_id": str(ids[FACTS[0]]), "useful": True}
    malformed = await api.client.post(
        "/v1/feedback", json=body, headers={**reader, "Idempotency-Key": "bad key"}
    )
    assert_problem(malformed, 422)
    assert "Idempotency-Key" in malformed.text
    keyed = {**reader, "Idempotency-Key": "good-key"}
    first = await api.client.post("/v1/feedback", json=body, headers=keyed)
    assert first.status_code == 200, first.text
    other = {**body, "record_id": str(ids[FACTS[1]])}
    assert_problem(await api.client.post("/v1/feedback", json=other, headers=keyed), 422)
    assert len(await _ratings(kernel)) == 1
