"""A small store of facts the retrieval tests search, and the callers that write and read it."""

from __future__ import annotations

from dataclasses import replace
from uuid import UUID

from engram import Kernel
from engram.memory.gate.access import caller_for_tier
from engram.memory.types import CallerIdentity, TrustLevel
from tests.integration.gate_helpers import STANDARD, belief, create

WRITER = replace(STANDARD, writes_per_minute=100_000)
READER = caller_for_tier("reader", TrustLevel.STANDARD)

FACTS = [
    "The billing service stores invoices in PostgreSQL 16 on the eu-west cluster.",
    "Deployments to production happen every Tuesday after the change review meeting.",
    "The on-call rotation hands over each Monday at nine in the morning.",
    "Grafana dashboards for the checkout flow live in the payments folder.",
    "Kafka topic orders-v2 keeps seven days of retention for replays.",
]


async def write(kernel: Kernel, content: str, caller: CallerIdentity = WRITER) -> UUID:
    """Store one belief through the Gate; its record id (it must be approved)."""
    result = await kernel.gate.evaluate(create(belief(content), caller))
    assert result.approved, result.reason
    assert result.record_id is not None
    return result.record_id


async def seed(kernel: Kernel) -> dict[str, UUID]:
    """Store every fact; fact -> record id."""
    return {fact: await write(kernel, fact) for fact in FACTS}
