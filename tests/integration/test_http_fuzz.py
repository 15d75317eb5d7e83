"""Property-based fuzzing of the REST API from its own OpenAPI document (schemathesis).

The app runs in-process on a real kernel and database; schemathesis drives it on its own event
loop, so the app opens its kernel there (its lifespan), and the first-agent bootstrap hands us
an admin token. Every /v1 operation gets valid and invalid requests; no answer may be a 5xx,
and answers must match what the document promises (status, content type, headers, schema).
Invalid requests need not be refused outright: unknown query parameters are ignored, as HTTP
servers usually do, so schemathesis's negative-data check is not applied.

A second run sends odd input (issue 11: NUL, lone surrogates, NaN, instants beyond UTC, deep
metadata; see ``odd_inputs``) as standard and restricted agents: never a 5xx, every refused
write leaves exactly one audit row, and nothing else changes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from engram.agents.registry import AgentRegistry
from engram.config import EngramSettings
from engram.infra.postgres import PostgresDatabase
from engram.infra.resilience import CircuitBreaker, Resilience
from engram.memory.types import TrustLevel
from engram.protocols.http.app import create_app
from tests.conftest import ScratchDatabase
from tests.integration.odd_inputs import BASE, BEYOND_UTC, ODD_CHANGES, ODD_QUERIES, wire

TOKEN = re.compile(r"engram_[A-Za-z0-9_-]{43}")
POSITIVE_EXAMPLES = 15
NEGATIVE_EXAMPLES = 10
CONFORMANCE = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def _run(operation: Any, mode: schemathesis.GenerationMode, headers: dict[str, str]) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=POSITIVE_EXAMPLES
        if mode is schemathesis.GenerationMode.POSITIVE
        else NEGATIVE_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def exercise(case: schemathesis.Case) -> None:
        response = case.call(headers=headers)
        case.validate_response(response, checks=CONFORMANCE, headers=headers)

    exercise()


@contextmanager
def _serving(database: ScratchDatabase, model_dir: Path, tmp_path: Path) -> Iterator[Any]:
    """The app's OpenAPI schema (its lifespan started) and the admin token it announced."""
    announced: list[str] = []
    app: FastAPI = create_app(
        EngramSettings(
            database_url=database.runtime_url,
            migrate_on_start=False,
            data_dir=tmp_path,
            embedding_model_path=model_dir,
            retry_initial_wait_seconds=0.01,
        ),
        announce=announced.append,
    )
    try:
        schema = schemathesis.openapi.from_asgi("/openapi.json", app)  # starts the lifespan
        found = TOKEN.search(" ".join(announced))
        assert found is not None, announced
        yield schema, found.group(0)
    finally:
        asgi.shutdown_lifespans()  # closes the kernel before the database is dropped


@pytest.mark.slow
def test_no_operation_answers_a_5xx_or_breaks_its_documented_contract(
    database: ScratchDatabase, model_dir: Path, tmp_path: Path
) -> None:
    """Every /v1 operation, fed valid and invalid requests by the admin, answers within its
    documented contract and never with a 5xx."""
    with _serving(database, model_dir, tmp_path) as (schema, token):
        headers = {"Authorization": f"Bearer {token}"}
        operations = [
            result.ok() for result in schema.include(path_regex=r"^/v1/").get_all_operations()
        ]
        assert len(operations) >= 11
        for operation in operations:
            for mode in (
                schemathesis.GenerationMode.POSITIVE,
                schemathesis.GenerationMode.NEGATIVE,
            ):
                _run(operation, mode, headers)


ODD_EXAMPLES = 30
TIERS = (TrustLevel.STANDARD, TrustLevel.RESTRICTED)
EDGES_OF_TIME = st.sampled_from(
    ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z", "0001-01-01T13:59:59-14:00"]
)


async def _add_agents(database: ScratchDatabase) -> dict[TrustLevel, str]:
    """A token for an agent of each fuzzed tier (added beside the running app)."""
    db = await PostgresDatabase.connect(
        database.runtime_url, resilience=Resilience(CircuitBreaker("postgres")), min_size=1
    )
    try:
        registry = AgentRegistry(db)
        return {trust: (await registry.add(f"fuzz-{trust.value}", trust))[1] for trust in TIERS}
    finally:
        await db.close()


async def _count(database: ScratchDatabase) -> tuple[int, int]:
    """Audit rows and memory versions, in that order."""
    conn = await asyncpg.connect(database.admin_url)
    try:
        audit = await conn.fetchval("SELECT count(*) FROM engram.librarian_audit")
        versions = await conn.fetchval("SELECT count(*) FROM engram.memories")
        return int(audit), int(versions)
    finally:
        await conn.close()


def _odd_settings() -> Any:
    return settings(
        max_examples=ODD_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )


def _fuzz_odd_input(
    schema: Any, database: ScratchDatabase, headers: dict[str, str], trust: TrustLevel
) -> None:
    """Odd writes (CREATE and UPDATE), odd queries and edge instants as one agent."""
    create = schema["/v1/memories"]["POST"]
    patch = schema["/v1/memories/{record_id}"]["PATCH"]
    read = schema["/v1/memories/{record_id}"]["GET"]
    search = schema["/v1/search"]["POST"]
    own = {**BASE, "content": f"The {trust.value} agent's ledger runs on PostgreSQL 16."}
    created = create.Case().call(headers=headers, data=wire(own))
    assert 201 == created.status_code, created.text
    record_id = created.json()["record_id"]

    @given(changes=ODD_CHANGES, as_update=st.booleans())
    @_odd_settings()
    def odd_write(changes: dict[str, Any], as_update: bool) -> None:
        before = asyncio.run(_count(database))
        if as_update:
            case = patch.Case(path_parameters={"record_id": record_id})
            sent = {**headers, "If-Match": '"1"'}
            response = case.call(headers=sent, data=wire(changes))
        else:
            case, sent = create.Case(), headers
            response = case.call(headers=sent, data=wire({**BASE, **changes}))
        case.validate_response(response, checks=CONFORMANCE, headers=sent)
        assert 400 <= response.status_code < 500, response.text
        assert (before[0] + 1, before[1]) == asyncio.run(_count(database)), response.text

    @given(query=ODD_QUERIES, instant=BEYOND_UTC | EDGES_OF_TIME)
    @_odd_settings()
    def odd_read(query: str, instant: str) -> None:
        before = asyncio.run(_count(database))
        searched = search.Case()
        response = searched.call(headers=headers, data=wire({"query": query}))
        searched.validate_response(response, checks=CONFORMANCE, headers=headers)
        assert 422 == response.status_code, response.text
        for name in ("as_of_event", "as_of_ingestion"):
            at = read.Case(path_parameters={"record_id": record_id}, query={name: instant})
            response = at.call(headers=headers)
            at.validate_response(response, checks=CONFORMANCE, headers=headers)
            assert response.status_code in {200, 404, 422}, response.text
        assert before == asyncio.run(_count(database))

    odd_write()
    odd_read()


@pytest.mark.slow
def test_odd_input_is_a_4xx_audited_once_that_changes_nothing_for_every_tier(
    database: ScratchDatabase, model_dir: Path, tmp_path: Path
) -> None:
    """NUL, lone surrogates, NaN, instants beyond UTC and deep metadata, sent by standard and
    restricted agents: never a 5xx, one audit row per refused write, no memory written."""
    with _serving(database, model_dir, tmp_path) as (schema, _):
        tokens = asyncio.run(_add_agents(database))
        for trust in TIERS:
            headers = {"Authorization": f"Bearer {tokens[trust]}"}
            headers["Content-Type"] = "application/json"
            _fuzz_odd_input(schema, database, headers, trust)
