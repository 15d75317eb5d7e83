"""The MCP server as clients use it: `engram mcp` over stdio and `/mcp` of `engram serve`,
both driven by the MCP SDK's own client."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from engram import open_kernel
from engram.config import EngramSettings
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.types import TrustLevel
from tests.e2e.conftest import Served
from tests.e2e.test_serve import ENGRAM, _env, _postgres_for
from tests.readiness import when_ready

pytestmark = pytest.mark.slow

TOOLS = {"remember", "recall", "get", "history", "list", "update", "forget", "feedback", "health"}
FACT = "The payments team deploys the ledger service from the release branch."
CHANGED = "The payments team deploys the ledger service from the main branch."


async def _add_agent(data_dir: Path, embedder: FastembedEmbedder, name: str) -> str:
    """Register an agent in the data dir (the embedded server is shared if already running)."""
    settings = EngramSettings(database_url=None, data_dir=data_dir)
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        _, token = await kernel.agents.add(name, TrustLevel.STANDARD, writes_per_minute=1000)
    return token


def _body(result: CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


async def _scenario(client: Client, agent: str, topic: str) -> None:
    """List tools, health, remember, get, stale update, update, history, recall, list,
    feedback, forget."""
    listed = await client.list_tools()
    assert TOOLS <= {tool.name for tool in listed.tools}
    for tool in listed.tools:
        assert tool.description
        assert "object" == tool.input_schema["type"]
        assert tool.output_schema is not None
        assert "object" == tool.output_schema["type"]

    health = _body(
        await when_ready(lambda: client.call_tool("health", {}), lambda r: _body(r)["ready"])
    )
    assert (True, agent) == (health["ready"], health["agent"]["name"])

    fact, changed = f"{FACT} ({topic})", f"{CHANGED} ({topic})"
    created = await client.call_tool("remember", {"type": "belief", "content": fact})
    assert not created.is_error, created.content
    body = _body(created)
    assert "approved" == body["decision"]
    record_id = body["record_id"]
    assert agent == body["record"]["source_agent"]

    got = _body(await client.call_tool("get", {"record_id": record_id}))
    assert (fact, 1) == (got["record"]["content"], got["record"]["version"])

    update = {"record_id": record_id, "type": "belief", "content": changed}
    stale = await client.call_tool("update", {**update, "expected_version": 5})
    assert stale.is_error
    assert "conflict" == _body(stale)["decision"]
    assert 1 == _body(stale)["current_version"]

    updated = await client.call_tool("update", {**update, "expected_version": 1})
    assert not updated.is_error, updated.content
    assert 2 == _body(updated)["version"]

    history = _body(await client.call_tool("history", {"record_id": record_id}))
    assert [fact, changed] == [v["content"] for v in history["versions"]]

    found = _body(await client.call_tool("recall", {"query": f"ledger deploy branch {topic}"}))
    assert record_id in [hit["record"]["record_id"] for hit in found["hits"]]
    assert changed == found["hits"][0]["record"]["content"]
    assert 0.0 < found["hits"][0]["score"] <= 1.0
    assert 0.0 < found["hits"][0]["relevance"] <= 1.0
    unrelated = _body(await client.call_tool("recall", {"query": "recipe for lemon drizzle cake"}))
    assert [] == unrelated["hits"]

    newest = _body(await client.call_tool("list", {"limit": 1}))
    assert [record_id] == [record["record_id"] for record in newest["records"]]

    rated = await client.call_tool("feedback", {"record_id": record_id, "useful": True})
    assert not rated.is_error, rated.content
    assert _body(rated)["useful"]

    forgotten = await client.call_tool("forget", {"record_id": record_id})
    assert "forgotten" == _body(forgotten)["outcome"]
    gone = await client.call_tool("get", {"record_id": record_id})
    assert gone.is_error
    assert "not_found" == _body(gone)["error"]["kind"]


async def test_stdio_server_acts_for_the_agent_in_its_environment(
    tmp_path: Path, model_dir: Path, embedder: FastembedEmbedder
) -> None:
    """`engram mcp` with ENGRAM_AGENT_TOKEN serves the tools over stdio; stdout stays clean."""
    data_dir = tmp_path / "data"
    token = await _add_agent(data_dir, embedder, "desktop")
    errlog = tmp_path / "stderr.log"
    params = StdioServerParameters(
        command=sys.executable,
        args=[*ENGRAM[1:], "mcp"],
        env=_env(data_dir, model_dir, ENGRAM_AGENT_TOKEN=token),
    )
    with errlog.open("w") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            await _scenario(client, "desktop", "stdio")
    assert "mcp.stdio.serving" in errlog.read_text()

    # Raw: every stdout line is JSON-RPC (logs, the embedded server and the model workers
    # write elsewhere), and the process ends cleanly when its input ends.
    stdout, stderr, status = await asyncio.to_thread(
        _raw_session, _env(data_dir, model_dir, ENGRAM_AGENT_TOKEN=token)
    )
    assert 0 == status, stderr
    replies = [json.loads(line) for line in stdout.splitlines()]
    assert [1, 2] == [reply["id"] for reply in replies]
    assert TOOLS == {tool["name"] for tool in replies[1]["result"]["tools"]}
    assert "kernel.opened" in stderr


def _raw_session(env: dict[str, str]) -> tuple[str, str, int]:
    """Initialize and list tools by hand, wait for both replies, then close stdin."""
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        [*ENGRAM, "mcp"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        process.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        process.stdin.flush()
        lines = [process.stdout.readline(), process.stdout.readline()]
        rest, stderr = process.communicate(timeout=60)  # closes stdin: end of input
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)
    return "".join(lines) + rest, stderr, process.returncode


def _initialize_then_sigterm(env: dict[str, str]) -> int:
    """Start `engram mcp`, initialize a session, then SIGTERM it with stdin still open."""
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "quitter", "version": "0"},
        },
    }
    with subprocess.Popen(  # noqa: S603 - our own CLI
        [*ENGRAM, "mcp"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        try:
            process.stdin.write((json.dumps(hello) + "\n").encode())
            process.stdin.flush()
            assert 1 == json.loads(process.stdout.readline())["id"]
            process.send_signal(signal.SIGTERM)
            return process.wait(15)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)


async def test_stdio_server_stops_cleanly_on_sigterm_with_stdin_still_open(
    tmp_path: Path, model_dir: Path, embedder: FastembedEmbedder
) -> None:
    """A client that quits by SIGTERM without closing our stdin: exit 0 within seconds, and the
    embedded PostgreSQL of the data dir stopped with it."""
    data_dir = tmp_path / "data"
    token = await _add_agent(data_dir, embedder, "quitter")
    env = _env(data_dir, model_dir, ENGRAM_AGENT_TOKEN=token)
    assert 0 == await asyncio.to_thread(_initialize_then_sigterm, env)
    assert [] == _postgres_for(data_dir / "pg")


def _mcp_cli(
    data_dir: Path, model_dir: Path, *, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own CLI
        [*ENGRAM, "mcp"],
        env=_env(data_dir, model_dir, **env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_stdio_server_refuses_to_start_without_a_valid_token(
    tmp_path: Path, model_dir: Path, embedder: FastembedEmbedder
) -> None:
    """A data dir holding no database (status 2: it is not created), no token (a
    configuration error, status 2) or a wrong one (refused, status 4): a clear message on
    stderr and nothing on stdout (docs/cli.md lists the exit codes)."""
    data_dir = tmp_path / "data"
    nowhere = await asyncio.to_thread(_mcp_cli, data_dir, model_dir)
    assert (2, "") == (nowhere.returncode, nowhere.stdout)
    assert f"{data_dir} does not exist" in nowhere.stderr
    assert not data_dir.exists()
    await _add_agent(data_dir, embedder, "someone")
    missing = await asyncio.to_thread(_mcp_cli, data_dir, model_dir)
    assert 2 == missing.returncode
    assert "ENGRAM_AGENT_TOKEN is not set" in missing.stderr
    assert "" == missing.stdout

    wrong = await asyncio.to_thread(
        _mcp_cli, data_dir, model_dir, ENGRAM_AGENT_TOKEN="engram_" + "x" * 43
    )
    assert 4 == wrong.returncode, wrong.stderr
    assert "engram: the agent token is unknown or revoked" in wrong.stderr
    assert "Traceback" not in wrong.stderr
    assert "" == wrong.stdout


@asynccontextmanager
async def _http(base: str, token: str, mode: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


async def test_http_server_acts_for_the_bearer_of_each_request(
    first_serve: Served, embedder: FastembedEmbedder
) -> None:
    """/mcp serves the tools to each token's agent (both protocol eras); no or a wrong token
    is 401 before MCP is reached."""
    base, data_dir = first_serve.base, Path(first_serve.env["ENGRAM_DATA_DIR"])
    first = await _add_agent(data_dir, embedder, "planner")
    second = await _add_agent(data_dir, embedder, "reviewer")

    async with _http(base, first, "auto") as client:
        await _scenario(client, "planner", "http")
    async with _http(base, second, "legacy") as client:
        await _scenario(client, "reviewer", "http legacy")

    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=base, timeout=10) as raw:
        anonymous = await raw.post("/mcp", json=initialize, headers=headers)
        assert 401 == anonymous.status_code
        assert anonymous.headers["www-authenticate"].startswith("Bearer")
        wrong = await raw.post(
            "/mcp",
            json=initialize,
            headers={**headers, "Authorization": "Bearer engram_" + "y" * 43},
        )
        assert 401 == wrong.status_code
        assert "unknown or revoked" in wrong.json()["message"]
        right = await raw.post(
            "/mcp", json=initialize, headers={**headers, "Authorization": f"Bearer {first}"}
        )
        assert 200 == right.status_code, right.text
        assert "engram" == right.json()["result"]["serverInfo"]["name"]
        # Stateless: a lone request needs no initialize first (the docs' curl example).
        listing = await raw.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={**headers, "Authorization": f"Bearer {second}"},
        )
        assert 200 == listing.status_code, listing.text
        assert TOOLS == {tool["name"] for tool in listing.json()["result"]["tools"]}
