"""The agent registry: tokens shown once, stored hashed, revocable, rotatable."""

from __future__ import annotations

import asyncpg
import pytest

from engram import Kernel
from engram.agents.registry import hash_token
from engram.errors import AlreadyExists, NotFound, Unauthenticated, ValidationFailed
from engram.memory.types import AccessLevel, MemoryType, TrustLevel
from tests.conftest import ScratchDatabase


async def test_a_token_authenticates_its_agent_and_only_its_hash_is_stored(
    kernel: Kernel, database: ScratchDatabase
) -> None:
    """A token authenticates its agent with the agent's trust and admin flag, and only the token's
    hash is stored.
    """
    agent, token = await kernel.agents.add("planner", TrustLevel.STANDARD)
    principal = await kernel.agents.authenticate(token)
    assert "planner" == principal.caller.agent_id
    assert TrustLevel.STANDARD is principal.caller.trust_level
    assert not principal.admin
    conn = await asyncpg.connect(database.admin_url)
    try:
        row = await conn.fetchrow("SELECT * FROM engram.agents WHERE name = 'planner'")
    finally:
        await conn.close()
    assert hash_token(token) == bytes(row["token_hash"])
    assert token not in str(dict(row))
    assert token.startswith(agent.token_prefix)


async def test_narrowed_permissions_reach_the_caller_identity(kernel: Kernel) -> None:
    """Permissions narrowed at creation reach the caller identity: types, write level, rate and
    admin flag.
    """
    _, token = await kernel.agents.add(
        "scribe",
        TrustLevel.STANDARD,
        types=[MemoryType.EPISODE],
        max_write_level=AccessLevel.AGENT,
        writes_per_minute=5,
        admin=True,
    )
    principal = await kernel.agents.authenticate(token)
    assert frozenset({MemoryType.EPISODE}) == principal.caller.allowed_types
    assert AccessLevel.AGENT is principal.caller.max_write_level
    assert 5 == principal.caller.writes_per_minute
    assert principal.admin


async def test_permissions_cannot_widen_a_tier(kernel: Kernel) -> None:
    """Creating an agent with permissions wider than its trust tier, or an invalid name, is refused
    and creates nothing.
    """
    with pytest.raises(ValidationFailed, match="may not write skill"):
        await kernel.agents.add("narrow", TrustLevel.RESTRICTED, types=[MemoryType.SKILL])
    with pytest.raises(ValidationFailed, match="sensitive"):
        await kernel.agents.add("wide", TrustLevel.STANDARD, max_write_level=AccessLevel.SENSITIVE)
    with pytest.raises(ValidationFailed, match="agent name"):
        await kernel.agents.add("no spaces allowed", TrustLevel.STANDARD)
    assert [] == await kernel.agents.list_agents()


async def test_names_are_unique(kernel: Kernel) -> None:
    """A second agent with an existing name is refused as already existing."""
    await kernel.agents.add("twin", TrustLevel.STANDARD)
    with pytest.raises(AlreadyExists):
        await kernel.agents.add("twin", TrustLevel.TRUSTED)


@pytest.mark.parametrize("token", [None, "", "engram_short", "Bearer x", "engram_" + "A" * 43])
async def test_malformed_or_unknown_tokens_are_refused(kernel: Kernel, token: str | None) -> None:
    """A malformed or unknown token does not authenticate."""
    with pytest.raises(Unauthenticated):
        await kernel.agents.authenticate(token)


async def test_revoked_and_rotated_tokens_stop_working_at_once(kernel: Kernel) -> None:
    """Revoking or rotating a token stops the old token at once, and a revoked agent cannot be
    revoked or found again.
    """
    _, first = await kernel.agents.add("rotor", TrustLevel.STANDARD)
    await kernel.agents.authenticate(first)  # cached now
    _, second = await kernel.agents.rotate("rotor")
    with pytest.raises(Unauthenticated):
        await kernel.agents.authenticate(first)
    assert "rotor" == (await kernel.agents.authenticate(second)).agent.name
    revoked = await kernel.agents.revoke("rotor")
    assert not revoked.active
    with pytest.raises(Unauthenticated):
        await kernel.agents.authenticate(second)
    with pytest.raises(NotFound, match="revoked"):
        await kernel.agents.rotate("rotor")
    with pytest.raises(NotFound):
        await kernel.agents.revoke("nobody")
    names = [a.name for a in await kernel.agents.list_agents(include_revoked=False)]
    assert [] == names


async def test_the_first_agent_is_created_once(kernel: Kernel) -> None:
    """The first agent is created once, as a trusted admin whose token authenticates, and never
    again.
    """
    created = await kernel.agents.ensure_first_agent()
    assert created is not None
    agent, token = created
    assert agent.admin
    assert TrustLevel.TRUSTED is agent.trust_level
    assert agent.name == (await kernel.agents.authenticate(token)).agent.name
    assert await kernel.agents.ensure_first_agent() is None
