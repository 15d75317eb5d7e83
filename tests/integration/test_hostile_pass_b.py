"""Hostile review, pass B: inputs and faults the earlier hostile suites do not reach.

Every test here failed on the code it was written against (see the report of pass B). Real
embedded PostgreSQL, the real embedding model, no mocks.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from engram import Kernel
from engram.agents.registry import AgentRegistry
from engram.infra.postgres import PostgresDatabase
from engram.infra.resilience import CircuitBreaker, Resilience
from engram.memory.types import AccessLevel, TrustLevel
from engram.protocols.inprocess import AgentSession
from tests.conftest import ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.test_http_api import Api
from tests.integration.test_http_fuzz import _count

#: The first and last instants UTC has. asyncpg writes exactly these two as PostgreSQL's
#: ``-infinity`` / ``infinity`` and reads those back as *naive* datetimes.
FIRST_INSTANT = "0001-01-01T00:00:00Z"
LAST_INSTANT = "9999-12-31T23:59:59.999999Z"


#: The REST app on the test's kernel and the first admin's headers (test_http_api's fixture).
api = http_api.api


# --- F1: event_time at the edges of UTC is stored as +/-infinity and read back naive --------


@pytest.mark.parametrize("instant", [LAST_INSTANT, FIRST_INSTANT], ids=["last", "first"])
async def test_an_event_time_at_the_edge_of_utc_is_a_typed_rejection(
    api: Api, database: ScratchDatabase, instant: str
) -> None:
    """asyncpg writes exactly these two instants as PostgreSQL's ``infinity`` /
    ``-infinity`` and reads them back without a zone; they were stored and broke other
    agents' writes, consolidation and the CLI. They are refused, audited, nothing stored."""
    body = {
        "type": "episode",
        "content": "The vault flooded and the backup tapes were lost.",
        "event_time": instant,
    }
    before = await _count(database)
    created = await api.client.post("/v1/memories", json=body, headers=api.admin)
    assert 422 == created.status_code, created.text
    assert "reserved" in created.text
    after = await _count(database)
    assert (before[0] + 1, before[1]) == after


async def _stored_at_infinity(database: ScratchDatabase, content: str, which: str) -> None:
    """A row whose event_time the database holds as ``infinity`` or ``-infinity`` (no write
    makes one now; rows written before the check may hold one)."""
    conn = await asyncpg.connect(database.admin_url)
    try:
        done = await conn.execute(
            f"UPDATE engram.memories SET event_time = '{which}' WHERE content = $1", content
        )
        assert done.endswith(" 1"), done
    finally:
        await conn.close()


@pytest.mark.parametrize("which", ["infinity", "-infinity"])
async def test_an_episode_near_one_at_infinity_is_decided_not_a_500(
    api: Api, database: ScratchDatabase, which: str
) -> None:
    """One stored episode's event_time is PostgreSQL's (-)infinity; another agent's ordinary
    episode on the same subject was a 500 (naive minus aware in conflict detection),
    unaudited. Any write must be decided, and the stored one reads back with its zone."""
    content = "The vault flooded and the backup tapes were lost."
    edge = {"type": "episode", "content": content, "event_time": "2026-10-01T10:00:00Z"}
    created = await api.client.post("/v1/memories", json=edge, headers=api.admin)
    assert 201 == created.status_code, created.text
    await _stored_at_infinity(database, content, which)
    read = await api.client.get(f"/v1/memories/{created.json()['record_id']}", headers=api.admin)
    assert datetime.fromisoformat(read.json()["event_time"]).tzinfo is not None
    other = await api.agent("bystander", TrustLevel.STANDARD)
    before = await _count(database)
    ordinary = {
        "type": "episode",
        "content": "The vault flooded and all of the backup tapes were lost.",
        "event_time": "2026-11-01T10:00:00Z",
    }
    response = await api.client.post("/v1/memories", json=ordinary, headers=other)
    assert response.status_code < 500, response.text
    assert before[0] + 1 == (await _count(database))[0], "the decision was not audited"


async def test_one_record_at_infinity_does_not_stop_consolidation(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A record whose event_time the database holds as infinity made every consolidation pass
    fail with a TypeError (deep, light and event-driven alike), for the whole database."""
    _, token = await kernel.agents.add("edge-writer", TrustLevel.STANDARD, writes_per_minute=1000)
    session = AgentSession(kernel, (await kernel.agents.authenticate(token)).caller)
    contents = [f"The archive runs on tape in vault {n}." for n in ("one", "two", "three", "four")]
    for content in contents:
        result = await session.remember({"type": "belief", "content": content})
        assert result.record_id is not None, result.reason
    await _stored_at_infinity(database, contents[0], "infinity")
    await _stored_at_infinity(database, contents[1], "-infinity")
    outcome = await kernel.scheduler.run_now("consolidation_deep")
    assert "failed" != outcome.outcome, outcome.detail


# --- F2: classification is free text that PII screening never reads, and unbounded --------


async def test_pii_in_classification_is_screened_like_content(api: Api) -> None:
    """An email address and a US SSN in ``classification`` are stored at level ``agent`` and
    shown to every reader: the PII check reads content and metadata only. The same text in
    content is quarantined."""
    writer = await api.agent("labeller", TrustLevel.STANDARD)
    body = {
        "type": "belief",
        "content": "The payroll export runs every Friday at noon.",
        "classification": "owner jane.doe@example.com ssn 078-05-1120",
    }
    created = await api.client.post("/v1/memories", json=body, headers=writer)
    assert created.status_code in (200, 201), created.text
    record = created.json()["record"]
    assert AccessLevel.SENSITIVE.value == record["access_level"], (
        "PII in classification was stored readable at level "
        f"{record['access_level']!r}: {record['classification']!r}"
    )


async def test_classification_is_bounded_like_every_other_text_field(
    api: Api, database: ScratchDatabase
) -> None:
    """Content stops at 16 000 characters, metadata at 16 KiB, namespace at 64, tags at 64:
    ``classification`` has no bound, so 200 000 characters of it are stored, embedded into no
    vector, and returned on every read and search hit."""
    before = await _count(database)
    body = {
        "type": "belief",
        "content": "The payroll export runs every Friday at noon.",
        "classification": "x" * 200_000,
    }
    response = await api.client.post("/v1/memories", json=body, headers=api.admin)
    assert 422 == response.status_code, f"{response.status_code}: stored a 200 000-character label"
    assert (before[0] + 1, before[1]) == await _count(database)


# --- F3: the CLI calls a bad instant or id an infrastructure failure (exit 5) --------------


#: cli.md: 2 is bad usage (a malformed time or id), 3 not found, 5 infrastructure (retry).
BAD_USAGE, NOT_FOUND, INFRASTRUCTURE = 2, 3, 5


def _cli(database: ScratchDatabase, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(
        ENGRAM_DATABASE_URL=database.runtime_url,
        ENGRAM_MIGRATE_ON_START="false",
        ENGRAM_LOG_FORMAT="json",
    )
    return subprocess.run(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "engram.protocols.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


BEYOND_UTC = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"]


@pytest.mark.parametrize("instant", BEYOND_UTC, ids=["before-year-1", "after-year-9999"])
@pytest.mark.parametrize(
    "command",
    [
        ["memories", "get", "00000000-0000-0000-0000-000000000000", "--as-of-ingestion"],
        ["audit", "export", "--since"],
        ["audit", "state", "--as-of"],
    ],
    ids=["memories-get", "audit-export", "audit-state"],
)
def test_cli_instant_with_no_utc_form_is_bad_usage_not_an_outage(
    database: ScratchDatabase, command: list[str], instant: str
) -> None:
    """REST and MCP refuse an instant with no UTC form as invalid input; the CLI hands it to
    PostgreSQL, and asyncpg's DataError is reported as an infrastructure failure (exit 5:
    "try again later"), its message quoting the query argument."""
    done = _cli(database, *command, instant)
    assert "Traceback" not in done.stderr, done.stderr
    assert BAD_USAGE == done.returncode, (done.returncode, done.stderr[-400:])
    assert "query argument" not in done.stderr, done.stderr[-400:]


def test_cli_conflicts_ack_of_an_id_out_of_range_is_not_an_outage(
    database: ScratchDatabase,
) -> None:
    """`engram conflicts ack 99999999999999999999` exits 5 (the database is failing) with
    asyncpg's message; it is a malformed id (2) or an unknown escalation (3)."""
    done = _cli(database, "conflicts", "ack", "99999999999999999999", "--by", "dana")
    assert done.returncode in (BAD_USAGE, NOT_FOUND), (done.returncode, done.stderr[-400:])


# --- F4: /mcp over HTTP: a GET opens an endless event stream; a malformed id drops a write --


_MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def test_a_get_on_mcp_is_answered_not_held_open_forever(api: Api) -> None:
    """docs/mcp.md: the endpoint is stateless, "no sessions, no server-sent events". A GET
    with ``Accept: text/event-stream`` opens an SSE stream that never sends an event and never
    ends; any authenticated agent (read_only included) can hold one file descriptor and a
    task per GET for as long as it likes (500 streams: +500 fds on `engram serve`)."""
    reader = await api.agent("idle-reader", TrustLevel.READ_ONLY)
    headers = {**reader, "Accept": "text/event-stream"}
    try:
        response = await asyncio.wait_for(api.client.get("/mcp", headers=headers), timeout=5)
    except TimeoutError:
        pytest.fail("GET /mcp was still open after 5 s (an endless event stream)")
    assert 405 == response.status_code, response.text


@pytest.mark.parametrize("bad_id", [b"1.5", b"NaN", b'{"a":1}', b"true"])
async def test_a_tools_call_with_a_malformed_jsonrpc_id_is_refused_not_silently_dropped(
    api: Api, database: ScratchDatabase, bad_id: bytes
) -> None:
    """A ``tools/call`` whose JSON-RPC id is not a string or an integer is answered
    ``202 Accepted`` with no body: the MCP SDK reads it as a notification, so the write is
    neither done nor refused nor audited, and the client is told it was accepted."""
    before = await _count(database)
    body = (
        b'{"jsonrpc":"2.0","id":' + bad_id + b',"method":"tools/call","params":{"name":"remember",'
        b'"arguments":{"type":"belief","content":"The release train leaves every Tuesday."}}}'
    )
    response = await api.client.post("/mcp", content=body, headers={**api.admin, **_MCP_HEADERS})
    assert 202 != response.status_code, "a tools/call was accepted and silently dropped"
    assert 400 <= response.status_code < 500 or "error" in response.json(), response.text
    assert before[1] == (await _count(database))[1]


# --- F5: the in-process session lets a record id that is not a UUID escape as an exception --


@pytest.mark.parametrize("bad_id", ["not-a-uuid", 5], ids=["text", "int"])
@pytest.mark.parametrize("method", ["forget", "amend", "update"])
async def test_a_record_id_that_is_not_a_uuid_is_an_audited_rejection_in_process(
    kernel: Kernel, database: ScratchDatabase, method: str, bad_id: object
) -> None:
    """AgentSession promises "every bad input, a payload of the wrong Python type included, is
    an audited rejection, never an exception". A record id that is not a UUID reaches asyncpg
    (forget, amend: ``DatabaseError``, which adapters map to *infrastructure*) or pydantic
    (update: ``ValidationError``)."""
    _, token = await kernel.agents.add("sloppy", TrustLevel.STANDARD, writes_per_minute=1000)
    session = AgentSession(kernel, (await kernel.agents.authenticate(token)).caller)
    before = await _count(database)
    change = {"type": "belief", "content": "The sloppy caller's host runs Debian."}
    try:
        if method == "forget":
            result = await session.forget(bad_id)  # type: ignore[arg-type]
        elif method == "amend":
            result = await session.amend(bad_id, change, expected_version=1)  # type: ignore[arg-type]
        else:
            result = await session.update(bad_id, change, expected_version=1)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - the finding
        pytest.fail(f"{method}({bad_id!r}) raised {type(exc).__name__}, not a rejection")
    assert "rejected" == result.decision.value
    assert (before[0] + 1, before[1]) == await _count(database)


async def test_cli_history_of_a_record_at_the_first_instant_is_not_a_traceback(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """F1 seen from the CLI: an event_time the database holds as -infinity comes back naive,
    and the table's ``when()`` called ``astimezone`` on it: `engram memories history` printed
    a traceback (ValueError: year 0 is out of range) and exited 1."""
    _, token = await kernel.agents.add("historian", TrustLevel.STANDARD, writes_per_minute=1000)
    session = AgentSession(kernel, (await kernel.agents.authenticate(token)).caller)
    content = "The archive service runs on tape robots."
    made = await session.remember({"type": "belief", "content": content})
    assert made.record_id is not None, made.reason
    await _stored_at_infinity(database, content, "-infinity")
    for command in (["memories", "history"], ["memories", "get"]):
        done = _cli(database, *command, str(made.record_id))
        assert "Traceback" not in done.stderr, done.stderr[-600:]
        assert "Error" not in done.stderr, done.stderr[-600:]
        assert 0 == done.returncode, done.stderr[-600:]


# --- F6: a quarantine release is not pinned to the version the admin reviewed -------------


async def test_a_release_does_not_publish_a_version_the_admin_never_reviewed(api: Api) -> None:
    """The admin lists the quarantine and sees version 1 (a shared email address); the
    trusted writer then amends it to version 2 holding a card number (quarantined again); the
    admin's release, sent with ``If-Match: "1"``, releases version 2, and every standard agent
    now reads the card number. The release takes no version: If-Match is ignored and
    the CLI has no way to name one."""
    writer = await api.agent("trusted-writer", TrustLevel.TRUSTED)
    made = await api.client.post(
        "/v1/memories",
        json={"type": "belief", "content": "The release contact is ana@example.com."},
        headers=writer,
    )
    record_id = made.json()["record_id"]
    listed = (await api.client.get("/v1/quarantine", headers=api.admin)).json()["records"]
    assert [(record_id, 1)] == [(r["record_id"], r["version"]) for r in listed]
    changed = await api.client.patch(
        f"/v1/memories/{record_id}",
        json={"content": "The release contact has SSN 078-05-1120 and card 4111 1111 1111 1111."},
        headers={**writer, "If-Match": '"1"'},
    )
    assert 200 == changed.status_code, changed.text
    assert "sensitive" == changed.json()["record"]["access_level"]

    released = await api.client.post(
        f"/v1/quarantine/{record_id}/release",
        json={"reason": "a shared team address, not personal"},
        headers={**api.admin, "If-Match": '"1"'},
    )
    reader = await api.agent("ordinary-reader", TrustLevel.STANDARD)
    seen = await api.client.get(f"/v1/memories/{record_id}", headers=reader)
    assert "4111 1111 1111 1111" not in seen.text, "unreviewed PII was published by the release"
    assert 409 == released.status_code, released.text


# --- F7: feedback: any agent writes rows without limit, and REST takes non-ASCII signals ----


async def test_feedback_is_rate_limited_like_every_other_write(
    api: Api, database: ScratchDatabase
) -> None:
    """A ``read_only`` agent (whose rate is zero: "this agent may not write") stores 300
    feedback rows in a row, unthrottled and unaudited; each useful one also counts as a read
    (slowing decay) and every 500 rows start an advisor training run
    (``advisor_train_pressure``). Feedback should draw on the agent's token bucket."""
    made = await api.write(
        {"type": "belief", "content": "The on-call rota lives in PagerDuty."}, api.admin
    )
    record_id = made.json()["record_id"]
    reader = await api.agent("rating-bot", TrustLevel.READ_ONLY)
    statuses = []
    for _ in range(300):
        answer = await api.client.post(
            "/v1/feedback", json={"record_id": record_id, "useful": True}, headers=reader
        )
        statuses.append(answer.status_code)
    conn = await asyncpg.connect(database.admin_url)
    try:
        stored = await conn.fetchval("SELECT count(*) FROM engram.memory_feedback")
    finally:
        await conn.close()
    assert any(status in (403, 429) for status in statuses), f"{stored} feedback rows stored"


@pytest.mark.parametrize(
    "signal",
    ["\uff45\uff58\uff50\uff4c\uff49\uff43\uff49\uff54", "stra\u00dfe", "caf\u00e9", "\u00b5"],
    ids=["fullwidth-explicit", "sharp-s", "e-acute", "micro-sign"],
)
async def test_a_non_ascii_feedback_signal_is_a_422_not_a_500(api: Api, signal: str) -> None:
    """REST checks ``signal`` with ``isalpha()`` and ``islower()``, which fullwidth and other
    non-ASCII lower-case letters pass (MCP uses ``^[a-z_]+$``); the table's CHECK
    (``^[a-z_]{1,32}$``) then refuses the INSERT and the answer is a 500 ``internal``."""
    made = await api.write(
        {"type": "belief", "content": "The status page is hosted on Statuspage."}, api.admin
    )
    body = {"record_id": made.json()["record_id"], "useful": True, "signal": signal}
    answer = await api.client.post("/v1/feedback", json=body, headers=api.admin)
    assert 422 == answer.status_code, answer.text


# --- F8: REST admin reads show quarantined PII with no REVEAL row (the CLI hides it) ------


@pytest.mark.parametrize("path", ["/v1/quarantine", "/v1/audit"])
async def test_rest_admin_reads_of_quarantined_pii_are_redacted_or_audited(
    api: Api, database: ScratchDatabase, path: str
) -> None:
    """cli.md: `quarantine list` and `audit export` leave out the content of records the PII
    check flagged unless ``--reveal --reason``, which first appends a REVEAL audit row. Over
    REST the same admin reads return the card number in clear and append nothing; the first agent
    (``local``, an admin) is the token people paste into curl and MCP clients."""
    writer = await api.agent("hr-bot", TrustLevel.STANDARD)
    made = await api.client.post(
        "/v1/memories",
        json={"type": "belief", "content": "Dana's card number is 4111 1111 1111 1111."},
        headers=writer,
    )
    assert "sensitive" == made.json()["record"]["access_level"], made.text
    before = await _count(database)
    listed = await api.client.get(path, headers=api.admin)
    assert 200 == listed.status_code, listed.text
    revealed = "4111 1111 1111 1111" in listed.text
    audited = (await _count(database))[0] > before[0]
    assert not revealed or audited, f"{path} showed the card number without a REVEAL row"


# --- F9: PII screening reads raw code points: Unicode look-alikes walk past it -------------


@pytest.mark.parametrize(
    "content",
    [
        "The corporate card is 4111\u00a01111\u00a01111\u00a01111.",  # no-break spaces
        "The corporate card is " + "".join(chr(0xFF10 + int(d)) for d in "4111111111111111") + ".",
        "Dana's SSN is 536\u201122\u20118145.",  # non-breaking hyphens
        "Payroll questions go to dana.fox\uff20example.com.",  # fullwidth commercial at
        "Payroll questions go to dana.fox@example\u200b.com.",  # zero-width space in the domain
    ],
    ids=["card-nbsp", "card-fullwidth", "ssn-nb-hyphen", "email-fullwidth-at", "email-zwsp"],
)
async def test_pii_written_with_unicode_look_alikes_is_still_quarantined(
    api: Api, content: str
) -> None:
    """The same card number, SSN or address with ASCII separators is quarantined; with
    no-break spaces, fullwidth digits, non-breaking hyphens, a fullwidth ``@`` or a
    zero-width space (text pasted from a word processor or a chat client) it is stored at
    ``agent`` and every reader sees it. Screening should read an NFKC-folded copy with
    format characters removed."""
    writer = await api.agent("paster", TrustLevel.STANDARD)
    made = await api.client.post(
        "/v1/memories", json={"type": "belief", "content": content}, headers=writer
    )
    assert made.status_code in (200, 201), made.text
    assert "sensitive" == made.json()["record"]["access_level"], "PII stored readable"


# --- F10: `engram mcp` (stdio) answers nothing to a line it cannot parse ---------------------

_INIT = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{},"clientInfo":{"name":"hostile","version":"1"}}}\n'
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
)


def start_stdio_mcp(
    database: ScratchDatabase, model_dir: Path, agent: str, stdin: Any = subprocess.PIPE
) -> subprocess.Popen[bytes]:
    """`engram mcp` over stdio, in a process of its own, for a new standard agent ``agent``
    of ``database`` (its stdout piped, its stdin too unless given)."""

    async def token() -> str:
        db = await PostgresDatabase.connect(
            database.runtime_url, resilience=Resilience(CircuitBreaker("postgres")), min_size=1
        )
        try:
            return (await AgentRegistry(db).add(agent, TrustLevel.STANDARD))[1]
        finally:
            await db.close()

    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    env.update(
        ENGRAM_DATABASE_URL=database.runtime_url,
        ENGRAM_MIGRATE_ON_START="false",
        ENGRAM_LOG_FORMAT="json",
        ENGRAM_EMBEDDING_MODEL_PATH=str(model_dir),
        ENGRAM_AGENT_TOKEN=asyncio.run(token()),
    )
    return subprocess.Popen(
        [sys.executable, "-m", "engram.protocols.cli", "mcp"],
        env=env,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    "line",
    [
        (
            b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"remember",'
            b'"arguments":{"type":"belief","content":"a\\ud800b"}}}'
        ),
        b"this is not json",
        (
            b'{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"remember",'
            b'"arguments":{"type":"belief","content":"The stdio host runs Alpine Linux."}}}'
        ),
    ],
    ids=["lone-surrogate", "not-json", "float-id"],
)
def test_stdio_mcp_answers_every_line_it_cannot_take(
    database: ScratchDatabase, model_dir: Any, line: bytes
) -> None:
    """docs/mcp.md: "on either transport, JSON text with a lone-surrogate escape is refused
    by the MCP SDK's parser as a JSON-RPC parse error (-32700)". Over stdio nothing at all is
    answered for such a line (nor for text that is not JSON, nor for a float id): the client
    waits for its response forever."""

    process = start_stdio_mcp(database, model_dir, "stdio-client")
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(_INIT + line + b'\n{"jsonrpc":"2.0","id":9,"method":"tools/list"}\n')
    process.stdin.flush()
    answers: list[dict[str, Any]] = []
    reader = threading.Thread(
        target=lambda: answers.extend(json.loads(raw) for raw in process.stdout or ()),
        daemon=True,
    )
    reader.start()
    deadline = time.monotonic() + 90
    while 9 not in [a.get("id") for a in answers] and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # anything answered to the odd line comes before tools/list's answer
    process.stdin.close()
    process.wait(30)
    reader.join(10)
    process.stdout.close()
    assert 9 in [a.get("id") for a in answers], "tools/list was never answered"
    errors = [a for a in answers if "error" in a]
    assert errors, f"no answer to the line at all: ids answered {[a.get('id') for a in answers]}"
