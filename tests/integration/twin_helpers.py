"""Two stores for differential tests: the same visible setup in both, hidden records in one.

A caller's transcript (every answer it got, in order) is normalised only in what legitimately
differs between two stores: freshly generated ids (numbered by first appearance, so an id
that appears in one transcript only shifts every later number), instants and timings.
Whatever else differs came from a record the caller may not read.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import pytest

from engram import Kernel, open_kernel
from engram.agents.registry import Principal
from engram.config import EngramSettings
from engram.infra.embedded_server import EmbeddedPostgres
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.types import TrustLevel
from engram.protocols.http.app import create_app
from engram.protocols.mcp.tools import EngramTools
from tests.conftest import ScratchDatabase
from tests.integration.scheduler_helpers import running

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
#: Keys whose values are timings or instants of this run.
_VOLATILE = {"embed_ms", "query_ms", "duration_ms", "created_at"}


@dataclass
class Store:
    """One kernel, its REST client and MCP tools, and the probing agents registered on it."""

    kernel: Kernel
    client: httpx.AsyncClient
    tools: EngramTools
    principals: dict[str, Principal] = field(default_factory=dict)
    headers: dict[str, dict[str, str]] = field(default_factory=dict)

    async def agent(self, name: str, trust: TrustLevel, **options: Any) -> Principal:
        """Register ``name`` (its token kept for REST) and return its principal."""
        _, token = await self.kernel.agents.add(name, trust, **options)
        principal = await self.kernel.agents.authenticate(token)
        self.principals[name] = principal
        self.headers[name] = {"Authorization": f"Bearer {token}"}
        return principal


async def scratch_database(server: EmbeddedPostgres, template: str) -> ScratchDatabase:
    """A fresh database cloned from the migrated template."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(server.admin_url())
    try:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    finally:
        await admin.close()
    return ScratchDatabase(name, server)


async def drop_database(database: ScratchDatabase) -> None:
    """Drop a database made by :func:`scratch_database`."""
    admin = await asyncpg.connect(database.server.admin_url())
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{database.name}" WITH (FORCE)')
    finally:
        await admin.close()


async def open_store(
    database: ScratchDatabase, embedder: FastembedEmbedder
) -> AsyncIterator[Store]:
    """A kernel on ``database`` with its REST app running and its MCP tools."""
    settings = EngramSettings(
        database_url=database.runtime_url,
        migrate_on_start=False,
        retry_initial_wait_seconds=0.01,
        readiness_cache_seconds=0.0,
    )
    async with open_kernel(settings=settings, embeddings=embedder) as kernel:
        app = create_app(kernel=kernel, announce=lambda _: None)
        async with running(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                yield Store(kernel, client, EngramTools(kernel))


@pytest.fixture
async def twin_b(
    pg_server: EmbeddedPostgres, template_db: str, embedder: FastembedEmbedder
) -> AsyncIterator[Store]:
    """The second store of a differential test (the one that also holds hidden records)."""
    database = await scratch_database(pg_server, template_db)
    try:
        async for store in open_store(database, embedder):
            yield store
    finally:
        await drop_database(database)


@pytest.fixture
async def twin_a(database: ScratchDatabase, embedder: FastembedEmbedder) -> AsyncIterator[Store]:
    """The first store of a differential test (the visible setup only)."""
    async for store in open_store(database, embedder):
        yield store


def normalised(transcript: list[Any]) -> list[Any]:
    """``transcript`` with ids numbered by first appearance, instants and timings blanked
    (a page cursor is read as the instant and id it encodes)."""
    text = json.dumps(_decoded(transcript), default=str, sort_keys=True)
    numbers: dict[str, str] = {}

    def number(match: re.Match[str]) -> str:
        return numbers.setdefault(match.group(0), f"id-{len(numbers)}")

    text = _UUID.sub(number, text)
    text = _INSTANT.sub("<instant>", text)
    return [_without_volatile(item) for item in json.loads(text)]


def _decoded(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: base64.urlsafe_b64decode(item).decode()
            if key == "next_cursor" and isinstance(item, str)
            else _decoded(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_decoded(item) for item in value]
    return value


def _without_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            key: "<volatile>" if key in _VOLATILE else _without_volatile(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_without_volatile(item) for item in value]
    return value


def differences(a: list[Any], b: list[Any]) -> list[tuple[int, str, Any, Any]]:
    """Where two normalised transcripts differ: (step, path, value in a, value in b)."""
    found: list[tuple[int, str, Any, Any]] = []
    for step, (left, right) in enumerate(zip(a, b, strict=True)):
        _diff(step, "", left, right, found)
    return found


def _diff(step: int, path: str, a: Any, b: Any, found: list[tuple[int, str, Any, Any]]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            _diff(step, f"{path}.{key}", a.get(key, "<absent>"), b.get(key, "<absent>"), found)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (left, right) in enumerate(zip(a, b, strict=True)):
            _diff(step, f"{path}[{index}]", left, right, found)
    elif a != b:
        found.append((step, path, a, b))


async def searched_through_rest_and_mcp(store: Store, body: dict[str, Any]) -> list[Any]:
    """The reader's answers to one search ``body`` through REST (with its status, never a
    server error) and through MCP's ``recall`` tool."""
    response = await store.client.post("/v1/search", json=body, headers=store.headers["reader"])
    assert response.status_code < 500, response.text
    tool = await store.tools.call("recall", body, store.principals["reader"])
    return [
        {"status": response.status_code, **response.json()},
        {"error": tool.is_error, **(tool.structured_content or {})},
    ]
