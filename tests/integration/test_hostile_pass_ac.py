"""Hostile pass AC: the MCP server as a protocol endpoint.

Found here (each test failed before its fix):

- over streamable HTTP, a message that is no JSON-RPC 2.0 message (``jsonrpc`` missing or
  ``"1.0"``, a batch array, ``params`` that are not an object) was answered by the SDK with
  ``-32602`` and pydantic's whole report: documentation links, the message's own text
  (``input_value``, a record's content included) and six errors for the union it tried;
  stdio answered the same lines ``-32600`` with one sentence;
- on both transports, a known method whose params the SDK refused (``initialize`` without
  ``protocolVersion``, a ``_meta.progressToken`` that is a list) got ``-32602 Invalid request
  parameters`` with an empty ``data``: nothing said which parameter;
- over stdio, any request but ``initialize`` and ``ping`` sent before ``initialize`` got the
  same empty ``-32602``, so a client could not tell that it had to initialise first.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter

from engram import Kernel
from engram.memory.types import TrustLevel
from engram.protocols.mcp.server import build_server
from engram.protocols.mcp.stdio import line_problem
from engram.protocols.mcp.tools import EngramTools
from tests.conftest import ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.audit_helpers import entry
from tests.integration.test_http_api import Api
from tests.integration.test_http_fuzz import _count

api = http_api.api

MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
SECRET = "the vault passphrase is orchid-lantern-4471"
REMEMBER = {"name": "remember", "arguments": {"type": "belief", "content": SECRET}}
INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "probe", "version": "1"},
}

#: Messages that are not JSON-RPC 2.0 messages, and what the answer's message must name.
NOT_MESSAGES: list[tuple[Any, str]] = [
    ({"jsonrpc": "1.0", "id": 1, "method": "tools/call", "params": REMEMBER}, "jsonrpc"),
    ({"id": 2, "method": "tools/call", "params": REMEMBER}, "jsonrpc"),
    ([{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": REMEMBER}], "batch"),
    ([], "batch"),
    ({"jsonrpc": "2.0", "id": 4, "method": 17}, "method"),
    ({"jsonrpc": "2.0", "id": 5}, "method"),
    ("tools/list", "object"),
]


def _leaks(message: str) -> bool:
    """Whether an error message carries the SDK's validation report or the client's text."""
    return any(
        mark in message for mark in ("pydantic", "input_value", "validation error", "lantern")
    )


@pytest.mark.parametrize(("message", "named"), NOT_MESSAGES)
async def test_an_mcp_body_that_is_no_json_rpc_message_is_an_invalid_request_in_one_sentence(
    api: Api, database: ScratchDatabase, message: Any, named: str
) -> None:
    """Over HTTP such a body was a -32602 holding pydantic's report and the body's own text
    (the content of a record to remember among it); it is a -32600 naming what is wrong,
    as over stdio, and nothing is written."""
    before = await _count(database)
    response = await api.client.post(
        "/mcp", content=json.dumps(message), headers={**api.admin, **MCP_HEADERS}
    )
    assert 400 == response.status_code, response.text
    error = response.json()["error"]
    assert (-32600, False, True) == (
        error["code"],
        _leaks(error["message"]),
        named in error["message"],
    )
    assert before == await _count(database)


@pytest.mark.parametrize(("message", "named"), NOT_MESSAGES)
def test_stdio_answers_the_same_lines_with_the_same_reasons(message: Any, named: str) -> None:
    """The stdio reader gives each such line the same -32600 and reason as HTTP."""
    problem = line_problem(json.dumps(message))
    assert problem is not None
    assert (-32600, False, True) == (problem[0], _leaks(problem[1]), named in problem[1])


@pytest.mark.parametrize(
    ("method", "params", "named"),
    [
        ("initialize", {}, "protocolVersion"),
        ("initialize", {**INITIALIZE, "capabilities": []}, "capabilities"),
        ("tools/call", {**REMEMBER, "_meta": {"progressToken": [1]}}, "progressToken"),
        ("tools/list", {"cursor": 5}, "cursor"),
    ],
)
async def test_refused_params_of_a_known_method_name_the_parameter(
    api: Api, database: ScratchDatabase, method: str, params: dict[str, Any], named: str
) -> None:
    """The SDK answered these -32602 "Invalid request parameters" with an empty ``data``;
    the answer now names the parameter (never its value), and nothing is written."""
    before = await _count(database)
    body = {"jsonrpc": "2.0", "id": 9, "method": method, "params": params}
    response = await api.client.post("/mcp", json=body, headers={**api.admin, **MCP_HEADERS})
    error = response.json()["error"]
    assert (-32602, 9) == (error["code"], response.json()["id"])
    assert (True, False) == (named in error["message"], _leaks(error["message"])), error
    assert before == await _count(database)


async def _stdio_session(kernel: Kernel, lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Serve ``lines`` to the stdio server's loop (the SDK's own, on memory streams) and
    return its answers, one per request."""
    _, token = await kernel.agents.add("stdio-probe", TrustLevel.STANDARD)
    principal = await kernel.agents.authenticate(token)
    server = build_server(EngramTools(kernel), lambda _ctx: principal)
    to_server, server_in = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    server_out, from_server = anyio.create_memory_object_stream[SessionMessage](16)
    answers: list[dict[str, Any]] = []
    with anyio.fail_after(60):
        async with (
            to_server,
            server_in,
            server_out,
            from_server,
            anyio.create_task_group() as group,
        ):
            group.start_soon(
                server.run, server_in, server_out, server.create_initialization_options()
            )
            for line in lines:
                message = jsonrpc_message_adapter.validate_python(line, by_name=False)
                await to_server.send(SessionMessage(message))
                if "id" in line:
                    answer = await from_server.receive()
                    answers.append(answer.message.model_dump(by_alias=True, exclude_none=True))
            await to_server.aclose()
    return answers


async def test_a_stdio_request_before_initialize_is_told_to_initialize(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A ``tools/call`` or ``tools/list`` sent over stdio before ``initialize`` got an empty
    -32602 "Invalid request parameters"; it now says to initialise first, writes nothing, and
    the same call after the handshake is served."""
    before = await _count(database)
    call = {"name": "health", "arguments": {}}
    answers = await _stdio_session(
        kernel,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": INITIALIZE},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": call},
        ],
    )
    early = [(answer["id"], answer["error"]["code"]) for answer in answers[:2]]
    assert [(1, -32602), (2, -32602)] == early
    assert all("initialize" in answer["error"]["message"] for answer in answers[:2]), answers
    assert "result" in answers[2]
    assert (4, False) == (answers[3]["id"], answers[3]["result"].get("isError", False))
    assert before == await _count(database)


# --- the audit chain verified while agents write -------------------------------------------


async def test_the_audit_log_verifies_while_appends_commit_beside_the_walk(kernel: Kernel) -> None:
    """``engram audit verify`` run while agents wrote reported the log TAMPERED ("lane 5 ends
    before its recorded head (rows cut off its end)", exit 6; seen once in three runs against
    a served kernel under three writers): it read the checkpoints, each page of rows and the
    lane heads in snapshots of their own, so a row committed after the last page but before
    the heads, or one of a lower seq committed after a page holding a higher one, looked cut
    off. Four writers append across lanes, each committing a little after its append as a
    Gate transaction does, while the log is verified again and again in pages of five; every
    verification must pass."""
    writing = True
    reports: list[str] = []

    async def writer(w: int) -> None:
        n = 0
        while writing:
            async with kernel.db.transaction() as conn:
                await kernel.audit.append(conn, entry(w * 10_000 + n, lane=(w * 3 + n) % 16))
                await asyncio.sleep(0.003)  # the commit comes a moment after the append
            n += 1

    async def verifier() -> None:
        for _ in range(40):
            report = await kernel.audit.verify(batch=5)
            if not report.ok:
                reports.append(f"{report.problem} (seq {report.first_bad_seq})")

    with anyio.fail_after(150):
        for n in range(30):  # a log a few pages long before the race starts
            async with kernel.db.transaction() as conn:
                await kernel.audit.append(conn, entry(n, lane=n % 16))
        writers = [asyncio.ensure_future(writer(w)) for w in range(1, 5)]
        try:
            await verifier()
        finally:
            writing = False
            await asyncio.gather(*writers)
    assert [] == reports
    assert (await kernel.audit.verify()).ok


async def _lock_waiters(kernel: Kernel) -> int:
    """Sessions of this database waiting for a lock (a reader held behind an append)."""
    return int(
        await kernel.db.fetchval(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
    )


async def test_an_audit_page_never_passes_a_row_still_being_committed(api: Api) -> None:
    """``GET /v1/audit`` pages by ``seq``: a row whose seq was drawn by a transaction still
    committing (a Gate write whose commit is slow) was not on the page that listed the row
    after it, and the next page, asked from that later row's cursor, never showed it: an admin
    (or ``audit export``, or replay, which page the same way) following ``next_cursor`` lost
    it for good. A page now ends at the last row no append can still fill in below."""
    kernel = api.kernel
    held = asyncio.Event()
    release = asyncio.Event()
    seqs: dict[str, int] = {}

    async def slow_commit() -> None:
        async with kernel.db.transaction() as conn:
            seqs["slow"] = await kernel.audit.append(conn, entry(1, lane=3))
            held.set()
            await release.wait()  # the transaction commits only now

    with anyio.fail_after(60):
        committing = asyncio.ensure_future(slow_commit())
        await held.wait()
        async with kernel.db.transaction() as conn:
            seqs["quick"] = await kernel.audit.append(conn, entry(2, lane=4))
        assert seqs["slow"] < seqs["quick"]
        first = asyncio.ensure_future(
            api.client.get("/v1/audit", params={"limit": 1000}, headers=api.admin)
        )
        while not first.done() and await _lock_waiters(kernel) == 0:
            await asyncio.wait({first}, timeout=0.02)  # until the page waits, or is answered
        release.set()
        await committing
        page = (await first).json()
        listed = [row["seq"] for row in page["entries"]]
        cursor = page["next_cursor"] or max(listed)
        rest = await api.client.get(
            "/v1/audit", params={"limit": 1000, "cursor": cursor}, headers=api.admin
        )
        listed += [row["seq"] for row in rest.json()["entries"]]
    assert (True, True) == (seqs["slow"] in listed, seqs["quick"] in listed), (seqs, listed)
