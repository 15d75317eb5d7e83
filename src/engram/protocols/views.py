"""JSON shapes shared by the HTTP API, the MCP server and the CLI.

Every adapter renders records, Gate results and search hits the same way, so a client can
move between transports without relearning the payloads.
"""

from __future__ import annotations

from typing import Any

from engram.memory.gate.requests import GateResult, result_json
from engram.memory.types import MemoryRecord
from engram.retrieval.search import FeedbackReceipt, SearchHit, SearchResult


def record_view(record: MemoryRecord) -> dict[str, Any]:
    """A record version as clients see it (JSON-ready; no embedding)."""
    return record.model_dump(mode="json", exclude={"expected_version"})


def result_view(result: GateResult) -> dict[str, Any]:
    """A Gate decision: its summary, the checks that failed and the record as written."""
    body = result_json(result)
    body["failed_checks"] = [check.to_json() for check in result.failed_checks]
    body["record"] = None if result.modified_record is None else record_view(result.modified_record)
    return body


def hit_view(hit: SearchHit) -> dict[str, Any]:
    """One search hit: the record, its fused score and each leg's rank."""
    return {"record": record_view(hit.record), "score": hit.score, "ranks": dict(hit.ranks)}


def search_view(result: SearchResult) -> dict[str, Any]:
    """A search result: hits best first, and whether the vector leg was missing."""
    return {
        "hits": [hit_view(hit) for hit in result.hits],
        "degraded": result.degraded,
        "legs": dict(result.legs),
    }


def feedback_view(receipt: FeedbackReceipt) -> dict[str, Any]:
    """A stored usefulness rating."""
    return {
        "id": receipt.id,
        "record_id": str(receipt.record_id),
        "version_id": str(receipt.version_id),
        "useful": receipt.useful,
        "signal": receipt.signal,
        "created_at": receipt.created_at.isoformat(),
    }
