"""Hostile pass AB: findings, each a test that failed before its fix (see each docstring)."""

from __future__ import annotations

import math
import time
from typing import Any
from uuid import UUID

import pytest

from engram import Kernel
from engram.errors import RateLimited, ValidationFailed
from engram.memory.rl.policy import AdvisorPolicy
from engram.memory.types import CallerIdentity, TrustLevel
from engram.protocols.mcp.tools import EngramTools
from engram.protocols.simulator.evaluation import simulate
from engram.protocols.simulator.life import live, simulated_agent
from engram.protocols.simulator.world import agent_life
from tests.integration import test_http_api as http_api
from tests.integration.gate_helpers import belief, create
from tests.integration.test_http_api import Api, assert_problem, bearer

#: The REST app on the test's kernel and the first admin's headers (test_http_api's fixture).
api = http_api.api


async def _ratings_taken(kernel: Kernel, record_id: UUID) -> int:
    """Ratings of ``record_id`` by the simulated agent until its budget refuses one (at most
    200; an unlimited budget fails the test)."""
    for taken in range(200):
        try:
            await kernel.retrieval.feedback(simulated_agent(), record_id, useful=True)
        except RateLimited:
            return taken
    pytest.fail("200 ratings at once were taken")


async def test_a_simulated_life_waits_out_the_ratings_budget(kernel: Kernel) -> None:
    """The simulated agent rates every hit it reads (146 ratings in a default life of six
    seconds), and ratings are budgeted at 60 at once and 2 a second per agent: a life raised
    ``RateLimited`` as soon as the budget ran out, so ``engram advisor evaluate`` at its
    defaults failed after its first life with "too many ratings; try again shortly" and no
    candidate could be promoted. With the budget already spent, a life now waits for it as
    the error says and rates every hit."""
    agent = simulated_agent()
    seen = await kernel.gate.evaluate(
        create(belief("The spare keys hang by the door.", source_agent=agent.agent_id), agent)
    )
    assert seen.record_id is not None
    assert await _ratings_taken(kernel, seen.record_id) >= 59  # the whole budget spent

    world = agent_life(1002, writes=20, questions=6)
    report = await live(kernel, world, agent=agent)

    assert 6 == report.questions
    rated = await kernel.db.fetchval(
        "SELECT count(*) FROM engram.memory_feedback f JOIN engram.memories m "
        "ON m.record_id = f.record_id AND m.superseded_by IS NULL WHERE m.namespace = $1",
        report.namespace,
    )
    assert rated >= report.answered >= 1


async def test_an_evaluation_rates_without_the_outside_agents_budget(kernel: Kernel) -> None:
    """Waiting for the budget made a default ``engram advisor evaluate`` take 6 min 46 s, of
    which 39 s of work: the lives of an evaluation run on a kernel of their own, whose only
    agent is simulated, and now rate unbudgeted there. With the simulated agent's budget
    spent, the lives rate every hit without waiting (a wait would take half a second a
    rating), and the kernel's budget is its own again afterwards."""
    agent = simulated_agent()
    seen = await kernel.gate.evaluate(
        create(belief("The boiler is serviced in May.", source_agent=agent.agent_id), agent)
    )
    assert seen.record_id is not None
    await _ratings_taken(kernel, seen.record_id)
    before = await kernel.db.fetchval("SELECT count(*) FROM engram.memory_feedback")

    started = time.perf_counter()
    side = await simulate(kernel, AdvisorPolicy.zeros("rl@0"), count=1, writes=40, questions=30)
    took = time.perf_counter() - started

    rated = await kernel.db.fetchval("SELECT count(*) FROM engram.memory_feedback") - before
    assert (1, 1) == (len(side.heuristic), len(side.candidate))
    assert rated >= 40
    assert took < rated * 0.25, (took, rated)
    assert await _ratings_taken(kernel, seen.record_id) <= 60  # budgeted again


@pytest.mark.parametrize("rate", [1e-308, 5e-324])
async def test_a_rate_too_small_to_compute_is_refused_and_a_stored_one_limits(
    api: Api, rate: float
) -> None:
    """``engram agents add --writes-per-minute 1e-308`` was accepted (the check was only
    ``0 < rate``). Such an agent's second write was a 500 and left no audit row: its retry
    after overflowed to infinity, which the audit row's JSON cannot hold (1e-308), or
    PostgreSQL's bucket arithmetic underflowed (5e-324). A rate below 0.001 a minute is now
    refused when an agent is added; one stored before is taken as 0.001, so the second
    write is a 429 with a finite Retry-After, audited like any rate-limit refusal."""
    with pytest.raises(ValidationFailed, match="writes per minute"):
        await api.kernel.agents.add("tiny-new", TrustLevel.STANDARD, writes_per_minute=rate)

    headers = await api.agent("tiny", TrustLevel.STANDARD, writes_per_minute=1)
    await api.kernel.db.execute(  # as an agent added before the check was made
        "UPDATE engram.agents SET permissions = jsonb_set(permissions, "
        "'{writes_per_minute}', to_jsonb($1::float8)) WHERE name = 'tiny'",
        rate,
    )
    first = await api.write({"type": "belief", "content": "The ferry leaves at nine."}, headers)
    assert 201 == first.status_code, first.text
    second = await api.write({"type": "belief", "content": "The tram leaves at ten."}, headers)
    body = assert_problem(second, 429)
    assert 0 < body["retry_after_seconds"] <= 60_000
    assert int(second.headers["retry-after"]) == math.ceil(body["retry_after_seconds"])
    audited = await api.kernel.db.fetchval(
        "SELECT count(*) FROM engram.librarian_audit WHERE agent_id = 'tiny' "
        "AND decision = 'rejected'"
    )
    assert 1 == audited


async def test_true_and_false_are_not_numbers_nor_numbers_booleans(api: Api) -> None:
    """Every adapter read JSON's ``true`` as the number 1 and a number as a boolean:
    ``forget`` over MCP with ``expected_version: true`` forgot a record at version 1, a REST
    write with ``source_confidence: true`` was stored as fully confident, ``useful: 0`` was
    a rating, ``limit: true`` a search of one. Each is now refused with the field named, and
    nothing changes (a refused write is audited as every refused write is)."""
    kernel = api.kernel
    _, token = await kernel.agents.add("typed", TrustLevel.STANDARD, writes_per_minute=1000)
    principal = await kernel.agents.authenticate(token)
    headers = bearer(token)
    tools = EngramTools(kernel)
    made = await api.write(
        {"type": "belief", "content": "The atrium lights dim at 22:00."}, headers
    )
    record_id = made.json()["record_id"]

    calls: list[tuple[str, dict[str, Any]]] = [
        ("forget", {"record_id": record_id, "expected_version": True}),
        (
            "update",
            {"record_id": record_id, "content": "They dim at 23:00.", "expected_version": True},
        ),
        ("get", {"record_id": record_id, "include_forgotten": 1}),
        ("list", {"limit": True}),
        ("recall", {"query": "atrium lights", "limit": True}),
        ("recall", {"query": "atrium lights", "min_score": False}),
        ("feedback", {"record_id": record_id, "useful": 1}),
        (
            "remember",
            {"type": "belief", "content": "The atrium is open.", "source_confidence": True},
        ),
    ]
    for name, arguments in calls:
        result = await tools.call(name, arguments, principal)
        assert result.is_error, (name, result)
        assert isinstance(result.structured_content, dict)
        body = result.structured_content  # an error, or a write the Gate refused
        kind = body["error"]["kind"] if "error" in body else body["decision"]
        assert kind in {"invalid_input", "rejected"}, (name, body)

    search = [{"limit": True}, {"min_score": False}, {"include_superseded": 1}]
    for extra in search:
        response = await api.client.post(
            "/v1/search", json={"query": "atrium lights", **extra}, headers=headers
        )
        assert_problem(response, 422)
    rated = await api.client.post(
        "/v1/feedback", json={"record_id": record_id, "useful": 0}, headers=headers
    )
    assert_problem(rated, 422)
    sure = await api.write(
        {"type": "belief", "content": "The atrium is open.", "source_confidence": True}, headers
    )
    assert "source_confidence" in assert_problem(sure, 422)["detail"]

    head = await kernel.temporal.current(UUID(record_id))
    assert head is not None
    assert (1, "active") == (head.version, head.status.value)
    assert 0 == await kernel.db.fetchval("SELECT count(*) FROM engram.memory_feedback")
    stored = await kernel.db.fetchval(
        "SELECT count(*) FROM engram.memories WHERE content = 'The atrium is open.'"
    )
    assert 0 == stored


async def test_the_shared_bucket_keeps_a_fractional_burst_and_any_finite_rate(
    kernel: Kernel,
) -> None:
    """The shared bucket's statement read the burst as an integer: an agent given 7 writes a
    minute (a burst of 1.4) had a burst of 1, so the write after its first was told to wait
    8.6 s, not 5.1 s as the in-process limiter says; and an in-process caller given a rate
    past about 10^10 a minute (a burst beyond PostgreSQL's integer) failed every write with
    a database error. The burst is now a double, and a rate above 100,000 a minute is taken
    as 100,000."""
    seven = CallerIdentity("seven-a-minute", TrustLevel.STANDARD, writes_per_minute=7)
    first = await kernel.gate.evaluate(
        create(belief("Bay 3 is free.", source_agent=seven.agent_id), seven)
    )
    assert "approved" == first.decision.value, first.reason
    second = await kernel.gate.evaluate(
        create(belief("Bay 4 is free.", source_agent=seven.agent_id), seven)
    )
    assert "rejected" == second.decision.value
    assert second.retry_after_seconds is not None
    assert 4.5 < second.retry_after_seconds < 5.5, second.retry_after_seconds

    vast = CallerIdentity("vast-rate", TrustLevel.STANDARD, writes_per_minute=1e308)
    for text in ("Bay 5 is free.", "Bay 6 is free."):
        done = await kernel.gate.evaluate(create(belief(text, source_agent=vast.agent_id), vast))
        assert "approved" == done.decision.value, done.reason


async def test_a_number_is_not_a_time(api: Api) -> None:
    """Times are ISO 8601 with a zone, yet every adapter read a number (or a text of digits)
    as a Unix time, guessing its unit from its size: ``event_time: 253402300799``, the last
    second of 9999 in seconds, was stored as 1978-01-11 (read as milliseconds), the first
    second of year 1 as 1968. As-of instants and the audit's window took numbers the same
    way. A number is now refused naming the field, and the refused write is audited."""
    kernel = api.kernel
    headers = await api.agent("clocks", TrustLevel.STANDARD, writes_per_minute=1000)
    made = await api.write({"type": "belief", "content": "The clock tower chimes."}, headers)
    record_id = made.json()["record_id"]
    before = await kernel.db.fetchval("SELECT count(*) FROM engram.librarian_audit")

    for when in (253402300799, -62135596800, 0, 1.5, "1700000000", "-1.5e3"):
        text = f"The fire drill on level two happened ({when!s})."
        refused = await api.write({"type": "episode", "content": text, "event_time": when}, headers)
        assert "event_time" in assert_problem(refused, 422)["detail"], when
        search = await api.client.post(
            "/v1/search", json={"query": "clock tower", "as_of_event": when}, headers=headers
        )
        assert_problem(search, 422)
        read = await api.client.get(
            f"/v1/memories/{record_id}", params={"as_of_ingestion": str(when)}, headers=headers
        )
        assert_problem(read, 422)
        window = await api.client.get("/v1/audit", params={"since": str(when)}, headers=api.admin)
        assert_problem(window, 422)

    stored = await kernel.db.fetchval(
        "SELECT count(*) FROM engram.memories WHERE content LIKE 'The fire drill%'"
    )
    assert 0 == stored
    audited = await kernel.db.fetchval("SELECT count(*) FROM engram.librarian_audit") - before
    assert 6 == audited
