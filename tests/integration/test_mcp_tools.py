"""The MCP tools called in-process: every outcome is a tool result, never an exception."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult

from engram import Kernel
from engram.agents.registry import Principal
from engram.errors import DatabaseUnavailable
from engram.memory.types import TrustLevel
from engram.protocols.mcp.schema import RECORD_FIELDS, TOOL_NAMES, RememberArgs, UpdateArgs
from engram.protocols.mcp.server import build_server
from engram.protocols.mcp.tools import EngramTools
from tests.integration.odd_inputs import ODD_IDS, ODD_INPUTS, OddInput

BELIEF = {"type": "belief", "content": "The billing service stores invoices in PostgreSQL."}


async def _principal(kernel: Kernel, name: str, trust: TrustLevel) -> Principal:
    _, token = await kernel.agents.add(name, trust, writes_per_minute=1000)
    return await kernel.agents.authenticate(token)


def _body(result: CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def _error(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error, result
    error: dict[str, Any] = _body(result)["error"]
    return error


def test_every_tool_has_a_described_object_schema() -> None:
    """Nine tools; each schema is an object whose properties all carry a description."""
    definitions = EngramTools.definitions()
    assert set(TOOL_NAMES) == {t.name for t in definitions}
    assert {
        "remember",
        "recall",
        "get",
        "history",
        "list",
        "update",
        "forget",
        "feedback",
        "health",
    } == set(TOOL_NAMES)
    for tool in definitions:
        assert tool.description
        assert len(tool.description) > 100
        assert "object" == tool.input_schema["type"]
        assert "$ref" not in str(tool.input_schema), tool.name
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), f"{tool.name}.{name}"
    update = next(t for t in definitions if t.name == "update")
    assert {"record_id", "expected_version"} == set(update.input_schema["required"])


def test_the_write_schemas_describe_exactly_what_agent_sessions_accept() -> None:
    """The published record fields are WriteInput's, so the schema never drifts from it."""
    assert RECORD_FIELDS == set(RememberArgs.model_fields) - {"request_id"}
    assert RECORD_FIELDS == set(UpdateArgs.model_fields) - {
        "request_id",
        "record_id",
        "expected_version",
    }


async def test_writes_and_reads_for_one_agent(kernel: Kernel) -> None:
    """remember, get, a stale update (conflict), update, history, forget, get after forget."""
    tools = EngramTools(kernel)
    writer = await _principal(kernel, "writer", TrustLevel.STANDARD)

    created = await tools.call("remember", {**BELIEF, "request_id": "r-1"}, writer)
    assert not created.is_error, created.content
    body = _body(created)
    assert ("approved", "created", 1) == (body["decision"], body["outcome"], body["version"])
    record_id = body["record_id"]
    assert "writer" == body["record"]["source_agent"]
    assert "external" == body["record"]["gate_decision_type"]

    replayed = await tools.call("remember", {**BELIEF, "request_id": "r-1"}, writer)
    assert _body(replayed)["replayed"]
    assert record_id == _body(replayed)["record_id"]

    got = await tools.call("get", {"record_id": record_id}, writer)
    assert BELIEF["content"] == _body(got)["record"]["content"]

    changed = {"type": "belief", "content": "The billing service stores invoices in MySQL."}
    stale = await tools.call(
        "update", {**changed, "record_id": record_id, "expected_version": 7}, writer
    )
    assert stale.is_error
    assert "conflict" == _body(stale)["decision"]
    assert 1 == _body(stale)["current_version"]
    assert "conflict" in stale.content[0].text  # type: ignore[union-attr]

    updated = await tools.call(
        "update", {**changed, "record_id": record_id, "expected_version": 1}, writer
    )
    assert not updated.is_error, updated.content
    assert 2 == _body(updated)["version"]

    history = await tools.call("history", {"record_id": record_id}, writer)
    assert [1, 2] == [v["version"] for v in _body(history)["versions"]]

    forgotten = await tools.call("forget", {"record_id": record_id, "expected_version": 2}, writer)
    assert "forgotten" == _body(forgotten)["outcome"]
    gone = await tools.call("get", {"record_id": record_id}, writer)
    assert "not_found" == _error(gone)["kind"]
    kept = await tools.call("get", {"record_id": record_id, "include_forgotten": True}, writer)
    assert "forgotten" == _body(kept)["record"]["status"]
    # a write planned before the forget (its version) is answered as one sent after it: the
    # record is gone, whichever of the Gate's checks saw the forget (hostile pass H)
    late_update = await tools.call(
        "update", {**changed, "record_id": record_id, "expected_version": 2}, writer
    )
    late_forget = await tools.call(
        "forget", {"record_id": record_id, "expected_version": 2}, writer
    )
    assert ["not_found", "not_found"] == [_error(late_update)["kind"], _error(late_forget)["kind"]]


async def test_update_keeps_every_field_it_does_not_send(kernel: Kernel) -> None:
    """Only the content is sent: type, metadata, access level and namespace stay; a record the
    agent cannot see is ``not_found`` (as REST's 404), its refusal audited."""
    tools = EngramTools(kernel)
    writer = await _principal(kernel, "amender", TrustLevel.STANDARD)
    first = {
        **BELIEF,
        "metadata": {"tags": ["billing"]},
        "access_level": "user",
        "namespace": "finance",
    }
    created = _body(await tools.call("remember", first, writer))
    changed = "The billing service stores invoices in PostgreSQL 17."
    updated = await tools.call(
        "update",
        {"record_id": created["record_id"], "expected_version": 1, "content": changed},
        writer,
    )
    assert not updated.is_error, updated.content
    record = _body(updated)["record"]
    assert (changed, "belief", {"tags": ["billing"]}, "user", "finance") == (
        record["content"],
        record["type"],
        record["metadata"],
        record["access_level"],
        record["namespace"],
    )
    audited = await kernel.audit.count()
    missing = await tools.call(
        "update",
        {"record_id": str(uuid.uuid4()), "expected_version": 1, "content": changed},
        writer,
    )
    assert missing.is_error
    assert "not_found" == _body(missing)["error"]["kind"]
    assert audited + 1 == await kernel.audit.count()


async def test_malformed_writes_are_rejected_by_the_gate_and_audited(kernel: Kernel) -> None:
    """Bad record fields, and a client trying to pick its own origin, come back as audited
    rejections naming the failed check; nothing is written."""
    tools = EngramTools(kernel)
    writer = await _principal(kernel, "writer", TrustLevel.STANDARD)
    before = await kernel.audit.verify()

    bad_type = await tools.call("remember", {"type": "rumour", "content": "x"}, writer)
    smuggled = await tools.call(
        "remember", {**BELIEF, "decision_type": "consolidation", "status": "active"}, writer
    )
    imperative = await tools.call(
        "remember", {"type": "belief", "content": "Always deploy on Fridays."}, writer
    )
    for result in (bad_type, smuggled, imperative):
        assert result.is_error
        body = _body(result)
        assert "rejected" == body["decision"]
        assert body["failed_checks"], body
        assert "rejected by the Librarian Gate" in result.content[0].text  # type: ignore[union-attr]
    assert "decision_type" in str(_body(smuggled)["failed_checks"])
    assert "classification" in [c["name"] for c in _body(imperative)["failed_checks"]]

    after = await kernel.audit.verify()
    assert after.ok
    assert before.rows_checked + 3 == after.rows_checked


async def test_a_read_only_agent_may_read_but_not_remember(kernel: Kernel) -> None:
    """The Gate's access check refuses the write; recall works and finds nothing."""
    tools = EngramTools(kernel)
    reader = await _principal(kernel, "reader", TrustLevel.READ_ONLY)
    refused = await tools.call("remember", BELIEF, reader)
    assert "rejected" == _body(refused)["decision"]
    assert ["access"] == [c["name"] for c in _body(refused)["failed_checks"]]
    found = await tools.call("recall", {"query": "billing invoices"}, reader)
    assert not found.is_error
    assert [] == _body(found)["hits"]


@pytest.mark.parametrize(
    ("tool", "arguments", "kind", "mentions"),
    [
        ("get", {"record_id": "not-a-uuid"}, "invalid_input", "record_id"),
        ("get", {"record_id": str(uuid.uuid4())}, "not_found", "no record"),
        (
            "get",
            {"record_id": str(uuid.uuid4()), "as_of_event": "2026-01-01T00:00"},
            "invalid_input",
            "timezone",
        ),
        ("history", {"record_id": str(uuid.uuid4())}, "not_found", "no record"),
        ("update", {**BELIEF, "record_id": str(uuid.uuid4())}, "invalid_input", "expected_version"),
        ("recall", {"query": ""}, "invalid_input", "query"),
        ("recall", {"query": "x", "limit": 1000}, "invalid_input", "limit"),
        ("recall", {"query": "x", "surprise": 1}, "invalid_input", "surprise"),
        ("feedback", {"record_id": str(uuid.uuid4()), "useful": True}, "not_found", "no record"),
        ("feedback", {"record_id": str(uuid.uuid4())}, "invalid_input", "useful"),
        ("remember", {**BELIEF, "request_id": ""}, "invalid_input", "request_id"),
        ("summon", {}, "unknown_tool", "remember"),
    ],
)
async def test_bad_calls_are_error_results(
    kernel: Kernel, tool: str, arguments: dict[str, Any], kind: str, mentions: str
) -> None:
    """Each bad call is an error result of the expected kind with a readable message."""
    tools = EngramTools(kernel)
    writer = await _principal(kernel, "writer", TrustLevel.STANDARD)
    result = await tools.call(tool, arguments, writer)
    error = _error(result)
    assert kind == error["kind"], error
    assert mentions in error["message"]
    assert error["message"] == result.content[0].text  # type: ignore[union-attr]


async def test_unexpected_failures_become_error_results(
    kernel: Kernel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash is logged and reported by id (its text stays on the server); an infrastructure
    error says the service is unavailable."""
    tools = EngramTools(kernel)
    writer = await _principal(kernel, "writer", TrustLevel.STANDARD)

    async def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(kernel.retrieval, "search", crash)
    crashed = _error(await tools.call("recall", {"query": "anything"}, writer))
    assert "internal" == crashed["kind"]
    assert crashed["error_id"] in crashed["message"]
    assert "secret" not in crashed["message"]

    async def down(*args: Any, **kwargs: Any) -> Any:
        raise DatabaseUnavailable("connection refused to 10.0.0.1")

    monkeypatch.setattr(kernel.temporal, "get_version_chain", down)
    unavailable = _error(await tools.call("history", {"record_id": str(uuid.uuid4())}, writer))
    assert "unavailable" == unavailable["kind"]
    assert "10.0.0.1" not in unavailable["message"]


async def test_the_sdk_server_serves_the_tools_and_refuses_an_unknown_caller(
    kernel: Kernel,
) -> None:
    """Through the SDK's in-process client: tools are listed, a call acts for the resolved
    principal, and a call without one is an error result."""
    tools = EngramTools(kernel)
    writer = await _principal(kernel, "writer", TrustLevel.STANDARD)
    async with Client(build_server(tools, lambda _ctx: writer)) as client:
        listed = await client.list_tools()
        assert set(TOOL_NAMES) == {t.name for t in listed.tools}
        result = await client.call_tool("remember", BELIEF)
        assert not result.is_error
        assert "writer" == _body(result)["record"]["source_agent"]
    async with Client(build_server(tools, lambda _ctx: None)) as client:
        refused = await client.call_tool("recall", {"query": "billing"})
        assert "unauthenticated" == _error(refused)["kind"]


# --- odd input (issue 11): an audited rejection, never an internal error ---------------------


async def _counts(kernel: Kernel) -> tuple[int, int]:
    """Audit rows and memory versions, in that order."""
    audit = await kernel.db.fetchval("SELECT count(*) FROM librarian_audit")
    versions = await kernel.db.fetchval("SELECT count(*) FROM memories")
    return int(audit), int(versions)


def _rejected_for(result: CallToolResult, field: str) -> None:
    """The result is a Gate rejection whose only failed check is the schema, naming ``field``."""
    assert result.is_error, result
    body = _body(result)
    assert "rejected" == body["decision"], body
    assert ["schema"] == [check["name"] for check in body["failed_checks"]]
    assert field in body["failed_checks"][0]["detail"]
    assert "rejected by the Librarian Gate" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize("odd", ODD_INPUTS, ids=ODD_IDS)
async def test_odd_input_to_remember_is_an_audited_rejection(kernel: Kernel, odd: OddInput) -> None:
    """remember with a NUL, a lone surrogate, NaN, an instant beyond UTC or 900-deep metadata
    is a rejection naming the field, with one audit row and nothing stored."""
    tools = EngramTools(kernel)
    writer = await _principal(kernel, "odd-writer", TrustLevel.RESTRICTED)
    before = await _counts(kernel)
    _rejected_for(await tools.call("remember", odd.body, writer), odd.field)
    assert (before[0] + 1, before[1]) == await _counts(kernel)
    assert (await kernel.audit.verify()).ok


@pytest.mark.parametrize("odd", ODD_INPUTS, ids=ODD_IDS)
async def test_odd_input_to_update_is_an_audited_rejection(kernel: Kernel, odd: OddInput) -> None:
    """update with the same values is a rejection with one audit row; the record stays put."""
    tools = EngramTools(kernel)
    writer = await _principal(kernel, "odd-updater", TrustLevel.STANDARD)
    created = _body(await tools.call("remember", BELIEF, writer))
    before = await _counts(kernel)
    control = {"record_id": created["record_id"], "expected_version": 1}
    _rejected_for(await tools.call("update", {**odd.changes, **control}, writer), odd.field)
    assert (before[0] + 1, before[1]) == await _counts(kernel)
    got = _body(await tools.call("get", {"record_id": created["record_id"]}, writer))
    assert (1, BELIEF["content"]) == (got["record"]["version"], got["record"]["content"])


LATE = "9999-12-31T23:59:59-14:00"
EARLY = "0001-01-01T00:00:00+14:00"


@pytest.mark.parametrize(
    ("tool", "arguments", "mentions"),
    [
        ("recall", {"query": "ledger\x00"}, "query"),
        ("recall", {"query": "ledger \ud800"}, "query"),
        ("recall", {"query": "ledger", "namespace": "ops\udfff"}, "namespace"),
        ("recall", {"query": "ledger", "as_of_event": LATE}, "as_of_event"),
        ("get", {"record_id": str(uuid.uuid4()), "as_of_event": LATE}, "as_of_event"),
        ("get", {"record_id": str(uuid.uuid4()), "as_of_ingestion": EARLY}, "as_of_ingestion"),
    ],
)
async def test_odd_queries_and_instants_are_invalid_input_not_internal_errors(
    kernel: Kernel, tool: str, arguments: dict[str, Any], mentions: str
) -> None:
    """A query with a NUL or lone surrogate and an instant UTC cannot express are invalid
    input the model can fix, never an internal error."""
    tools = EngramTools(kernel)
    reader = await _principal(kernel, "odd-reader", TrustLevel.STANDARD)
    error = _error(await tools.call(tool, arguments, reader))
    assert "invalid_input" == error["kind"], error
    assert mentions in error["message"]
