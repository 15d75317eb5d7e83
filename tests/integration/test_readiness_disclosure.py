"""What /readyz tells whom while a check fails for real (ADR-022): a caller without a token
learns each check's name and that it failed; the driver's message (database name, socket
path) goes to the log and to callers presenting what /metrics accepts.

The fault is real: the test's database stops accepting connections and the kernel's
backends are terminated, so every new connection is refused by PostgreSQL itself.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
from structlog.testing import capture_logs

from engram import Kernel
from engram.memory.types import TrustLevel
from tests.conftest import METRICS_TOKEN, ScratchDatabase
from tests.integration.test_http_api import bearer
from tests.integration.test_readiness import SCRAPER, Probe, failed, ready_again, serving


@contextlib.asynccontextmanager
async def refusing_connections(database: ScratchDatabase) -> AsyncIterator[None]:
    """The test's database refuses new connections and its runtime backends are ended, until
    the block ends (altered from another database: none can disallow its own)."""
    admin = await asyncpg.connect(database.server.admin_url())
    try:
        await admin.execute(f'ALTER DATABASE "{database.name}" ALLOW_CONNECTIONS false')
        try:
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = $1 AND usename = 'engram_runtime'",
                database.name,
            )
            yield
        finally:
            await admin.execute(f'ALTER DATABASE "{database.name}" ALLOW_CONNECTIONS true')
    finally:
        await admin.close()


async def not_ready(probe: Probe, *, anonymous: bool) -> dict[str, Any]:
    """The body of a /readyz that answers 503 (the first after the fault may still be ok)."""
    for _ in range(20):
        status, body = await (probe.ready_anonymously() if anonymous else probe.ready())
        if status == 503 and "database" in failed(body):
            return body
    raise AssertionError(f"/readyz stayed ready: {body}")


async def test_a_database_outage_is_failed_for_strangers_and_explained_to_the_scraper(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """With the database refusing connections, /readyz without a token answers 503 with the
    database check ``failed`` and not a word of the driver's message (no database name, no
    socket path, no error class); the metrics token gets that message; the log records it
    once as ``health.check_failed``; /metrics still answers the metrics token; and readiness
    comes back when the database does."""
    async with serving(kernel) as probe:
        socket_dir = database.server.socket_dir
        with capture_logs() as logs:
            async with refusing_connections(database):
                stranger = await not_ready(probe, anonymous=True)
                again = await not_ready(probe, anonymous=True)
                scraper = await not_ready(probe, anonymous=False)
                scrape = await probe.client.get("/metrics", headers=SCRAPER)
        assert {"ok": False, "detail": "failed"} == stranger["checks"]["database"]
        text = json.dumps(stranger)
        for secret in (database.name, socket_dir, "Error", "unreachable", "accepting"):
            assert secret not in text, secret
        assert stranger == again
        detail = failed(scraper)["database"]
        assert database.name in detail or "CircuitOpen" in detail, detail
        assert 200 == scrape.status_code
        assert "engram_circuit_breaker_state" in scrape.text

        failures = [e for e in logs if e["event"] == "health.check_failed"]
        database_failures = [e for e in failures if e["check"] == "database"]
        assert database_failures, logs
        assert all("failed" == e["reason"] for e in database_failures)
        assert any("not currently accepting connections" in e["detail"] for e in failures)
        # A flood of probes logs a failure once per distinct reason, not once per request.
        assert len(database_failures) <= 3, database_failures

        body = await ready_again(probe)
        assert {} == failed(body)


async def test_an_agent_token_the_database_cannot_check_gets_the_answer_without_reasons(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A trusted agent's token, not yet seen by this kernel, cannot be checked while the
    database refuses connections: /readyz answers without reasons (as to a stranger) rather
    than a 401 or a 500, and logs why."""
    _, token = await kernel.agents.add("outage-reader", TrustLevel.TRUSTED)
    async with serving(kernel) as probe, refusing_connections(database):
        with capture_logs() as logs:
            response = await probe.client.get("/readyz", headers=bearer(token))
        assert 503 == response.status_code, response.text
        assert {"ok": False, "detail": "failed"} == response.json()["checks"]["database"]
        assert any(e["event"] == "http.readyz_token_unchecked" for e in logs), logs


async def test_readyz_with_a_wrong_token_is_a_401_and_with_a_weak_one_a_403(
    kernel: Kernel,
) -> None:
    """A token presented to /readyz must be one /metrics accepts: an unknown one is a 401, a
    standard agent's a 403, the metrics token and the admin's get the reasons."""
    _, standard = await kernel.agents.add("plain-reader", TrustLevel.STANDARD)
    _, admin = await kernel.agents.add("ops-admin", TrustLevel.TRUSTED, admin=True)
    async with serving(kernel) as probe:
        wrong = await probe.client.get("/readyz", headers=bearer(METRICS_TOKEN + "x"))
        assert 401 == wrong.status_code, wrong.text
        assert wrong.headers["www-authenticate"].startswith("Bearer")
        weak = await probe.client.get("/readyz", headers=bearer(standard))
        assert 403 == weak.status_code, weak.text
        for headers in (SCRAPER, bearer(admin)):
            response = await probe.client.get("/readyz", headers=headers)
            assert 200 == response.status_code, response.text
            assert all("duration_ms" in check for check in response.json()["checks"].values())
