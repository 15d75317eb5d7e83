"""Request bodies and documented response shapes of the REST API.

The bodies of writes are not parsed here: they go to :class:`AgentSession` as the client sent
them, so malformed input is rejected *and audited* by the Gate. Their schemas are published
from :class:`WriteInput` (``MemoryInput``, and ``MemoryPatch`` with every field optional).
Responses are rendered by :mod:`engram.protocols.views`, which also holds the models of the
shapes the MCP server shares; the models below document the others.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from engram.memory.types import AccessLevel, MemoryRecord
from engram.protocols.inprocess import JsonBool, SearchInput, WriteInput

#: PostgreSQL text cannot hold NUL; such input is refused before it reaches a query.
NO_NUL = r"^[^\x00]*$"
PG_BIGINT_MAX = 2**63 - 1


#: The body of ``POST /v1/search`` (shared with the MCP tool ``recall``).
SearchBody = SearchInput


class FeedbackBody(BaseModel):
    """Whether a retrieved record helped."""

    model_config = ConfigDict(extra="forbid")

    record_id: UUID
    useful: JsonBool
    signal: str = Field(default="explicit", min_length=1, max_length=32, pattern=NO_NUL)


class ReleaseBody(BaseModel):
    """An admin's release of a quarantined record."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=2000, pattern=NO_NUL)
    level: AccessLevel = AccessLevel.AGENT


# --- documented responses --------------------------------------------------------------------


class AuditEntryView(BaseModel):
    """One audit row (JSON columns parsed, hashes in hex)."""

    model_config = ConfigDict(extra="allow")

    seq: int
    decision_id: UUID
    request_id: str
    occurred_at: datetime
    action: str
    decision: str
    outcome: str
    decision_type: str
    reason: str
    agent_id: str


class AuditPage(BaseModel):
    """A page of audit rows; pass ``next_cursor`` as ``cursor`` for the next one."""

    entries: list[AuditEntryView]
    next_cursor: int | None


class QuarantinePage(BaseModel):
    """Quarantined records in the order of their quarantine decisions; pass ``next_cursor``
    (the audit seq of the last one's decision) as ``cursor`` for more."""

    records: list[MemoryRecord]
    next_cursor: int | None


class ReleaseView(BaseModel):
    """The released record and the id of the audited admin decision."""

    decision_id: UUID
    record: MemoryRecord


class EscalationView(BaseModel):
    """An open escalation: a conflict a person must decide."""

    id: int
    kind: str
    record_id: UUID
    payload: dict[str, Any]
    created_at: datetime


class ConflictsView(BaseModel):
    """Open escalations, oldest first."""

    conflicts: list[EscalationView]


AuditDecision = Literal["approved", "rejected", "conflict"]
AuditAction = Literal["CREATE", "UPDATE", "FORGET", "RELEASE", "REVEAL"]


def write_schemas() -> dict[str, dict[str, Any]]:
    """Component schemas of the write bodies (``MemoryInput``, ``MemoryPatch``) and their
    definitions, referenced as ``#/components/schemas/…``."""
    full = WriteInput.model_json_schema(ref_template="#/components/schemas/{model}")
    definitions: dict[str, dict[str, Any]] = full.pop("$defs", {})
    full["title"] = "MemoryInput"
    full["description"] = "A memory proposed by an agent (unknown fields are rejected)."
    patch = copy.deepcopy(full)
    patch.pop("required", None)
    for field in patch["properties"].values():
        field.pop("default", None)
    patch["title"] = "MemoryPatch"
    patch["description"] = (
        "The fields to change; the others keep the current version's values "
        "(source_confidence starts afresh; event_time too when the content changes)."
    )
    return {**definitions, "MemoryInput": full, "MemoryPatch": patch}
