"""JSON shapes shared by the HTTP API, the MCP server and the CLI.

Every adapter renders records, Gate results and search hits the same way, so a client can
move between transports without relearning the payloads. Each render function has a model
beside it that documents its shape: the HTTP API publishes them in its OpenAPI document and
the MCP server as its tools' output schemas, and tests validate rendered results against them.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from engram.memory.types import GateDecision, MemoryRecord, WriteOutcome
from engram.retrieval.feedback import FeedbackReceipt
from engram.retrieval.search import SearchHit, SearchResult

if TYPE_CHECKING:
    from engram.memory.gate.requests import GateResult


def record_view(record: MemoryRecord) -> dict[str, Any]:
    """A record version as clients see it (JSON-ready; no embedding)."""
    return record.model_dump(mode="json", exclude={"expected_version"})


class CheckView(BaseModel):
    """One Layer 1 check of the Gate."""

    model_config = ConfigDict(extra="allow")

    name: str
    passed: bool
    detail: str


class DecisionView(BaseModel):
    """A Gate decision and the record version it wrote (or reinforced)."""

    decision: GateDecision
    decision_id: UUID
    reason: str
    outcome: WriteOutcome
    record_id: UUID | None
    version: int | None
    current_version: int | None
    retry_after_seconds: float | None
    degraded: bool
    replayed: bool
    layer1_checks: list[CheckView]
    layer2_decision: dict[str, Any] | None
    failed_checks: list[CheckView]
    record: MemoryRecord | None


def result_view(result: GateResult) -> dict[str, Any]:
    """A Gate decision: its summary, the checks that failed and the record as written."""
    # The Gate's modules are imported by the adapters that write, not by the admin commands.
    from engram.memory.gate.requests import result_json  # noqa: PLC0415

    body = result_json(result)
    body["failed_checks"] = [check.to_json() for check in result.failed_checks]
    body["record"] = None if result.modified_record is None else record_view(result.modified_record)
    return body


class VersionsView(BaseModel):
    """Every version of a record the caller may read, oldest first."""

    record_id: UUID
    versions: list[MemoryRecord]


class HitView(BaseModel):
    """One search hit: the record, how similar it is to the query, how likely it answers it,
    each leg's rank (1 = best)."""

    record: MemoryRecord
    score: float | None = Field(
        ge=0.0,
        le=1.0,
        description=(
            "Cosine similarity of the query to the record's text, 0 (unrelated) to 1 (the "
            "same meaning); what min_score compares with; null when it could not be computed "
            "(a degraded search)."
        ),
    )
    relevance: float | None = Field(
        ge=0.0,
        le=1.0,
        description=(
            "How likely the hit answers the query, 0-1, calibrated on labelled queries: of "
            "hits given about 0.7, about seven in ten answered (docs/retrieval.md); null in a "
            "degraded search."
        ),
    )
    ranks: dict[str, int]


def hit_view(hit: SearchHit) -> dict[str, Any]:
    """One search hit: the record, its similarity to the query as ``score``, its relevance,
    each leg's rank."""
    return {
        "record": record_view(hit.record),
        "score": None if hit.similarity is None else round(hit.similarity, 4),
        "relevance": None if hit.relevance is None else round(hit.relevance, 4),
        "ranks": dict(hit.ranks),
    }


class SearchView(BaseModel):
    """Hits best first; ``degraded`` when the query could not be embedded."""

    hits: list[HitView]
    degraded: bool
    legs: dict[str, int]


def search_view(result: SearchResult) -> dict[str, Any]:
    """A search result: hits best first, and whether the vector leg was missing."""
    return {
        "hits": [hit_view(hit) for hit in result.hits],
        "degraded": result.degraded,
        "legs": dict(result.legs),
    }


class FeedbackView(BaseModel):
    """A stored rating. Its row id is not shown: a global sequence would count the ratings of
    every agent, those of records the caller may not read included."""

    record_id: UUID
    version_id: UUID
    useful: bool
    signal: str
    created_at: datetime
    replayed: bool = Field(
        default=False,
        description="The request's key had stored this rating already; nothing was stored now.",
    )


def feedback_view(receipt: FeedbackReceipt) -> dict[str, Any]:
    """A stored usefulness rating."""
    return {
        "record_id": str(receipt.record_id),
        "version_id": str(receipt.version_id),
        "useful": receipt.useful,
        "signal": receipt.signal,
        "created_at": receipt.created_at.isoformat(),
        "replayed": receipt.replayed,
    }
