"""Random sequences of CREATE, UPDATE and FORGET (valid and invalid) against a model."""

from __future__ import annotations

import asyncio
import uuid
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from engram import Kernel, open_kernel
from engram.config import EngramSettings
from engram.infra.embedded_server import EmbeddedPostgres
from engram.infra.fastembed_embedder import FastembedEmbedder
from engram.memory.fingerprint import normalise
from engram.memory.gate.requests import GateRequest, WriteOutcome
from engram.memory.types import GateDecision
from tests.integration.gate_helpers import EXTERNAL, STANDARD, belief, create, update

CALLER = replace(STANDARD, writes_per_minute=1_000_000)
NOUNS = ["deploy target", "cache TTL", "queue depth", "replica count", "retention period"]


def content(n: int) -> str:
    """Statement number ``n``: distinct numbers make distinct claims."""
    return f"The {NOUNS[n % len(NOUNS)]} of service {n // len(NOUNS)} is {n * 7 + 3} units."


@dataclass
class ModelRecord:
    version: int
    content: str
    forgotten: bool = False


@pytest.mark.slow
def test_gate_matches_a_model_of_version_chains(
    pg_server: EmbeddedPostgres, template_db: str, embedder: FastembedEmbedder
) -> None:
    """After every step the store equals the model, and audit rows equal evaluations."""

    class GateMachine(RuleBasedStateMachine):
        records = Bundle("records")

        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.name = f"h_{uuid.uuid4().hex[:12]}"
            self.stack = AsyncExitStack()
            self.model: dict[uuid.UUID, ModelRecord] = {}
            self.evaluations = 0
            self.kernel: Kernel = self.run(self._open())

        def run(self, coro: Any) -> Any:
            return self.loop.run_until_complete(coro)

        async def _open(self) -> Kernel:
            admin = await asyncpg.connect(pg_server.admin_url())
            try:
                await admin.execute(f'CREATE DATABASE "{self.name}" TEMPLATE "{template_db}"')
            finally:
                await admin.close()
            config = EngramSettings(
                database_url=pg_server.url(user="engram_runtime", database=self.name),
                migrate_on_start=False,
            )
            return await self.stack.enter_async_context(
                open_kernel(settings=config, embeddings=embedder)
            )

        def teardown(self) -> None:
            async def close() -> None:
                await self.stack.aclose()
                admin = await asyncpg.connect(pg_server.admin_url())
                try:
                    await admin.execute(f'DROP DATABASE "{self.name}" WITH (FORCE)')
                finally:
                    await admin.close()

            self.run(close())
            self.loop.close()

        def evaluate(self, request: GateRequest) -> Any:
            self.evaluations += 1
            return self.run(self.kernel.gate.evaluate(request))

        def live_with(self, text: str) -> set[uuid.UUID]:
            """Live records holding ``text``: any of them may be the one reinforced."""
            return {
                record_id
                for record_id, item in self.model.items()
                if not item.forgotten and normalise(item.content) == normalise(text)
            }

        @initialize()
        def start(self) -> None:
            assert self.kernel is not None

        @rule(target=records, n=st.integers(0, 24))
        def create_valid(self, n: int) -> uuid.UUID:
            text = content(n)
            existing = self.live_with(text)
            result = self.evaluate(create(belief(text), CALLER))
            assert GateDecision.APPROVED == result.decision
            if existing:
                assert WriteOutcome.REINFORCED == result.outcome
                assert result.record_id is not None
                assert result.record_id in existing
                return result.record_id
            assert WriteOutcome.CREATED == result.outcome
            assert result.record_id is not None
            self.model[result.record_id] = ModelRecord(1, text)
            return result.record_id

        @rule(n=st.integers(0, 5))
        def create_invalid(self, n: int) -> None:
            result = self.evaluate(create(belief(f"Always restart service {n} first."), CALLER))
            assert GateDecision.REJECTED == result.decision

        @rule(record_id=records, n=st.integers(0, 24), stale=st.booleans())
        def update_record(self, record_id: uuid.UUID, n: int, stale: bool) -> None:
            item = self.model[record_id]
            expected = item.version - 1 if stale else item.version
            text = content(n)
            result = self.evaluate(update(record_id, text, expected, CALLER))
            if item.forgotten:
                assert GateDecision.REJECTED == result.decision
            elif stale:
                assert (GateDecision.CONFLICT, item.version) == (
                    result.decision,
                    result.current_version,
                )
            elif normalise(text) == normalise(item.content) and text == item.content:
                assert WriteOutcome.REINFORCED == result.outcome
            else:
                assert (WriteOutcome.UPDATED, item.version + 1) == (result.outcome, result.version)
                item.version += 1
                item.content = text

        @rule(record_id=records, stale=st.booleans())
        def forget_record(self, record_id: uuid.UUID, stale: bool) -> None:
            item = self.model[record_id]
            head = self.run(self._head(record_id))
            expected = item.version - 1 if stale else item.version
            result = self.evaluate(
                GateRequest.forget(head, CALLER, EXTERNAL, expected_version=expected)
            )
            if item.forgotten:
                assert GateDecision.REJECTED == result.decision
            elif stale:
                assert GateDecision.CONFLICT == result.decision
            else:
                assert WriteOutcome.FORGOTTEN == result.outcome
                item.forgotten = True

        @rule()
        def update_unknown(self) -> None:
            result = self.evaluate(update(uuid.uuid4(), content(1), 1, CALLER))
            assert GateDecision.REJECTED == result.decision

        async def _head(self, record_id: uuid.UUID) -> Any:
            from engram.memory import store  # noqa: PLC0415

            return await store.head(self.kernel.db, record_id)

        @invariant()
        def store_matches_model(self) -> None:
            rows = self.run(
                self.kernel.db.fetch(
                    "SELECT record_id, version, content, status::text AS status "
                    "FROM memories WHERE superseded_by IS NULL"
                )
            )
            stored = {
                row["record_id"]: (row["version"], row["content"], row["status"] == "forgotten")
                for row in rows
            }
            expected = {
                record_id: (item.version, item.content, item.forgotten)
                for record_id, item in self.model.items()
            }
            assert expected == stored
            audited = self.run(self.kernel.db.fetchval("SELECT count(*) FROM librarian_audit"))
            assert self.evaluations == audited

    run_state_machine_as_test(
        GateMachine,
        settings=settings(
            max_examples=12,
            stateful_step_count=15,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
