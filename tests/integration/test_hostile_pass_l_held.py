"""Hostile pass L, what held (kept as regression tests), and the design question it left
open, since answered (ADR-022): an unauthenticated scrape of ``/metrics`` counted records of
every level; it is now refused.

Real embedded PostgreSQL, the real embedding model, no mocks.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engram.memory.types import TrustLevel
from tests.conftest import METRICS_TOKEN, ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.test_hostile_pass_l import MCP_HEADERS, _cli
from tests.integration.test_http_api import Api, assert_problem, bearer
from tests.integration.test_http_fuzz import _count

api = http_api.api

#: Admin query strings and the parameter each 422 must name.
ODD_ADMIN_QUERIES = [
    ("/v1/audit?since=infinity", "since"),
    ("/v1/audit?until=0000-01-01T00:00:00Z", "until"),
    ("/v1/audit?since=0001-01-01T00:00:00%2B14:00", "since"),
    ("/v1/audit?cursor=-1", "cursor"),
    (f"/v1/audit?cursor={2**63}", "cursor"),
    ("/v1/audit?cursor=" + "9" * 5000, "cursor"),
    ("/v1/audit?limit=0", "limit"),
    ("/v1/audit?limit=1e3", "limit"),
    ("/v1/audit?agent=%00", "agent"),
    ("/v1/audit?reveal=true&reason=%20", "reason"),
    ("/v1/quarantine?cursor=9999-12-31T23:59:59-14:00", "cursor"),
    ("/v1/quarantine?cursor=9999-12-31T23:59:59.999999Z", "cursor"),  # a cursor of before
    (f"/v1/quarantine?cursor={2**63}", "cursor"),
    ("/v1/quarantine?limit=1001", "limit"),
    ("/v1/conflicts?limit=-5", "limit"),
]


async def test_admin_routes_answer_odd_queries_with_a_typed_problem_and_change_nothing(
    api: Api, database: ScratchDatabase
) -> None:
    """A non-admin gets 403 whatever the query holds (nothing about the parameters is
    validated for it first); an admin gets a 422 naming the parameter; the first and last UTC
    instants, the largest cursor and a window that ends before it starts answer an empty
    page. No audit row and no record is written by any of it (a REVEAL without a reason is
    refused before anything is appended)."""
    trusted = await api.agent("prober", TrustLevel.TRUSTED)  # trusted, but not an admin
    before = await _count(database)
    for path, parameter in ODD_ADMIN_QUERIES:
        assert_problem(await api.client.get(path, headers=trusted), 403)
        problem = assert_problem(await api.client.get(path, headers=api.admin), 422)
        assert parameter in problem["detail"], (path, problem)
    for path in (
        "/v1/audit?since=0001-01-01T00:00:00Z&until=9999-12-31T23:59:59.999999Z",
        f"/v1/audit?cursor={2**63 - 1}",
        "/v1/audit?since=2026-01-01T00:00:00Z&until=2025-01-01T00:00:00Z",
        f"/v1/quarantine?cursor={2**63 - 1}",
    ):
        response = await api.client.get(path, headers=api.admin)
        assert 200 == response.status_code, (path, response.text)
    assert before == await _count(database)


@pytest.mark.parametrize(
    "body",
    [
        b'[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":' + b"[" * 100_000 + b"]}",
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":NaN,"method":"tools/list"}',
        b'{"jsonrpc":"2.0","id":1,"method":5}',
        b'{"jsonrpc":"1.0","id":1,"method":"tools/list"}',
        (
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"recall",'
            b'"arguments":{"query":"x","limit":1e400}}}'
        ),
    ],
    ids=["batch", "nested", "surrogate-id", "nan-id", "int-method", "jsonrpc-1", "inf-limit"],
)
async def test_odd_mcp_envelopes_are_json_rpc_errors_that_write_nothing(
    api: Api, database: ScratchDatabase, body: bytes
) -> None:
    """Over streamable HTTP, a batch (gone from the protocol), nesting far past the parser,
    a lone surrogate or NaN as id, a method that is not a string, another JSON-RPC version,
    and an infinite number in a tool's arguments are each answered with a JSON-RPC error
    (or an error result), never a 5xx or an empty 202, and write nothing."""
    reader = await api.agent("odd-client", TrustLevel.STANDARD)
    before = await _count(database)
    response = await api.client.post("/mcp", content=body, headers={**reader, **MCP_HEADERS})
    assert response.status_code < 500, response.text
    answer = response.json()
    assert "error" in answer or answer["result"]["isError"], answer
    assert before == await _count(database)


async def test_a_rating_key_reused_after_its_record_was_raised_tells_nothing_of_it(
    api: Api,
) -> None:
    """A standard agent rates record A under a key; A is then raised to ``sensitive``. The
    retry for A is a 404 like any id the agent cannot read, and the key sent for a record B
    it can read is the 422 it would be with A still readable: it names the key, not A."""
    reader = await api.agent("rater", TrustLevel.STANDARD)
    facts = ["The build farm runs on eight ARM runners.", "Release notes live in the wiki."]
    ids = []
    for fact in facts:
        made = await api.write({"type": "belief", "content": fact}, api.admin)
        assert 201 == made.status_code, made.text
        ids.append(made.json()["record_id"])
    keyed = {**reader, "Idempotency-Key": "rate-once"}
    first = await api.client.post(
        "/v1/feedback", json={"record_id": ids[0], "useful": True}, headers=keyed
    )
    assert 200 == first.status_code, first.text
    other = {"record_id": ids[1], "useful": True}
    while_readable = assert_problem(
        await api.client.post("/v1/feedback", json=other, headers=keyed), 422
    )
    raised = await api.client.patch(
        f"/v1/memories/{ids[0]}",
        json={"access_level": "sensitive"},
        headers={**api.admin, "If-Match": '"1"'},
    )
    assert 200 == raised.status_code, raised.text
    again = await api.client.post(
        "/v1/feedback", json={"record_id": ids[0], "useful": True}, headers=keyed
    )
    nobody = "00000000-0000-4000-8000-000000000000"
    unknown = await api.client.post(
        "/v1/feedback", json={"record_id": nobody, "useful": True}, headers=keyed
    )
    hidden = assert_problem(again, 404)
    assert {**hidden, "detail": hidden["detail"].replace(ids[0], nobody)} == assert_problem(
        unknown, 404
    )
    after_raise = assert_problem(
        await api.client.post("/v1/feedback", json=other, headers=keyed), 422
    )
    assert after_raise == while_readable
    assert ids[0] not in after_raise["detail"]


async def test_one_key_over_rest_and_over_mcp_names_two_requests(api: Api) -> None:
    """REST scopes an Idempotency-Key to the agent and the transport (``http:<agent>:<key>``);
    an MCP ``request_id`` is the agent's key as sent. The same text over both is two
    requests, two ratings (docs/mcp.md says so); a retry over the same transport is one."""
    reader = await api.agent("two-ways", TrustLevel.STANDARD)
    made = await api.write({"type": "belief", "content": "Backups run at 02:00 UTC."}, api.admin)
    record_id = made.json()["record_id"]
    keyed = {**reader, "Idempotency-Key": "same-text"}
    body = {"record_id": record_id, "useful": True}
    rest = [await api.client.post("/v1/feedback", json=body, headers=keyed) for _ in range(2)]
    assert [r.json()["replayed"] for r in rest] == [False, True]
    call = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"feedback",'
        '"arguments":{"record_id":"' + record_id + '","useful":true,"request_id":"same-text"}}}'
    )
    over_mcp = await api.client.post("/mcp", content=call, headers={**reader, **MCP_HEADERS})
    assert over_mcp.json()["result"]["structuredContent"]["replayed"] is False, over_mcp.text
    assert 2 == await api.kernel.db.fetchval(
        "SELECT count(*) FROM memory_feedback WHERE record_id = $1::uuid", record_id
    )


async def test_cli_odd_arguments_exit_with_their_documented_codes(
    api: Api, database: ScratchDatabase, tmp_path: Path
) -> None:
    """A representative set of mistakes: a malformed id or time, an instant with no UTC form,
    an anchor file that is not JSON, an invalid agent name, an unknown job. Each exits with
    its documented code (2 usage, 3 not found, 4 refused) and a message, never a traceback."""
    del api  # the database is migrated and has its first agent
    anchor = tmp_path / "anchor.json"
    anchor.write_text("not json")
    cases = [
        (["memories", "get", "not-a-uuid"], 2),
        (["memories", "get", "0" * 8 + "-0000-0000-0000-" + "0" * 12], 3),
        (["audit", "export", "--since", "0001-01-01T00:00:00+14:00"], 2),
        (["audit", "verify", "--anchor", str(anchor)], 2),
        (["agents", "add", "system:cli:me", "--trust", "trusted"], 4),
        (["agents", "add", "p", "--trust", "standard", "--writes-per-minute", "1e400"], 4),
        (["jobs", "run", "no_such_job"], 3),
        (["conflicts", "ack", str(2**64)], 2),
    ]
    for args, code in cases:
        done = _cli(database, *args)
        assert "Traceback" not in done.stderr, done.stderr[-800:]
        assert code == done.returncode, (args, done.stderr[-400:])
        assert done.stderr.strip(), args


async def test_an_unauthenticated_scrape_counts_no_record_it_may_not_read(api: Api) -> None:
    """Rule: nothing a caller may not read may influence its answer, counts included. A
    caller with no token at all scrapes ``/metrics`` after a trusted agent stored one
    ``sensitive`` record: it is refused (401) and its answer carries no figure at all, while
    the metrics token's scrape does count the record."""
    made = await api.write(
        {
            "type": "belief",
            "content": "The acquisition talks with Northwind close in March.",
            "access_level": "sensitive",
        },
        api.admin,
    )
    assert 201 == made.status_code, made.text
    scrape = await api.client.get("/metrics")
    counted = re.findall(r"^engram_memory_records\{[^}]*\} (\S+)$", scrape.text, re.MULTILINE)
    assert (401, []) == (scrape.status_code, counted)
    assert "engram_" not in scrape.text
    cleared = await api.client.get("/metrics", headers=bearer(METRICS_TOKEN))
    counted = re.findall(r"^engram_memory_records\{[^}]*\} (\S+)$", cleared.text, re.MULTILINE)
    assert 1 == sum(float(value) for value in counted)
