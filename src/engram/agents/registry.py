"""Agents and their tokens.

A token is ``engram_`` followed by 43 URL-safe characters (32 random bytes). The database
keeps only its SHA-256 (a token has full entropy, so a slow password hash would add nothing)
and its first characters, to tell tokens apart in listings. A token is shown once, when the
agent is added or its token rotated.

Authentication results are cached for a few seconds per token, so a revoked or rotated
token stops working within :data:`CACHE_SECONDS`.

A name is unique whatever its case (``LOCAL`` is refused beside ``local``, as ``local`` is),
since it is the agent's identity wherever people read one: audit rows, listings, the
records it wrote. The commands that name an agent find it in any case and answer with the
spelling it was registered under.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog

from engram.errors import (
    AlreadyExists,
    NotFound,
    Unauthenticated,
    UniqueViolation,
    ValidationFailed,
)
from engram.infra.db import DatabaseAdapter, Row
from engram.infra.sql import load_queries
from engram.memory.gate.access import TIER_READ_LEVEL, TIER_TYPES, TIER_WRITE_LEVEL, caller_for_tier
from engram.memory.gate.rate_limit import MAX_WRITES_PER_MINUTE, MIN_WRITES_PER_MINUTE
from engram.memory.types import AccessLevel, CallerIdentity, MemoryType, TrustLevel

log = structlog.get_logger("engram.agents")
SQL = load_queries("engram.agents.sql", "agents.sql")

TOKEN_PREFIX = "engram_"  # noqa: S105 - the public marker of a token, not a secret
CACHE_SECONDS = 5.0
SEEN_EVERY_SECONDS = 60.0
#: An agent's name, whole (``fullmatch``: a ``$`` also matches before a final newline).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_TOKEN = re.compile(r"engram_[A-Za-z0-9_-]{43}")


def hash_token(token: str) -> bytes:
    """The digest the registry stores for ``token``."""
    return hashlib.sha256(token.encode("utf-8")).digest()


def new_token() -> str:
    """A fresh random token."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class Agent:
    """A registered agent, without its token."""

    id: uuid.UUID
    name: str
    trust_level: TrustLevel
    token_prefix: str
    admin: bool
    allowed_types: frozenset[MemoryType]
    max_write_level: AccessLevel | None
    max_read_level: AccessLevel
    writes_per_minute: float | None
    created_at: datetime
    revoked_at: datetime | None
    last_seen_at: datetime | None

    @property
    def active(self) -> bool:
        """False once revoked."""
        return self.revoked_at is None

    def caller(self) -> CallerIdentity:
        """The identity the Gate sees for this agent."""
        narrowing: dict[str, Any] = {"allowed_types": self.allowed_types}
        narrowing["max_read_level"] = self.max_read_level
        if self.max_write_level is not None:
            narrowing["max_write_level"] = self.max_write_level
        if self.writes_per_minute is not None:
            narrowing["writes_per_minute"] = self.writes_per_minute
        return caller_for_tier(self.name, self.trust_level, **narrowing)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready description (no secret)."""
        return {
            "id": str(self.id),
            "name": self.name,
            "trust_level": self.trust_level.value,
            "token_prefix": self.token_prefix,
            "admin": self.admin,
            "allowed_types": sorted(t.value for t in self.allowed_types),
            "max_write_level": None if self.max_write_level is None else self.max_write_level.value,
            "max_read_level": self.max_read_level.value,
            "writes_per_minute": self.writes_per_minute,
            "created_at": self.created_at.isoformat(),
            "revoked_at": None if self.revoked_at is None else self.revoked_at.isoformat(),
            "last_seen_at": None if self.last_seen_at is None else self.last_seen_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated agent as adapters see it: the Gate identity plus the admin flag."""

    agent: Agent
    caller: CallerIdentity

    @property
    def admin(self) -> bool:
        """True for agents allowed to use the admin endpoints."""
        return self.agent.admin


def _agent(row: Row) -> Agent:
    perms: dict[str, Any] = row["permissions"]
    trust = TrustLevel(row["trust_level"])
    types = perms.get("types")
    write = perms.get("max_write_level")
    return Agent(
        id=row["id"],
        name=row["name"],
        trust_level=trust,
        token_prefix=row["token_prefix"],
        admin=bool(perms.get("admin", False)),
        allowed_types=(
            TIER_TYPES[trust] if types is None else frozenset(MemoryType(t) for t in types)
        ),
        max_write_level=None if write is None else AccessLevel(write),
        max_read_level=AccessLevel(perms.get("max_read_level", TIER_READ_LEVEL[trust].value)),
        writes_per_minute=perms.get("writes_per_minute"),
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
        last_seen_at=row["last_seen_at"],
    )


def _permissions(
    trust: TrustLevel,
    *,
    types: Iterable[MemoryType] | None,
    admin: bool,
    max_write_level: AccessLevel | None,
    max_read_level: AccessLevel | None,
    writes_per_minute: float | None,
) -> dict[str, Any]:
    """Validated permissions: an agent may be narrowed below its tier, never widened."""
    problems: list[str] = []
    chosen = None if types is None else sorted({MemoryType(t) for t in types})
    if chosen is not None and not set(chosen) <= TIER_TYPES[trust]:
        extra = ", ".join(t.value for t in chosen if t not in TIER_TYPES[trust])
        problems.append(f"a {trust.value} agent may not write {extra}")
    ceiling = TIER_WRITE_LEVEL[trust]
    if max_write_level is not None and (ceiling is None or not ceiling.allows(max_write_level)):
        problems.append(f"a {trust.value} agent may not write at {max_write_level.value}")
    if max_read_level is not None and not TIER_READ_LEVEL[trust].allows(max_read_level):
        problems.append(f"a {trust.value} agent may not read {max_read_level.value} records")
    if writes_per_minute is not None and not (
        MIN_WRITES_PER_MINUTE <= writes_per_minute <= MAX_WRITES_PER_MINUTE
    ):
        problems.append(
            f"writes per minute must be from {MIN_WRITES_PER_MINUTE:g} to {MAX_WRITES_PER_MINUTE:g}"
        )
    if problems:
        raise ValidationFailed(errors=problems)
    perms: dict[str, Any] = {"admin": admin}
    if chosen is not None:
        perms["types"] = [t.value for t in chosen]
    if max_write_level is not None:
        perms["max_write_level"] = max_write_level.value
    if max_read_level is not None:
        perms["max_read_level"] = max_read_level.value
    if writes_per_minute is not None:
        perms["writes_per_minute"] = writes_per_minute
    return perms


def _taken(name: str, holder: Row | None) -> AlreadyExists:
    """The refusal of ``name``, naming the agent that holds it (in its own spelling)."""
    held = name if holder is None else str(holder["name"])
    if held == name:
        return AlreadyExists(f"an agent named {name!r} already exists")
    return AlreadyExists(
        f"an agent named {held!r} already exists, and names are unique whatever their case"
    )


class AgentRegistry:
    """Adds, lists, revokes and authenticates agents."""

    def __init__(self, db: DatabaseAdapter, *, cache_seconds: float = CACHE_SECONDS) -> None:
        self._db = db
        self._cache_seconds = cache_seconds
        self._cache: dict[bytes, tuple[float, Principal]] = {}
        self._seen: dict[uuid.UUID, float] = {}

    async def add(
        self,
        name: str,
        trust: TrustLevel,
        *,
        types: Iterable[MemoryType] | None = None,
        admin: bool = False,
        max_write_level: AccessLevel | None = None,
        max_read_level: AccessLevel | None = None,
        writes_per_minute: float | None = None,
    ) -> tuple[Agent, str]:
        """Register an agent; returns it with its token (the only time the token is shown)."""
        if not _NAME.fullmatch(name):
            raise ValidationFailed(
                errors=[f"agent name {name!r}: 1-64 letters, digits, '.', '_' or '-'"]
            )
        perms = _permissions(
            trust,
            types=types,
            admin=admin,
            max_write_level=max_write_level,
            max_read_level=max_read_level,
            writes_per_minute=writes_per_minute,
        )
        token = new_token()
        try:
            row = await self._db.fetchrow(
                SQL["insert"],
                uuid.uuid4(),
                name,
                hash_token(token),
                token[: len(TOKEN_PREFIX) + 6],
                trust.value,
                perms,
            )
        except UniqueViolation as exc:
            # A retry after a COMMIT whose acknowledgement was lost meets the row it wrote:
            # that one holds this call's token, and the agent is this call's.
            row = await self._db.fetchrow(SQL["by_token"], hash_token(token))
            if row is None or row["name"] != name:
                raise _taken(name, await self._db.fetchrow(SQL["by_name"], name)) from exc
        assert row is not None  # noqa: S101 - INSERT … RETURNING returns the row
        log.info("agents.added", agent=name, trust=trust.value, admin=admin)
        return _agent(row), token

    async def get(self, name: str) -> Agent:
        """The agent called ``name``."""
        row = await self._named("by_name", name)
        if row is None:
            raise NotFound(f"no agent named {name!r}")
        return _agent(row)

    async def _named(self, statement: str, name: str, *args: object) -> Row | None:
        """``statement`` run for the agent called ``name`` (in any case); None, without asking
        the database, for a text no agent can be called (a NUL or a lone surrogate in it, which
        the driver would refuse as a database error)."""
        if _NAME.fullmatch(name) is None:
            return None
        return await self._db.fetchrow(SQL[statement], name, *args)

    async def list_agents(self, *, include_revoked: bool = True) -> list[Agent]:
        """Every agent, oldest first."""
        return [_agent(row) for row in await self._db.fetch(SQL["listing"], include_revoked)]

    async def count(self) -> int:
        """How many agents were ever registered (revoked ones included)."""
        return int(await self._db.fetchval(SQL["count"]))

    async def revoke(self, name: str) -> Agent:
        """Revoke an agent's token for good (idempotent)."""
        row = await self._named("revoke", name)
        if row is None:
            raise NotFound(f"no agent named {name!r}")
        self._cache.clear()
        agent = _agent(row)
        log.info("agents.revoked", agent=agent.name)
        return agent

    async def rotate(self, name: str) -> tuple[Agent, str]:
        """Give an active agent a new token; the old one stops working."""
        token = new_token()
        row = await self._named("rotate", name, hash_token(token), token[: len(TOKEN_PREFIX) + 6])
        if row is None:
            await self.get(name)  # NotFound for an unknown name
            raise NotFound(f"agent {name!r} is revoked; add a new agent instead")
        self._cache.clear()
        agent = _agent(row)
        log.info("agents.rotated", agent=agent.name)
        return agent, token

    async def authenticate(self, token: str | None) -> Principal:
        """The principal holding ``token``; :class:`Unauthenticated` for anything else."""
        if not token or not _TOKEN.fullmatch(token):
            raise Unauthenticated("a valid agent token is required")
        digest = hash_token(token)
        now = time.monotonic()
        cached = self._cache.get(digest)
        if cached is not None and now - cached[0] < self._cache_seconds:
            return cached[1]
        row = await self._db.fetchrow(SQL["by_token"], digest)
        if row is None or row["revoked_at"] is not None:
            self._cache.pop(digest, None)
            raise Unauthenticated("the agent token is unknown or revoked")
        agent = _agent(row)
        principal = Principal(agent=agent, caller=agent.caller())
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[digest] = (now, principal)
        if now - self._seen.get(agent.id, -SEEN_EVERY_SECONDS) >= SEEN_EVERY_SECONDS:
            self._seen[agent.id] = now
            await self._db.execute(SQL["seen"], agent.id)
        return principal

    async def ensure_first_agent(self, name: str = "local") -> tuple[Agent, str] | None:
        """On an empty registry, add a trusted admin agent and return it with its token."""
        if await self.count() > 0:
            return None
        try:
            return await self.add(name, TrustLevel.TRUSTED, admin=True)
        except AlreadyExists:  # another process won the race
            return None
