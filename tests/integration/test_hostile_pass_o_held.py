"""Hostile pass O: probes that held (kept as regression tests). Real embedded PostgreSQL, the
real embedding model, no mocks: backends are killed with ``pg_terminate_backend``."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import asyncpg
import httpx

from engram.memory.types import TrustLevel
from tests.conftest import METRICS_TOKEN, ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.test_http_api import Api, bearer

api = http_api.api

#: What a /readyz answer without reasons may say of a check.
SUMMARIES = {"ok", "failed", "timed out"}


async def _kill_backends(admin: asyncpg.Connection) -> int:
    """Terminate every other backend of this database (the kernel's pool among them)."""
    killed = await admin.fetchval(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    return int(killed or 0)


def _leaks(response: httpx.Response) -> list[str]:
    """What an answer to a caller without a scrape credential says that it may not."""
    found = []
    text = response.text
    for secret in ("engram_gate", "engram_memory", "unreachable", "Error", "socket", "port"):
        if secret in text:
            found.append(f"{response.request.url.path} {response.status_code}: {secret!r}")
    if response.request.url.path == "/readyz" and response.status_code in (200, 503):
        for name, check in response.json()["checks"].items():
            if set(check) != {"ok", "detail"} or check["detail"] not in SUMMARIES:
                found.append(f"/readyz {name}: {check}")
    return found


async def test_scrapes_and_probes_while_backends_are_killed_answer_typed_and_tell_nothing(
    api: Api, database: ScratchDatabase
) -> None:
    """Forty rounds of twelve concurrent requests (``/metrics`` and ``/readyz`` with the
    metrics token, a cleared agent's, a narrowed agent's, an agent-shaped unknown token, an
    odd one, and none) while the kernel's backends are terminated at random moments: no
    answer is a 500; ``/metrics`` is 200 only for the two credentials, 401, 403 or 503
    otherwise; and no answer to a caller without a credential names a metric, a driver
    message or a check's reason. Afterwards every check passes again."""
    rng = random.Random(20261127)
    narrowed = await api.agent("narrow", TrustLevel.STANDARD)
    cleared = api.admin
    credentials: list[tuple[str, dict[str, Any]]] = [
        ("metrics", bearer(METRICS_TOKEN)),
        ("cleared", cleared),
        ("narrowed", narrowed),
        ("unknown", bearer("engram_" + "Q" * 43)),
        ("odd", {"Authorization": b"Bearer \xe9\xed\xa0\x80 " + b"x" * 5000}),
        ("none", {}),
    ]
    admin = await asyncpg.connect(database.admin_url)
    bad: list[str] = []
    try:
        for _ in range(40):
            calls = [
                (name, path, headers)
                for name, headers in credentials
                for path in ("/metrics", "/readyz")
            ]

            async def one(name: str, path: str, headers: dict[str, Any]) -> None:
                await asyncio.sleep(rng.uniform(0, 0.02))
                response = await api.client.get(path, headers=headers)
                status = response.status_code
                if status >= 500 and status != 503:
                    bad.append(f"{name} {path}: {status} {response.text[:200]}")
                if path == "/metrics" and status == 200 and name not in ("metrics", "cleared"):
                    bad.append(f"{name} scraped /metrics")
                if name in ("none", "odd", "unknown", "narrowed"):
                    bad.extend(_leaks(response))

            async def kill() -> None:
                await asyncio.sleep(rng.uniform(0, 0.03))
                await _kill_backends(admin)

            await asyncio.gather(kill(), *(one(*call) for call in calls))
        assert [] == bad[:10]
        for _ in range(100):  # the pool reconnects and each check passes again
            ready = await api.client.get("/readyz")
            if ready.status_code == 200:
                break
            await asyncio.sleep(0.1)
        assert 200 == ready.status_code, ready.text
        scraped = await api.client.get("/metrics", headers=bearer(METRICS_TOKEN))
        assert (200, True) == (scraped.status_code, "engram_gate" in scraped.text)
    finally:
        await admin.close()
