"""Hostile use of recall, list and health (issue 17): what an agent may not read never shows,
counts or sways its answers, and odd arguments are typed errors, never crashes."""

from __future__ import annotations

import math
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult

from engram import Kernel
from engram.agents.registry import Principal
from engram.memory.types import TrustLevel
from engram.protocols.mcp.schema import page_cursor
from engram.protocols.mcp.server import build_server
from engram.protocols.mcp.tools import EngramTools
from engram.retrieval.search import DEFAULT_MIN_SCORE
from tests.readiness import when_ready

QUERY = "where does the billing service keep its invoices"
READABLE = [
    "The billing service stores invoices in PostgreSQL 16 on the eu-west cluster.",
    "Invoices older than ten years are deleted by the retention job.",
    "The billing team answers questions in the #billing channel.",
    "Checkout dashboards live in the Payments folder in Grafana.",
]
#: Nearer to the query than any readable record, and at a level the restricted agent cannot read.
HIDDEN = "Where the billing service keeps its invoices is described on the billing team's wiki."


async def _principal(kernel: Kernel, name: str, trust: TrustLevel) -> Principal:
    _, token = await kernel.agents.add(name, trust, writes_per_minute=1000)
    return await kernel.agents.authenticate(token)


def _body(result: CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


def _seen(body: dict[str, Any]) -> Any:
    """All a recall or list answer shows: ids, versions, scores, relevance, ranks, counts,
    cursor."""
    if "hits" in body:
        return (
            [(h["record"]["id"], h["score"], h["relevance"], h["ranks"]) for h in body["hits"]],
            body["legs"],
            body["degraded"],
        )
    return ([r["id"] for r in body["records"]], body["next_cursor"])


async def _answers(tools: EngramTools, reader: Principal) -> list[Any]:
    """The restricted reader's answers to the same recalls and listings."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("recall", {"query": QUERY}),
        ("recall", {"query": QUERY, "min_score": 0.0, "limit": 3}),
        ("recall", {"query": QUERY, "min_score": 0.3, "tags": ["billing"]}),
        ("recall", {"query": QUERY, "limit": 1}),
        ("list", {}),
        ("list", {"limit": 3}),
        ("list", {"limit": 1, "tags": ["billing"]}),
    ]
    answers = []
    for name, arguments in calls:
        result = await tools.call(name, arguments, reader)
        assert not result.is_error, result.content
        answers.append(_seen(_body(result)))
    return answers


async def test_a_restricted_agent_is_not_swayed_by_records_it_cannot_read(kernel: Kernel) -> None:
    """With and without a nearer record above its read level (and newer, and tagged alike),
    a restricted agent's recalls and listings show the same ids, scores, relevance, ranks, leg
    counts and cursors; the hidden record never appears."""
    tools = EngramTools(kernel)
    reader = await _principal(kernel, "restricted-reader", TrustLevel.RESTRICTED)
    writer = await _principal(kernel, "standard-writer", TrustLevel.STANDARD)
    for content in READABLE:
        body = {"type": "belief", "content": content, "metadata": {"tags": ["billing"]}}
        assert not (await tools.call("remember", body, reader)).is_error

    before = await _answers(tools, reader)
    hidden = {
        "type": "belief",
        "content": HIDDEN,
        "metadata": {"tags": ["billing"]},
        "access_level": "user",
    }
    written = _body(await tools.call("remember", hidden, writer))
    assert ("approved", "created") == (written["decision"], written["outcome"])
    found = _body(await tools.call("recall", {"query": QUERY, "min_score": 0.0}, writer))
    scores = {hit["record"]["record_id"]: hit["score"] for hit in found["hits"]}
    nearest = max(scores, key=lambda record_id: scores[record_id])
    assert written["record_id"] == nearest, scores

    after = await _answers(tools, reader)
    assert before == after
    assert written["record_id"] not in str(after)
    top = before[0][0]
    assert top
    assert all(score >= DEFAULT_MIN_SCORE for _, score, _, _ in top)


async def test_health_shows_readiness_and_the_caller_only(kernel: Kernel) -> None:
    """health names each check as true or false and the caller's own levels; other agents'
    writes change nothing in it."""
    tools = EngramTools(kernel)
    reader = await _principal(kernel, "health-reader", TrustLevel.RESTRICTED)
    writer = await _principal(kernel, "busy-writer", TrustLevel.STANDARD)
    first = _body(
        await when_ready(lambda: tools.call("health", {}, reader), lambda r: _body(r)["ready"])
    )
    assert {"ready", "checks", "agent"} == set(first)
    assert first["ready"] is True
    assert {"database", "migrations", "embedding_model", "gate", "audit_log"} == set(
        first["checks"]
    )
    assert {
        "name": "health-reader",
        "trust_level": "restricted",
        "read_level": "agent",
        "write_level": "agent",
        "can_write": True,
    } == first["agent"]
    for n in range(5):
        await tools.call("remember", {"type": "belief", "content": f"Fact {n} is true."}, writer)
    after = _body(
        await when_ready(lambda: tools.call("health", {}, reader), lambda r: _body(r)["ready"])
    )
    assert first == after


async def test_list_pages_through_everything_once(kernel: Kernel) -> None:
    """Pages of two, cursor to cursor, list each readable record once, newest first."""
    tools = EngramTools(kernel)
    agent = await _principal(kernel, "pager", TrustLevel.STANDARD)
    for n in range(5):
        content = f"Service number {n} runs in its own Kubernetes namespace."
        tags = ["even"] if n % 2 == 0 else ["odd"]
        await tools.call(
            "remember", {"type": "belief", "content": content, "metadata": {"tags": tags}}, agent
        )
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        arguments: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = _body(await tools.call("list", arguments, agent))
        seen += [r["content"] for r in page["records"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [
        f"Service number {n} runs in its own Kubernetes namespace." for n in (4, 3, 2, 1, 0)
    ] == seen
    even = _body(await tools.call("list", {"tags": ["even"]}, agent))
    assert 3 == len(even["records"])
    assert [] == _body(await tools.call("list", {"tags": ["even", "odd"]}, agent))["records"]
    assert [] == _body(await tools.call("list", {"types": ["skill"]}, agent))["records"]


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


GOOD_CURSOR = "MjAyNi0wMS0wMVQwMDowMDowMCswMDowMHwxMjM0NTY3OC0xMjM0LTEyMzQtMTIzNC0xMjM0NTY3ODEyMzQ"


@pytest.mark.parametrize(
    ("tool", "arguments", "mentions"),
    [
        ("recall", {"query": "ledger", "min_score": math.nan}, "min_score"),
        ("recall", {"query": "ledger", "min_score": math.inf}, "min_score"),
        ("recall", {"query": "ledger", "min_score": -0.1}, "min_score"),
        ("recall", {"query": "ledger", "min_score": 1.5}, "min_score"),
        ("recall", {"query": "ledger", "min_score": "high"}, "min_score"),
        ("recall", {"query": "ledger", "limit": -1}, "limit"),
        ("recall", {"query": "ledger", "limit": 10**30}, "limit"),
        ("recall", {"query": "ledger", "tags": ["a\x00b"]}, "tags"),
        ("recall", {"query": "ledger", "tags": ["ok", "\ud800"]}, "tags"),
        ("recall", {"query": "ledger", "tags": _nested(900)}, "tags"),
        ("recall", {"query": "ledger", "tags": "billing"}, "tags"),
        ("recall", {"query": "ledger", "tags": [""]}, "tags"),
        ("recall", {"query": "ledger", "tags": ["x" * 65]}, "tags"),
        ("recall", {"query": "ledger", "tags": [f"t{n}" for n in range(33)]}, "tags"),
        ("list", {"limit": 0}, "limit"),
        ("list", {"limit": -5}, "limit"),
        ("list", {"limit": 10**30}, "limit"),
        ("list", {"cursor": "not a cursor"}, "cursor"),
        ("list", {"cursor": "\x00"}, "cursor"),
        ("list", {"cursor": "x" * 500}, "cursor"),
        ("list", {"cursor": GOOD_CURSOR[:-8]}, "cursor"),
        ("list", {"namespace": "ops\x00"}, "namespace"),
        ("list", {"namespace": "ops\udfff"}, "namespace"),
        ("list", {"tags": _nested(900)}, "tags"),
        ("list", {"tags": [math.nan]}, "tags"),
        ("list", {"types": ["rumour"]}, "types"),
        ("list", {"offset": 10}, "offset"),
        ("health", {"deep": _nested(900)}, "deep"),
    ],
)
async def test_odd_arguments_are_typed_errors(
    kernel: Kernel, tool: str, arguments: dict[str, Any], mentions: str
) -> None:
    """Each odd argument is an invalid_input result naming it, never an internal error."""
    tools = EngramTools(kernel)
    agent = await _principal(kernel, "odd-caller", TrustLevel.RESTRICTED)
    result = await tools.call(tool, arguments, agent)
    assert result.is_error, result
    error = _body(result)["error"]
    assert "invalid_input" == error["kind"], error
    assert mentions in error["message"], error


async def test_a_cursor_list_made_is_accepted(kernel: Kernel) -> None:
    """A well-formed cursor for an instant after every record pages to nothing, not an error."""
    tools = EngramTools(kernel)
    agent = await _principal(kernel, "cursor-user", TrustLevel.STANDARD)
    made = _body(
        await tools.call("remember", {"type": "belief", "content": "Cursors work."}, agent)
    )
    record = (await kernel.temporal.query(record_id=made["record"]["record_id"]))[0]
    assert made["record"]["id"] == str(record.id)
    page = _body(await tools.call("list", {"cursor": page_cursor(record)}, agent))
    assert ([], None) == (page["records"], page["next_cursor"])
    old = _body(await tools.call("list", {"cursor": GOOD_CURSOR}, agent))
    assert ([], None) == (old["records"], old["next_cursor"])


async def test_odd_arguments_through_a_client_session_are_typed_errors(kernel: Kernel) -> None:
    """Over a real MCP session too: nested tags, a bad floor and a bad cursor are error
    results of kind invalid_input."""
    agent = await _principal(kernel, "session-caller", TrustLevel.STANDARD)
    async with Client(build_server(EngramTools(kernel), lambda _ctx: agent)) as client:
        for name, arguments in [
            ("recall", {"query": "ledger", "tags": _nested(64)}),
            ("recall", {"query": "ledger", "min_score": -1}),
            ("list", {"cursor": "%%%"}),
            ("list", {"limit": 1000}),
            ("health", {"x": 1}),
        ]:
            result = await client.call_tool(name, arguments)
            assert result.is_error, (name, arguments)
            assert "invalid_input" == _body(result)["error"]["kind"], result


@pytest.mark.parametrize("request_id", ["", "x" * 200], ids=["empty", "too-long"])
async def test_a_decision_type_claim_with_a_bad_request_id_is_audited(
    kernel: Kernel, request_id: str
) -> None:
    """remember and update with ``decision_type`` and a malformed request_id: the claim is
    refused and audited before the control fields are checked."""
    tools = EngramTools(kernel)
    agent = await _principal(kernel, "claimant", TrustLevel.STANDARD)
    made = _body(
        await tools.call(
            "remember", {"type": "belief", "content": "Docs live in Confluence."}, agent
        )
    )
    before = await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    claims = [
        ("remember", {"type": "belief", "content": "x", "decision_type": "consolidation"}),
        (
            "update",
            {
                "record_id": made["record_id"],
                "expected_version": 1,
                "decision_type": "self_healing",
            },
        ),
    ]
    for tool, arguments in claims:
        result = await tools.call(tool, {**arguments, "request_id": request_id}, agent)
        assert result.is_error
        assert "decision_type" in str(result.content)
    assert before + 2 == await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
