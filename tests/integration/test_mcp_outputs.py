"""Every MCP tool's results, successes and errors alike, fit the output schema it declares,
checked through the SDK's own client on a real kernel."""

from __future__ import annotations

import json
import uuid
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from mcp import Client
from mcp.types import CallToolResult, Tool

from engram import Kernel
from engram.agents.registry import Principal
from engram.memory.types import TrustLevel
from engram.protocols.mcp.schema import TOOL_NAMES
from engram.protocols.mcp.server import build_server
from engram.protocols.mcp.tools import EngramTools
from tests.readiness import when_ready

BELIEF = {
    "type": "belief",
    "content": "The billing service stores invoices in PostgreSQL 16.",
    "metadata": {"tags": ["billing"]},
}


async def _principal(kernel: Kernel, name: str) -> Principal:
    _, token = await kernel.agents.add(name, TrustLevel.STANDARD, writes_per_minute=1000)
    return await kernel.agents.authenticate(token)


def _body(result: CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


def test_every_output_schema_is_a_valid_object_schema_that_admits_errors() -> None:
    """Each tool declares an object output schema (JSON Schema 2020-12) with an error branch."""
    for tool in EngramTools.definitions():
        schema = tool.output_schema
        assert schema is not None, tool.name
        Draft202012Validator.check_schema(schema)
        assert "object" == schema["type"], tool.name
        assert "$ref" not in json.dumps(schema), tool.name
        assert {"required": ["error"]} in schema["anyOf"], tool.name


async def test_every_tool_answers_what_its_output_schema_declares(kernel: Kernel) -> None:
    """Through an MCP client session, each tool's successes and errors validate against the
    outputSchema listed for it (the client also checks every success itself)."""
    writer = await _principal(kernel, "schema-writer")
    calls: list[tuple[str, str]] = []
    async with Client(build_server(EngramTools(kernel), lambda _ctx: writer)) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(TOOL_NAMES) == set(listed)

        async def call(name: str, arguments: dict[str, Any]) -> CallToolResult:
            result = await client.call_tool(name, arguments)
            _validate(listed[name], result)
            calls.append((name, "error" if result.is_error else "ok"))
            return result

        created = _body(await call("remember", BELIEF))
        record_id = created["record_id"]
        await call("remember", {"type": "rumour", "content": "x"})  # a rejection: a decision
        await call("remember", {**BELIEF, "request_id": ""})  # an invalid control field
        await call("recall", {"query": "where are invoices stored"})
        await call("recall", {"query": "where are invoices stored", "min_score": 0.0})
        await call("recall", {"query": "volcanoes erupting on Io"})
        await call("recall", {"query": "x", "limit": 0})
        await call("get", {"record_id": record_id})
        await call("get", {"record_id": str(uuid.uuid4())})
        await call("history", {"record_id": record_id})
        await call("history", {"record_id": "not-an-id"})
        await call("remember", {**BELIEF, "content": "Invoices are kept for ten years."})
        first = _body(await call("list", {"limit": 1, "tags": ["billing"]}))
        assert first["next_cursor"] is not None
        await call("list", {"limit": 1, "tags": ["billing"], "cursor": first["next_cursor"]})
        await call("list", {"cursor": "not a cursor"})
        change = {"content": "The billing service stores invoices in PostgreSQL 17."}
        await call("update", {"record_id": record_id, "expected_version": 1, **change})
        await call("update", {"record_id": record_id, "expected_version": 1, **change})
        await call("feedback", {"record_id": record_id, "useful": True})
        await call("feedback", {"record_id": str(uuid.uuid4()), "useful": True})
        await call("forget", {"record_id": record_id})
        await call("forget", {"record_id": record_id, "expected_version": 0})
        health = _body(await when_ready(lambda: call("health", {}), lambda r: _body(r)["ready"]))
        assert health["ready"], health
        await call("health", {"verbose": True})

    assert {(name, outcome) for name in TOOL_NAMES for outcome in ("ok", "error")} == set(calls)


def _validate(tool: Tool, result: CallToolResult) -> None:
    """The result's structured content fits the tool's declared output schema."""
    assert tool.output_schema is not None
    validator = Draft202012Validator(tool.output_schema, format_checker=FormatChecker())
    problems = [error.message for error in validator.iter_errors(_body(result))]
    assert [] == problems, (tool.name, result.structured_content)
