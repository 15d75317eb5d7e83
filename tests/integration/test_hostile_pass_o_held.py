"""Hostile pass O: probes that held (kept as regression tests). Real embedded PostgreSQL, the
real embedding model, no mocks: backends are killed with ``pg_terminate_backend``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

import asyncpg
import httpx

from engram import Kernel
from engram.errors import EngramError
from engram.memory.gate.requests import GateRequest, GateResult
from engram.memory.types import (
    AccessLevel,
    GateAction,
    MemoryRecord,
    MemoryStatus,
    MemoryType,
    TrustLevel,
)
from tests.conftest import METRICS_TOKEN, ScratchDatabase
from tests.integration import test_http_api as http_api
from tests.integration.consolidation_helpers import DEEP, head_of
from tests.integration.gate_helpers import BOSS, EXTERNAL, WRITER, create
from tests.integration.pass_n_helpers import reads
from tests.integration.race_helpers import broken_invariants, jittered
from tests.integration.test_consumed_resolution import COOKIES as COOKIES_BELIEF
from tests.integration.test_consumed_resolution import (
    SWITCHED,
    VERBOSE_AUTH,
    _compressed,
    _found_before_the_batch,
    _write,
)
from tests.integration.test_http_api import Api, bearer
from tests.integration.twin_helpers import Store, differences, twin_a, twin_b

__all__ = ["api", "twin_a", "twin_b"]

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
    where = f"{response.request.url.path} {response.status_code}"
    secrets = ("engram_gate", "engram_memory", "unreachable", "Error", "socket", "port")
    found = [f"{where}: {secret!r}" for secret in secrets if secret in response.text]
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
    rng = random.Random(20261127)  # noqa: S311 - a test's seeded jitter
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


# --- a contradiction written while a batch consumes what it contradicts -----------------------

API_FACTS = [
    "The public API authenticates requests with JWT bearer tokens.",
    "The public API rate-limits each client to 100 requests per minute.",
    "The public API is served from eu-west-1 behind CloudFront.",
]
COOKIES = "The public API authenticates requests with session cookies."


async def _settle(kernel: Kernel) -> None:
    """Until the outbox is empty (a delivery whose backend was killed is tried again)."""
    for _ in range(50):
        try:
            await kernel.events.settled(timeout_seconds=20)
            left = await kernel.db.fetchval(
                "SELECT count(*) FROM outbox WHERE dispatched_at IS NULL"
            )
        except EngramError:
            await asyncio.sleep(0.1)
            continue
        if left == 0:
            return
        await asyncio.sleep(0.2)
    raise AssertionError("the outbox did not empty")


async def _until_answered(kernel: Kernel, request: GateRequest) -> GateResult:
    """``request``, sent again under its request id while its backend is killed under it."""
    for _ in range(50):
        try:
            return await kernel.gate.evaluate(request)
        except EngramError:
            await asyncio.sleep(0.05)
    raise AssertionError("the write was never answered")


async def _merges_touched(kernel: Kernel, namespace: str) -> list[str]:
    """Live merges of ``namespace`` that a resolution challenged or ended (each must be
    escalated instead, ADR-010's seventh and eighth amendments)."""
    rows = await kernel.db.fetch(
        "SELECT record_id, status, event_time_end, metadata FROM memories "
        "WHERE namespace = $1 AND superseded_by IS NULL AND consolidation_path = 'slow' "
        "AND status <> 'forgotten'",
        namespace,
    )
    touched = []
    for row in rows:
        metadata = row["metadata"]
        if isinstance(metadata, str):
            metadata = json.loads(metadata)
        made = metadata.get("consolidation") or {}
        if made.get("action") != "merge" or int(made.get("sources", 1)) < 2:
            continue
        if row["status"] != "active" or row["event_time_end"] is not None:
            touched.append(f"{row['record_id']}: {row['status']} until {row['event_time_end']}")
    return touched


async def test_a_contradiction_racing_a_batch_and_killed_backends_never_splits_a_merge(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """Twelve rounds, each in a namespace of its own: three beliefs about the public API, then
    at once a deep pass (which merges them) and a trusted agent's contradicting belief
    (session cookies), whose resolution the outbox delivers whenever it commits; in every
    other round the kernel's backends are terminated at a random moment, and the write is
    sent again under its request id until answered. Whatever the order: the write is stored
    once, no live merge is challenged or ended (a contradiction of one of its accounts is
    escalated), no source is readable beside its live summary, and the version store and
    the audit log hold every invariant."""
    rng = random.Random(2026_11_27)  # noqa: S311 - a test's seeded jitter
    admin = await asyncpg.connect(database.admin_url)
    acknowledged: list[tuple[UUID, UUID]] = []
    try:
        for n in range(12):
            namespace = f"race-{n}"
            for text in API_FACTS:
                record = MemoryRecord.draft(
                    MemoryType.BELIEF,
                    text,
                    source_agent=BOSS.agent_id,
                    source_confidence=0.9,
                    namespace=namespace,
                )
                await _until_answered(kernel, create(record, BOSS))
            await _settle(kernel)
            cookies = MemoryRecord.draft(
                MemoryType.BELIEF,
                COOKIES,
                source_agent=BOSS.agent_id,
                source_confidence=0.5,
                namespace=namespace,
            )
            request = GateRequest(
                GateAction.CREATE, cookies, BOSS, EXTERNAL, request_id=f"cookies-{n}"
            )

            async def deep() -> None:
                with contextlib.suppress(EngramError):
                    await kernel.consolidation.run(DEEP)

            async def kill() -> None:
                await _kill_backends(admin)

            steps: list[Callable[[], Awaitable[Any]]] = [
                deep,
                lambda request=request: _until_answered(kernel, request),
            ]
            if n % 2:
                steps.append(kill)
            answers = await jittered(rng, steps, spread=0.4)
            written = answers[1]
            assert written.record_id == cookies.record_id, written.reason
            await _settle(kernel)
            head = await head_of(kernel, cookies.record_id)
            acknowledged.append((cookies.record_id, cookies.id))
            assert [] == await _merges_touched(kernel, namespace), (n, head.status)
        await _settle(kernel)
        assert [] == await broken_invariants(kernel, acknowledged)
    finally:
        await admin.close()


# --- differential: a consumed record and its summary above the writer's clearance ------------


async def _consumed_conflict_run(kernel: Kernel, *, hidden: bool) -> list[Any]:
    """The writer's long JWT belief, compressed by a deep pass; its later, less sure
    session-cookies belief, whose contradiction is resolved after the batch; what the writer
    was answered and reads. In store B the trusted agent holds the same two beliefs at
    ``sensitive`` (the same deep pass compresses its JWT belief into a sensitive summary)."""
    if hidden:
        for text, confidence in ((VERBOSE_AUTH, 0.9), (COOKIES_BELIEF, 0.4)):
            secret = MemoryRecord.draft(
                MemoryType.BELIEF,
                text,
                source_agent=BOSS.agent_id,
                source_confidence=confidence,
                access_level=AccessLevel.SENSITIVE,
            )
            assert (await kernel.gate.evaluate(create(secret, BOSS))).record_id is not None
        await kernel.events.settled()
    verbose = await _write(kernel, WRITER, VERBOSE_AUTH, 0.9)
    report = await kernel.consolidation.run(DEEP)
    [summary] = [
        item.record_id
        for batch in report.batches
        for item in batch.items
        if batch.level is AccessLevel.AGENT
    ]
    draft = MemoryRecord.draft(
        MemoryType.BELIEF, COOKIES_BELIEF, source_agent=WRITER.agent_id, source_confidence=0.5
    )
    answer = await kernel.gate.evaluate(create(draft, WRITER))
    await kernel.events.settled()
    cookies = answer.record_id
    assert cookies is not None
    found = await _found_before_the_batch(kernel, cookies, verbose)
    await kernel.gate.resolve_conflicts(found)
    await kernel.events.settled()
    said = [
        answer.decision.value,
        answer.outcome.value if answer.outcome else None,
        answer.reason,
        [c.classification.value for c in answer.layer2_decision.conflicts]
        if answer.layer2_decision
        else None,
    ]
    return [said, *await reads(kernel, WRITER, [verbose, summary, cookies], "API auth")]


async def test_a_hidden_consumed_twin_changes_nothing_the_writer_gets(
    twin_a: Store, twin_b: Store
) -> None:
    """A standard writer's contradiction resolved after a batch compressed the record it
    contradicts (escalated: the writer may not change what consolidation wrote). In store B
    a trusted agent's sensitive copies of both beliefs sit beside them, one of them
    compressed by the same pass. The writer's answer, the statuses it reads, its searches
    and its listing are the same in both stores."""
    a = await _consumed_conflict_run(twin_a.kernel, hidden=False)
    b = await _consumed_conflict_run(twin_b.kernel, hidden=True)
    assert ["consolidated", "active", "challenged"] == [row[0] for row in a[1:4]]
    assert [] == differences([a], [b])


async def test_a_rollback_keeps_the_end_of_a_superseded_sources_validity(kernel: Kernel) -> None:
    """A supersession resolved after a batch compressed the record it supersedes ends the
    validity of the source (kept ``consolidated``) and of the compression. Rolled back (with
    force: the resolver changed the compression), the source comes back ``active`` with its
    validity still ended where the newer statement began, the newer statement untouched."""
    verbose, summary = await _compressed(kernel, BOSS)
    newer = await _write(kernel, BOSS, SWITCHED, 0.9)
    found = await _found_before_the_batch(
        kernel, newer, verbose, "supersession", ("supersede_older",)
    )
    await kernel.gate.resolve_conflicts(found)
    await kernel.events.settled()
    ended = (await head_of(kernel, verbose)).event_time_end
    assert ended is not None
    [batch] = await kernel.consolidation.batches()
    await kernel.consolidation.rollback(batch.batch_id, force=True)
    await kernel.events.settled()
    source, made, new = [await head_of(kernel, r) for r in (verbose, summary, newer)]
    assert (MemoryStatus.ACTIVE, ended) == (source.status, source.event_time_end)
    assert MemoryStatus.FORGOTTEN is made.status
    assert (MemoryStatus.ACTIVE, None) == (new.status, new.event_time_end)
    assert [] == await broken_invariants(kernel)
