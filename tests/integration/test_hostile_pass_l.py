"""Hostile pass L: odd input on the surfaces earlier passes touched least (the MCP envelope,
the in-process session's request ids, the admin command line's arguments).

Every test here failed on the code it was written against; what held is in
``test_hostile_pass_l_held.py``. Real embedded PostgreSQL, the real embedding model, real
``engram`` processes for the command line, no mocks.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from engram import Kernel, open_kernel
from engram.config import EngramSettings
from engram.errors import ValidationFailed
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.types import CallerIdentity, TrustLevel
from engram.protocols.http.app import create_app
from engram.protocols.inprocess import AgentSession
from engram.protocols.mcp.stdio import line_problem
from tests.conftest import ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.scheduler_helpers import running
from tests.integration.test_http_api import Api, assert_problem
from tests.integration.test_http_fuzz import _count

api = http_api.api

MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
REMEMBER = (
    b'"method":"tools/call","params":{"name":"remember","arguments":'
    b'{"type":"belief","content":"The release train leaves every Tuesday at noon."}}'
)


# --- L1: a tools/call without an id is answered 202 Accepted and nothing is done ------------


async def test_a_tools_call_without_an_id_is_refused_not_accepted_and_dropped(
    api: Api, database: ScratchDatabase
) -> None:
    """A ``tools/call`` sent without an ``id`` reads as a JSON-RPC notification: the SDK
    answered ``202 Accepted`` with no body and did nothing (no write, no audit row, no
    error). Pass B closed this for malformed ids; a missing one did the same. Only
    ``notifications/*`` methods may come without an id."""
    before = await _count(database)
    body = b'{"jsonrpc":"2.0",' + REMEMBER + b"}"
    response = await api.client.post("/mcp", content=body, headers={**api.admin, **MCP_HEADERS})
    assert 400 == response.status_code, response.text
    error = response.json()["error"]
    assert -32600 == error["code"]
    assert "id" in error["message"]
    assert before == await _count(database)
    notice = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    answered = await api.client.post("/mcp", content=notice, headers={**api.admin, **MCP_HEADERS})
    assert 202 == answered.status_code, answered.text


async def test_an_unauthenticated_mcp_request_is_a_401_whatever_its_envelope(api: Api) -> None:
    """docs/mcp.md: without a valid token the answer is 401 "before any MCP processing". A
    request with a malformed id was parsed and answered 400 first, without a token."""
    for body in (
        b'{"jsonrpc":"2.0","id":1.5,' + REMEMBER + b"}",
        b'{"jsonrpc":"2.0",' + REMEMBER + b"}",
    ):
        response = await api.client.post("/mcp", content=body, headers=MCP_HEADERS)
        assert 401 == response.status_code, response.text
        assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "", "json"]
)
async def test_an_mcp_body_not_declared_json_gets_a_json_rpc_error(
    api: Api, database: ScratchDatabase, content_type: str | None
) -> None:
    """Without ``Content-Type: application/json`` the SDK answered a plain-text 400 ("Invalid
    Content-Type header", no media type) that a JSON-RPC client cannot read (observed in pass
    L). Now a 415 with a JSON-RPC error naming the header; nothing is done. A token is still
    checked first, and a declared charset is accepted."""
    before = await _count(database)
    body = b'{"jsonrpc":"2.0","id":7,' + REMEMBER + b"}"
    headers = {**api.admin, "Accept": MCP_HEADERS["Accept"]}
    if content_type is not None:
        headers["Content-Type"] = content_type
    response = await api.client.post("/mcp", content=body, headers=headers)
    assert 415 == response.status_code, response.text
    error = response.json()["error"]
    assert (-32600, True) == (error["code"], "Content-Type" in error["message"])
    assert before == await _count(database)
    stranger = {"Accept": MCP_HEADERS["Accept"], "Content-Type": "text/plain"}
    assert 401 == (await api.client.post("/mcp", content=body, headers=stranger)).status_code
    declared = {**api.admin, **MCP_HEADERS, "Content-Type": "application/json; charset=utf-8"}
    listing = b'{"jsonrpc":"2.0","id":8,"method":"tools/list"}'
    assert 200 == (await api.client.post("/mcp", content=listing, headers=declared)).status_code


def test_stdio_answers_a_tools_call_without_an_id_instead_of_dropping_it() -> None:
    """The same over stdio: the SDK dropped a ``tools/call`` line without an id, unanswered
    and undone. ``line_problem`` (what the stdio reader answers before the SDK sees a line)
    refuses it with -32600; a notification still goes through."""
    line = ('{"jsonrpc":"2.0",' + REMEMBER.decode() + "}").strip()
    problem = line_problem(line)
    assert problem is not None
    assert -32600 == problem[0]
    assert "id" in problem[1]
    assert line_problem('{"jsonrpc":"2.0","method":"notifications/initialized"}') is None


@pytest.mark.parametrize(
    "params",
    [
        b'{"name":"remember","arguments":[1,2]}',
        b'{"name":"recall","arguments":"ledger"}',
        b'{"arguments":{"query":"ledger"}}',
        b'{"name":null,"arguments":{}}',
        b"null",
    ],
    ids=["list-arguments", "text-arguments", "no-name", "null-name", "null-params"],
)
async def test_a_tools_call_of_the_wrong_shape_is_refused_with_its_reason(
    api: Api, database: ScratchDatabase, params: bytes
) -> None:
    """A ``tools/call`` whose arguments are not an object, or that names no tool, was
    answered ``-32602 Invalid request parameters`` with empty ``data``: no reason at all.
    The answer now says what is wrong, on both transports, and nothing is written."""
    before = await _count(database)
    body = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":' + params + b"}"
    response = await api.client.post("/mcp", content=body, headers={**api.admin, **MCP_HEADERS})
    error = response.json()["error"]
    assert -32602 == error["code"], error
    assert "arguments" in error["message"] or "name" in error["message"], error
    assert before == await _count(database)
    problem = line_problem(body.decode())
    assert problem is not None
    assert problem[0] == -32602


# --- L2: an in-process request id storage cannot hold escapes as a DatabaseError ------------


#: Request ids no audit row can key: a NUL, a lone surrogate, and one longer than the unique
#: index on (agent, request id) can hold.
UNSTORABLE_IDS = ["retry\x00one", "retry\ud800", "".join(f"{i:x}" for i in range(4000))]


@pytest.mark.parametrize("request_id", UNSTORABLE_IDS, ids=["nul", "surrogate", "long"])
@pytest.mark.parametrize("method", ["remember", "update", "forget"])
async def test_a_request_id_storage_cannot_hold_is_an_audited_rejection_in_process(
    kernel: Kernel, database: ScratchDatabase, method: str, request_id: str
) -> None:
    """AgentSession promises every bad input is an audited rejection, never an exception.
    A request id with a NUL or a lone surrogate reached the audit INSERT (``DatabaseError``,
    which adapters answer as a 500), and one of 15 000 characters was stored whole or broke
    the unique index; MCP and REST bound their ids (128 characters), the session did not. It
    is refused with the reason, one audit row written, nothing else."""
    _, token = await kernel.agents.add("keyed", TrustLevel.STANDARD, writes_per_minute=1000)
    session = AgentSession(kernel, (await kernel.agents.authenticate(token)).caller)
    made = await session.remember({"type": "belief", "content": "The wiki runs on Confluence."})
    assert made.record_id is not None, made.reason
    before = await _count(database)
    change = {"content": "The wiki runs on Notion."}
    try:
        if method == "remember":
            result = await session.remember(
                {"type": "belief", "content": "The CI runners use Ubuntu 24.04."},
                request_id=request_id,
            )
        elif method == "update":
            result = await session.update(
                made.record_id, change, expected_version=1, request_id=request_id
            )
        else:
            result = await session.forget(made.record_id, request_id=request_id)
    except Exception as exc:  # noqa: BLE001 - the finding
        pytest.fail(f"{method} raised {type(exc).__name__}: {str(exc)[:120]}")
    assert "rejected" == result.decision.value
    assert "request_id" in result.reason
    assert (before[0] + 1, before[1]) == await _count(database)


# --- L3: a number longer than the parser converts is "not JSON", and the write unaudited --


@pytest.mark.parametrize("field", ["metadata", "source_confidence"])
@pytest.mark.parametrize("method", ["POST", "PATCH"])
async def test_a_number_too_long_to_read_is_an_audited_rejection_not_a_400(
    api: Api, database: ScratchDatabase, method: str, field: str
) -> None:
    """JSON sets no bound on a number's digits; Python's parser refuses to convert an integer
    of more than 4 300. Such a write body was answered ``400 the body is not valid JSON``
    and left no audit row, though it is well formed, and a body nested past the parser's
    depth (the same kind of limit) is refused and audited (docs/api.md). It is a 422 whose
    schema check says why, audited once, and nothing else changes."""
    writer = await api.agent("digits", TrustLevel.STANDARD)
    made = await api.write({"type": "belief", "content": "The wiki runs on Confluence."}, writer)
    assert 201 == made.status_code, made.text
    number = "7" * 5000
    value = '{"n":' + number + "}" if field == "metadata" else number
    body = '{"content":"The wiki runs on Notion.","' + field + '":' + value + "}"
    headers = {**writer, "Content-Type": "application/json"}
    before = await _count(database)
    if method == "POST":
        body = '{"type":"belief",' + body[1:]
        response = await api.client.post("/v1/memories", content=body, headers=headers)
    else:
        path = f"/v1/memories/{made.json()['record_id']}"
        response = await api.client.patch(
            path, content=body, headers={**headers, "If-Match": '"1"'}
        )
    problem = assert_problem(response, 422)
    assert [c["name"] for c in problem["failed_checks"]] == ["schema"], problem
    assert "digits" in problem["detail"], problem
    assert (before[0] + 1, before[1]) == await _count(database)


# --- L4: concurrent /readyz requests each run the write-path probes ----------------------


async def test_a_concurrent_flood_of_readyz_runs_each_write_path_probe_once(
    database: ScratchDatabase, embedder: FastembedEmbedder
) -> None:
    """``/readyz`` needs no token. Its Gate, audit and backlog probes are cached so that "a
    probe that does real work is not run once per request of an unauthenticated flood"
    (``HealthChecks.add``), but the cache only served requests arriving after a probe ended:
    fifty sent at once each ran the audit probe (an INSERT rolled back, one sequence number
    drawn per request) and the synthetic Gate decision. Requests arriving while a probe runs
    now share its outcome: one sequence number for the fifty."""
    settings = EngramSettings(
        database_url=database.runtime_url, migrate_on_start=False, readiness_cache_seconds=0.5
    )
    seq = "SELECT last_value FROM engram.librarian_audit_seq_seq"
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        app = create_app(kernel=kernel, announce=lambda _: None)
        async with running(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                owner = await asyncpg.connect(database.admin_url)
                try:
                    assert 200 == (await client.get("/readyz")).status_code  # the sequence
                    await asyncio.sleep(0.6)  # has a value; the outcomes are stale again
                    before = await owner.fetchval(seq)
                    answers = await asyncio.gather(*(client.get("/readyz") for _ in range(50)))
                    bad = [a.text for a in answers if a.status_code != 200]
                    assert not bad, (len(bad), [c for c in bad[0].split("},") if "false" in c])
                    assert before + 1 == await owner.fetchval(seq)
                finally:
                    await owner.close()


# --- L5: quarantined records ingested at one instant are skipped by the listing's cursor ----


async def test_the_quarantine_listing_pages_through_records_ingested_at_one_instant(
    api: Api, database: ScratchDatabase
) -> None:
    """``GET /v1/quarantine`` pages by ingestion time alone (``next_cursor`` is the last
    record's, the next page starts after it). Two records quarantined at the same instant
    (two kernels on one database can write in the same microsecond; here the rows are set
    so) straddling a page boundary: the second was never listed, so no admin would review
    it. Every quarantined record appears once, whatever the page size."""
    writer = await api.agent("mailer", TrustLevel.STANDARD, writes_per_minute=1000)
    held = []
    for who in ("ana@example.com", "bo@example.com", "cy@example.com"):
        made = await api.write(
            {"type": "belief", "content": f"The release manager is reachable at {who}."}, writer
        )
        assert "sensitive" == made.json()["record"]["access_level"], made.text
        held.append(made.json()["record_id"])
    owner = await asyncpg.connect(database.admin_url)
    try:
        await owner.execute(
            "UPDATE engram.memories SET ingestion_time = '2026-11-01T09:00:00Z' "
            "WHERE record_id = ANY($1::uuid[])",
            held[:2],
        )
    finally:
        await owner.close()
    for limit in (1, 2):
        seen: list[str] = []
        cursor = None
        for _ in range(10):
            query = f"/v1/quarantine?limit={limit}" + (f"&cursor={cursor}" if cursor else "")
            page = await api.client.get(query.replace("+", "%2B"), headers=api.admin)
            assert 200 == page.status_code, page.text
            seen += [r["record_id"] for r in page.json()["records"]]
            cursor = page.json()["next_cursor"]
            if cursor is None:
                break
        assert sorted(held) == sorted(seen), (limit, seen)


# --- L6: the command line answers odd arguments with a traceback or "infrastructure" --------


def _cli(database: ScratchDatabase, *args: str | bytes) -> subprocess.CompletedProcess[str]:
    """``engram`` against the test's database; bytes arguments go to it as they are (a
    shell passes what the terminal typed, valid UTF-8 or not)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(
        ENGRAM_DATABASE_URL=database.runtime_url,
        ENGRAM_MIGRATE_ON_START="false",
        ENGRAM_LOG_FORMAT="json",
    )
    argv: list[Any] = [os.fsencode(sys.executable), b"-m", b"engram.protocols.cli"]
    argv += [a if isinstance(a, bytes) else a.encode() for a in args]
    done = subprocess.run(  # noqa: S603 - our own CLI
        argv, env=env, capture_output=True, timeout=120, check=False
    )
    return subprocess.CompletedProcess(
        done.args,
        done.returncode,
        done.stdout.decode(errors="replace"),
        done.stderr.decode(errors="replace"),
    )


async def test_an_argument_that_is_not_utf8_is_a_usage_error_not_a_traceback(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Python hands undecodable argv bytes over as lone surrogates. ``audit export --reveal
    --reason`` with one printed a traceback (UnicodeEncodeError while hashing the REVEAL
    row); ``agents rotate`` and ``conflicts ack --by`` exited 5, "the database is failing,
    try again later". Each is a usage error (2) naming the argument, and nothing is audited."""
    await kernel.agents.add("planner", TrustLevel.STANDARD)
    before = await _count(database)
    for args in (
        ["audit", "export", "--reveal", "--reason", b"triage \xff", "--by", "dana"],
        ["audit", "export", "--reveal", "--reason", "triage", "--by", b"d\xe9na"],
        ["agents", "rotate", b"planner\xff"],
        ["conflicts", "ack", "5", "--by", b"\xff"],
    ):
        done = _cli(database, *args)
        assert "Traceback" not in done.stderr, done.stderr[-800:]
        assert 2 == done.returncode, (args, done.stderr[-400:])
        assert "UTF-8" in done.stderr, done.stderr[-400:]
    assert before == await _count(database)


async def test_a_limit_or_a_window_out_of_range_is_a_usage_error(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """``consolidation list --limit -1`` and ``advisor status --limit 10**20`` reached
    PostgreSQL and exited 5 (infrastructure: "try again later"); ``advisor train --days
    1e400`` and ``--days 100000000`` printed a traceback (OverflowError). Each is a usage
    error (2) naming the option."""
    del kernel  # the database is migrated and open
    for args, option in (
        (["consolidation", "list", "--limit", "-1"], "--limit"),
        (["consolidation", "list", "--limit", str(10**20)], "--limit"),
        (["advisor", "status", "--limit", str(10**20)], "--limit"),
        (["advisor", "train", "--days", "1e400"], "--days"),
        (["advisor", "train", "--days", "100000000"], "--days"),
        (["advisor", "train", "--horizon-days", "1e400"], "--horizon-days"),
    ):
        done = _cli(database, *args)
        assert "Traceback" not in done.stderr, done.stderr[-800:]
        assert 2 == done.returncode, (args, done.stderr[-400:])
        assert option in done.stderr, done.stderr[-400:]


async def test_a_by_name_too_long_for_the_audit_log_is_a_usage_error(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """``--by`` names the admin in ``system:cli:<name>``, the audit row's agent. A name of
    6 000 characters broke the audit INSERT (the unique index on agent and request id holds
    no such row) and the command exited 5, "the database is failing". It is a usage error
    naming ``--by``, and nothing is released or audited."""
    _, token = await kernel.agents.add("mailer", TrustLevel.STANDARD, writes_per_minute=1000)
    session = AgentSession(kernel, (await kernel.agents.authenticate(token)).caller)
    held = await session.remember(
        {"type": "belief", "content": "The release manager is reachable at ana@example.com."}
    )
    assert held.record_id is not None, held.reason
    before = await _count(database)
    name = "".join(f"{i:03x}" for i in range(2000))
    for args in (
        ["quarantine", "release", str(held.record_id), "--reason", "a team alias", "--by", name],
        ["audit", "export", "--reveal", "--reason", "a subject access request", "--by", name],
    ):
        done = _cli(database, *args)
        assert "Traceback" not in done.stderr, done.stderr[-800:]
        assert 2 == done.returncode, (args[:2], done.stderr[-400:])
        assert "--by" in done.stderr, done.stderr[-400:]
    assert before == await _count(database)
    assert [held.record_id] == [r.record_id for r in (await kernel.quarantine.pending()).records]


@pytest.mark.parametrize(
    "reason", ["a team\x00alias", "a team alias\ud800"], ids=["nul", "surrogate"]
)
async def test_a_release_or_reveal_reason_storage_cannot_hold_is_a_validation_error(
    kernel: Kernel, database: ScratchDatabase, reason: str
) -> None:
    """``QuarantineDesk.release`` and ``reveal`` (what the CLI and REST admin routes call)
    took a reason with a NUL (``DatabaseError`` at the audit INSERT) or a lone surrogate
    (``UnicodeEncodeError`` while hashing the row: not even an engram error). Each is a
    ``ValidationFailed`` naming the reason; nothing is released or audited."""
    _, token = await kernel.agents.add("mailer", TrustLevel.STANDARD, writes_per_minute=1000)
    session = AgentSession(kernel, (await kernel.agents.authenticate(token)).caller)
    held = await session.remember(
        {"type": "belief", "content": "The release manager is reachable at ana@example.com."}
    )
    assert held.record_id is not None, held.reason
    admin = CallerIdentity.system("cli:dana")
    before = await _count(database)
    with pytest.raises(ValidationFailed, match="reason"):
        await kernel.quarantine.release(held.record_id, admin=admin, reason=reason)
    with pytest.raises(ValidationFailed, match="reason"):
        await kernel.quarantine.reveal(admin=admin, shown="a test", reason=reason)
    assert before == await _count(database)
    assert [held.record_id] == [r.record_id for r in (await kernel.quarantine.pending()).records]


#: Anchor files that are not what ``audit checkpoint --json`` or ``audit export`` write.
_CHECKPOINT = (
    '"sealed_at":"2026-01-01T00:00:00+00:00","through_seq":1,"rows_sealed":1,"lane_seqs":[],'
    '"lane_hashes":[],"order_digest":"00","prev_hash":"00","checkpoint_hash":"00"'
)
MALFORMED_ANCHORS = {
    "nested": "[" * 100_000 + "]" * 100_000,
    "infinite-id": '{"checkpoint":{"id":1e400,' + _CHECKPOINT + "}}",
    "list-seq": '{"lane_heads":[{"lane":0,"last_seq":[1],"last_hash":"00"}]}',
    "text-seq": '{"lane_heads":[{"lane":0,"last_seq":"x","last_hash":"00"}]}',
    "negative-lane": '{"lane_heads":[{"lane":-5,"last_seq":1.5,"last_hash":"00"}]}',
}


async def test_a_malformed_anchor_or_policy_file_is_refused_not_a_traceback(
    kernel: Kernel, database: ScratchDatabase, tmp_path: Path
) -> None:
    """``audit verify --anchor`` printed a traceback for an anchor nested too deeply
    (RecursionError), with an id of 1e400 (OverflowError) or a list as a row number
    (TypeError), and reported a text row number or a negative lane as TAMPERING (exit 6):
    the anchor was malformed, the log was fine. ``audit replay --policy`` printed a traceback
    for a policy nested too deeply. Each is refused: an anchor with exit 2, a policy with 4
    (docs/cli.md)."""
    del kernel  # the database is migrated and open
    cases: list[tuple[list[str], int]] = []
    for name, text in MALFORMED_ANCHORS.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        cases.append((["audit", "verify", "--anchor", str(path)], 2))
    for name, text in (
        ("deep.json", "[" * 100_000 + "]" * 100_000),
        ("deep.toml", "a = " + "[" * 100_000 + "]" * 100_000),
    ):
        path = tmp_path / name
        path.write_text(text)
        cases.append((["audit", "replay", "--policy", str(path)], 4))
    for args, code in cases:
        done = _cli(database, *args)
        assert "Traceback" not in done.stderr, (args[-1], done.stderr[-600:])
        assert code == done.returncode, (args[-1], done.stdout[-300:], done.stderr[-300:])
