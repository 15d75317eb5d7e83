"""A simulated agent living a seeded life against a real kernel (ADR-020).

:func:`live` plays a :class:`~engram.protocols.simulator.world.World` through the kernel the
way an agent would: each write is a CREATE through ``gate.evaluate`` (an outside write, as
the in-process adapter makes it), each question a top-5 search, and every hit is rated: useful
when it states the current answer, not useful when it states a value the world has moved on
from, unrated otherwise (an agent reads what it gets back); when the agent's ratings budget
is spent, the life waits as the refusal says. Each life has a namespace of its own, so lives
on one database never see each other.

The report is what the advisor is judged on: **usefulness** (share of questions whose
current answer is in the top 5), **store size** (active records at the end), **duplicates
admitted** (restatements and near duplicates stored as new records) and **facts lost** (facts
whose current value no active record states at the end: dropped by a NOOP, or retired by a
wrong replacement). Two finer figures sit beside usefulness: **answered first** (the
first hit states the current answer) and **stale shown** (a top-5 hit states a value the
world has moved on from while no hit states the current one before it), the ranking an agent
actually reads.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from engram.errors import RateLimited
from engram.kernel import Kernel
from engram.memory.gate.access import caller_for_tier
from engram.memory.gate.requests import GateRequest
from engram.memory.types import (
    CallerIdentity,
    GateAction,
    GateDecision,
    GateDecisionType,
    MemoryRecord,
    TrustLevel,
)
from engram.protocols.simulator.world import Question, World, Write

#: Results an agent reads per question.
TOP = 5
_ACTIVE = """
SELECT content FROM engram.memories
WHERE namespace = $1 AND superseded_by IS NULL AND status = 'active'
"""


def simulated_agent(name: str = "sim-agent") -> CallerIdentity:
    """A standard agent without a write limit (the limit is not what a life measures)."""
    return replace(caller_for_tier(name, TrustLevel.STANDARD), writes_per_minute=1_000_000)


@dataclass
class LifeReport:
    """What one life left behind, under one advisor."""

    seed: int
    split: str
    advisor: str
    namespace: str
    writes: int = 0
    created: int = 0
    reinforced: int = 0
    merged: int = 0
    rejected: int = 0
    questions: int = 0
    answered: int = 0
    answered_first: int = 0
    stale_shown: int = 0
    duplicates_admitted: int = 0
    facts_lost: int = 0
    store_size: int = 0
    seconds: float = 0.0
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def usefulness(self) -> float:
        return self.answered / self.questions if self.questions else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "split": self.split,
            "advisor": self.advisor,
            "writes": self.writes,
            "created": self.created,
            "reinforced": self.reinforced,
            "merged": self.merged,
            "rejected": self.rejected,
            "questions": self.questions,
            "usefulness": round(self.usefulness, 4),
            "answered_first": self.answered_first,
            "stale_shown": self.stale_shown,
            "store_size": self.store_size,
            "duplicates_admitted": self.duplicates_admitted,
            "facts_lost": self.facts_lost,
            "seconds": round(self.seconds, 2),
            "by_kind": self.by_kind,
        }


async def live(
    kernel: Kernel,
    world: World,
    *,
    agent: CallerIdentity | None = None,
    namespace: str | None = None,
) -> LifeReport:
    """Play ``world`` through ``kernel`` under whatever advisor its Gate has now."""
    agent = agent or simulated_agent()
    namespace = namespace or f"sim-{world.split}-{world.seed}-{uuid.uuid4().hex[:8]}"
    report = LifeReport(world.seed, world.split, kernel.gate.advisor.version, namespace)
    started = time.perf_counter()
    current: dict[str, str] = {}
    for step in world.steps:
        if isinstance(step, Write):
            await _write(kernel, agent, namespace, step, report)
            if step.fact_id is not None and step.value is not None:
                current[step.fact_id] = step.value
        else:
            await _ask(kernel, agent, namespace, step, report)
    rows = await kernel.db.fetch(_ACTIVE, namespace)
    contents = [str(r["content"]).lower() for r in rows]
    report.store_size = len(rows)
    report.facts_lost = sum(
        1 for value in current.values() if not any(value.lower() in c for c in contents)
    )
    report.seconds = time.perf_counter() - started
    return report


async def _write(
    kernel: Kernel, agent: CallerIdentity, namespace: str, step: Write, report: LifeReport
) -> None:
    record = MemoryRecord.draft(
        step.memory_type,
        step.content,
        source_agent=agent.agent_id,
        namespace=namespace,
        metadata=dict(step.metadata),
        event_time=step.event_time,
    )
    result = await kernel.gate.evaluate(
        GateRequest(GateAction.CREATE, record, agent, GateDecisionType.EXTERNAL)
    )
    report.writes += 1
    counts = report.by_kind.setdefault(
        step.kind, {"created": 0, "reinforced": 0, "merged": 0, "rejected": 0}
    )
    if result.decision is not GateDecision.APPROVED:
        report.rejected += 1
        counts["rejected"] += 1
        return
    outcome = result.outcome.value
    if outcome == "created":
        report.created += 1
        counts["created"] += 1
        if step.kind in {"restatement", "near_duplicate"}:
            report.duplicates_admitted += 1
    elif outcome == "reinforced":
        report.reinforced += 1
        counts["reinforced"] += 1
    elif outcome == "updated":  # merged into the nearest record (a learned UPDATE)
        report.merged += 1
        counts["merged"] += 1


async def _ask(
    kernel: Kernel, agent: CallerIdentity, namespace: str, step: Question, report: LifeReport
) -> None:
    found = await kernel.retrieval.search(agent, step.query, limit=TOP, namespace=namespace)
    report.questions += 1
    answer = step.answer.lower()
    stale = [s.lower() for s in step.stale]
    answered = stale_first = False
    for rank, hit in enumerate(found.hits):
        text = hit.record.content.lower()
        if answer in text:
            answered = True
            report.answered_first += rank == 0
            await _rate(kernel, agent, hit.record.record_id, useful=True)
        elif any(s in text for s in stale):
            stale_first = stale_first or not answered
            await _rate(kernel, agent, hit.record.record_id, useful=False)
    report.answered += int(answered)
    report.stale_shown += int(stale_first)


async def _rate(
    kernel: Kernel, agent: CallerIdentity, record_id: uuid.UUID, *, useful: bool
) -> None:
    """One rating, waiting as long as the ratings budget says whenever it is spent: a life
    rates every hit it reads (about 150 ratings in a default life of a few seconds), more
    than one agent may give at once, and a rating refused for it is stored by nothing."""
    while True:
        try:
            await kernel.retrieval.feedback(agent, record_id, useful=useful)
        except RateLimited as exc:
            await asyncio.sleep(exc.retry_after_seconds)
        else:
            return
