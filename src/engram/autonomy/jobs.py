"""Self-healing jobs. Each repair is a write, so each passes the Gate as ``self_healing``."""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from engram.infra.db import DatabaseAdapter
from engram.memory import store
from engram.memory.gate.librarian import LibrarianGate
from engram.memory.gate.requests import GateRequest, WriteOutcome
from engram.memory.types import CallerIdentity, GateAction, GateDecisionType

log = structlog.get_logger("engram.autonomy.jobs")

SELF_HEALING = CallerIdentity.system("self-healing")


@dataclass(frozen=True, slots=True)
class ReembedReport:
    """What one re-embedding pass did."""

    candidates: int
    repaired: int
    still_degraded: int


async def reembed_missing(
    gate: LibrarianGate, db: DatabaseAdapter, *, batch: int = 100
) -> ReembedReport:
    """Embed active records that were stored in degraded mode (without an embedding).

    Each record is re-proposed unchanged as a self-healing UPDATE of its current version; the
    Gate re-screens it, finds the content unchanged (a NOOP) and fills in the embedding.
    """
    heads = await store.unembedded_heads(db, limit=batch)
    repaired = degraded = 0
    for head in heads:
        result = await gate.evaluate(
            GateRequest(
                GateAction.UPDATE,
                head,
                SELF_HEALING,
                GateDecisionType.SELF_HEALING,
                expected_version=head.version,
            )
        )
        if result.outcome is WriteOutcome.REINFORCED and not result.degraded:
            repaired += 1
        else:
            degraded += 1
    report = ReembedReport(len(heads), repaired, degraded)
    log.info("self_healing.reembed", candidates=report.candidates, repaired=repaired)
    return report
