"""Who may scrape ``/metrics`` (ADR-022): the metrics token, which grants nothing else, or an
agent cleared to read every access level. Everyone else gets a typed 401 or 403, whatever
the Authorization header holds. A real kernel and database over the in-process app."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from engram import Kernel
from engram.memory.types import AccessLevel, TrustLevel
from tests.conftest import METRICS_TOKEN, ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.test_http_api import Api, assert_problem, bearer
from tests.integration.test_http_fuzz import _count

api = http_api.api

#: The one thing every 401 of /metrics says, whichever token was wrong.
REQUIRED = "the metrics token (ENGRAM_METRICS_TOKEN) or the token of an agent cleared"


@dataclass
class Served:
    """The app, a client on it, its kernel and the first (admin) agent's headers."""

    app: FastAPI
    client: httpx.AsyncClient
    kernel: Kernel
    admin: dict[str, str]

    async def scrape(self, headers: dict[str, str] | None = None) -> httpx.Response:
        return await self.client.get("/metrics", headers=headers)

    async def agent(self, name: str, trust: TrustLevel, **options: object) -> dict[str, str]:
        _, token = await self.kernel.agents.add(name, trust, **options)
        return bearer(token)


@pytest.fixture
async def served(api: Api) -> Served:
    """The app on the test's kernel (whose metrics token is ``METRICS_TOKEN``)."""
    assert api.app is not None
    return Served(api.app, api.client, api.kernel, api.admin)


def refused(response: httpx.Response) -> None:
    """A 401 problem asking for a bearer token, with no metric in it."""
    body = assert_problem(response, 401)
    assert 'Bearer realm="engram"' == response.headers["www-authenticate"]
    assert "urn:engram:problem:unauthenticated" == body["type"]
    assert body["detail"].startswith(REQUIRED)
    assert "engram_gate" not in response.text


def refused_count(kernel: Kernel, status: str) -> float:
    """How many /metrics requests were answered with ``status`` (engram_http_requests_total)."""
    value = kernel.metrics.registry.get_sample_value(
        "engram_http_requests_total", {"route": "/metrics", "method": "GET", "status": status}
    )
    return value or 0.0


async def test_a_scrape_without_a_token_is_a_401_problem_counted_and_not_audited(
    served: Served, database: ScratchDatabase
) -> None:
    """No Authorization header: 401 problem+json with ``WWW-Authenticate: Bearer``, counted in
    engram_http_requests_total like every refused request, no audit row (as every 401)."""
    before = await _count(database)
    refused(await served.scrape())
    assert 1 == refused_count(served.kernel, "401")
    assert before == await _count(database)


@pytest.mark.parametrize(
    "token",
    [
        "scrape-only-9f2c41d07b5e4a8",  # the metrics token but its last character
        "scrape-only-9f2c41d07b5e4a833",  # the metrics token and one more
        "SCRAPE-ONLY-9F2C41D07B5E4A83",  # another case
        "engram_" + "A" * 43,  # well formed, no such agent
        "not a token at all",
    ],
    ids=["shorter", "longer", "upper-case", "unknown-agent", "spaces"],
)
async def test_a_wrong_token_is_a_401_that_says_no_more_than_a_missing_one(
    served: Served, token: str
) -> None:
    """A near miss of the metrics token, an agent token nobody holds and free text are each
    the same 401 as no token at all."""
    missing = (await served.scrape()).json()
    wrong = await served.scrape(bearer(token))
    refused(wrong)
    assert missing == wrong.json()


async def test_a_revoked_agents_token_is_a_401(served: Served) -> None:
    """A trusted agent's token scrapes until the agent is revoked, then it is a 401."""
    headers = await served.agent("scraper", TrustLevel.TRUSTED)
    assert 200 == (await served.scrape(headers)).status_code
    await served.kernel.agents.revoke("scraper")
    refused(await served.scrape(headers))


@pytest.mark.parametrize(
    ("trust", "options"),
    [
        (TrustLevel.STANDARD, {}),
        (TrustLevel.RESTRICTED, {}),
        (TrustLevel.READ_ONLY, {}),
        (TrustLevel.TRUSTED, {"max_read_level": AccessLevel.SYSTEM}),
        (TrustLevel.TRUSTED, {"admin": True, "max_read_level": AccessLevel.USER}),
    ],
    ids=["standard", "restricted", "read-only", "trusted-narrowed", "admin-narrowed"],
)
async def test_an_agent_that_cannot_read_sensitive_records_gets_a_403(
    served: Served, trust: TrustLevel, options: dict[str, object]
) -> None:
    """A valid agent token whose reader may not read ``sensitive`` records, an admin's
    narrowed below it included, is a 403 problem: the caller is known, and the figures count
    records it may not read."""
    headers = await served.agent(f"reader-{uuid.uuid4().hex[:8]}", trust, **options)
    response = await served.scrape(headers)
    body = assert_problem(response, 403)
    assert "urn:engram:problem:forbidden" == body["type"]
    assert "engram_gate" not in response.text
    assert 1 == refused_count(served.kernel, "403")


async def test_the_metrics_token_and_cleared_agents_scrape(served: Served) -> None:
    """The metrics token, the first (admin) agent's token and a trusted non-admin agent's
    token (both cleared to read every level) each get the Prometheus text; the scheme's
    case does not matter."""
    trusted = await served.agent("trusted-reader", TrustLevel.TRUSTED)
    lower = {"Authorization": f"bearer {METRICS_TOKEN}"}
    for headers in (bearer(METRICS_TOKEN), lower, served.admin, trusted):
        response = await served.scrape(headers)
        assert 200 == response.status_code, response.text
        assert response.headers["content-type"].startswith("text/plain")
        assert "# TYPE engram_memory_records gauge" in response.text


def _routes(app: FastAPI) -> list[tuple[str, str]]:
    """Every (method, path) the app documents, path parameters filled in, with /mcp and the
    documentation pages."""
    found = [("POST", "/mcp"), ("GET", "/mcp"), ("GET", "/openapi.json"), ("GET", "/docs")]
    for template, operations in app.openapi()["paths"].items():
        path = re.sub(r"\{[^}]+\}", str(uuid.uuid4()), template)
        found.extend((method.upper(), path) for method in sorted(operations))
    return found


async def test_the_metrics_token_grants_nothing_on_any_other_route(served: Served) -> None:
    """On every route but /metrics and /readyz the metrics token is answered exactly as no
    token is: a 401 on every /v1 route and on MCP requests, the same public answer on the
    others; nothing is written."""
    routes = _routes(served.app)
    assert ("GET", "/v1/audit") in routes
    needing_a_token = []
    for method, path in routes:
        if path in ("/metrics", "/readyz"):
            continue
        body = b"{}" if method in ("POST", "PATCH", "PUT") else None
        headers = {"Content-Type": "application/json", "If-Match": '"1"'}
        if path == "/mcp":
            headers["Accept"] = "application/json, text/event-stream"
        anonymous = await served.client.request(method, path, content=body, headers=headers)
        with_token = await served.client.request(
            method, path, content=body, headers={**headers, **bearer(METRICS_TOKEN)}
        )
        assert anonymous.status_code == with_token.status_code, (method, path, with_token.text)
        if path.startswith("/v1/") or (method, path) == ("POST", "/mcp"):
            assert 401 == with_token.status_code, (method, path)
            assert anonymous.json() == with_token.json(), (method, path)
            needing_a_token.append((method, path))
    assert len(needing_a_token) >= 12, needing_a_token
    assert 0 == await served.kernel.db.fetchval("SELECT count(*) FROM memories")


ODD_HEADERS: list[tuple[str, bytes]] = [
    ("empty", b""),
    ("scheme-only", b"Bearer"),
    ("scheme-and-spaces", b"Bearer    "),
    ("basic", b"Basic c2NyYXBlOm9ubHk="),
    ("nul", b"Bearer scrape-only-\x009f2c41d07b5e4a83"),
    ("nul-after", METRICS_TOKEN.encode().join([b"Bearer ", b"\x00"])),
    ("latin-1", b"Bearer scrape-only-\xe9\xe9\xe9\xe9\xe9\xe9"),
    ("utf-8", "Bearer scrape-only-ключ-токен".encode()),
    ("invalid-utf-8", b"Bearer \xff\xfe\xfd" + METRICS_TOKEN.encode()),
    ("huge", b"Bearer " + b"a" * 200_000),
    ("huge-agent-shaped", b"Bearer engram_" + b"A" * 200_000),
    ("control", b"Bearer \x01\x02\x7f"),
    ("two-tokens", b"Bearer " + METRICS_TOKEN.encode() + b" " + METRICS_TOKEN.encode()),
]


@pytest.mark.parametrize(
    "value", [value for _, value in ODD_HEADERS], ids=[n for n, _ in ODD_HEADERS]
)
async def test_odd_authorization_headers_are_a_401_never_a_500(
    served: Served, value: bytes
) -> None:
    """An Authorization header that is empty, names another scheme, or holds a NUL, control
    characters, bytes that are not ASCII (or not UTF-8), 200 kB, or two tokens is a 401
    problem on /metrics, and on /readyz the answer without reasons or a 401: never a 500."""
    refused(await served.scrape({"Authorization": value}))
    ready = await served.client.get("/readyz", headers={"Authorization": value})
    assert ready.status_code in (200, 401), ready.text
    if ready.status_code == 200:
        assert {"ok": True, "detail": "ok"} == ready.json()["checks"]["database"]
    assert 0 == refused_count(served.kernel, "500")
