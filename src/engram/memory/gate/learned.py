"""The learned advisor in the Gate, and the shadow mode that proves it first (ADR-020).

:class:`RLAdvisor` asks the heuristic first (conflicts, routing, confidence and importance
stay the heuristic's) and lets the trained :class:`~engram.memory.rl.policy.AdvisorPolicy`
choose between ADD, NOOP and UPDATE (merge into the nearest record) where a choice is safe:
an exact duplicate is always a NOOP, a NOOP needs a nearest record in the same scope, close
enough and not found incompatible, and an UPDATE a stated change of the caller's own nearest
record (:func:`~engram.memory.rl.policy.allowed_actions`,
:func:`~engram.memory.gate.access.merge_denial`, recorded by the heuristic as
``merge_allowed``). Anything else (an UPDATE request, an
internal write, no model, any error) is the heuristic's decision, marked as a fallback and
counted.
:meth:`RLAdvisor.train` fits a new policy by GRPO (:mod:`engram.memory.rl.grpo`).

:class:`ShadowAdvisor` runs a candidate beside the active advisor and records the candidate's
advice in the audit row without acting on it; :mod:`engram.memory.gate.managed` builds both
from the model rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import structlog

from engram.memory.gate.advisor import (
    AdvisorAction,
    AdvisorContext,
    AdvisorDecision,
    GateAdvisor,
    HeuristicAdvisor,
)
from engram.memory.rl.grpo import GRPOConfig, TrainResult
from engram.memory.rl.policy import ACTIONS, AdvisorPolicy, allowed_actions
from engram.memory.rl.reward import TrainingExample
from engram.memory.rl.training import train_policy
from engram.memory.types import GateAction, GateDecisionType, MemoryRecord

log = structlog.get_logger("engram.memory.gate.advisor")


class RLAdvisor:
    """The trained policy's choice between ADD, NOOP and UPDATE, the heuristic's for all
    else."""

    def __init__(
        self,
        fallback: HeuristicAdvisor,
        policy: AdvisorPolicy | None = None,
        *,
        on_fallback: Callable[[str], None] | None = None,
    ) -> None:
        self._fallback = fallback
        self._policy = policy
        self._on_fallback = on_fallback or (lambda _reason: None)

    @property
    def version(self) -> str:
        return "rl@0" if self._policy is None else self._policy.version

    @property
    def policy(self) -> AdvisorPolicy | None:
        return self._policy

    async def train(
        self,
        batch: Sequence[TrainingExample],
        *,
        version: str,
        config: GRPOConfig | None = None,
    ) -> TrainResult:
        """A new policy fitted by GRPO to ``batch`` (off the event loop); this advisor keeps
        its own until the result is promoted (a new advisor is built with it)."""
        return await asyncio.to_thread(train_policy, batch, version=version, config=config)

    async def advise(self, record: MemoryRecord, context: AdvisorContext) -> AdvisorDecision:
        return self.decide_from(record, context, await self._fallback.advise(record, context))

    def decide_from(
        self, record: MemoryRecord, context: AdvisorContext, decision: AdvisorDecision
    ) -> AdvisorDecision:
        """The policy's decision given the heuristic's (``decision``, with the state it
        recorded): a shadow scores the active advisor's decision without judging again."""
        if (
            context.action is not GateAction.CREATE
            or context.decision_type is not GateDecisionType.EXTERNAL
        ):
            return replace(decision, source=f"{self.version}({decision.source})")
        fallback = replace(decision, source=f"{self.version}(fallback:{decision.source})")
        if self._policy is None:
            self._on_fallback("no_model")
            return fallback
        try:
            return self._choose(self._policy, record, context, decision)
        except Exception as exc:  # noqa: BLE001 - any policy error falls back, counted
            self._on_fallback("error")
            log.warning("advisor.policy_failed", error=type(exc).__name__, model=self.version)
            return fallback

    def _choose(
        self,
        policy: AdvisorPolicy,
        record: MemoryRecord,
        context: AdvisorContext,
        decision: AdvisorDecision,
    ) -> AdvisorDecision:
        if decision.features is None:
            raise LookupError("the heuristic recorded no features")
        state = np.asarray([decision.features], dtype=np.float64)
        others = [n for n in context.neighbours if n.record.record_id != record.record_id]
        nearest = max(others, key=lambda n: n.similarity, default=None)
        mask = allowed_actions(decision.features, merge_allowed=decision.merge_allowed)
        p = policy.probabilities(state, np.asarray([mask]))[0]
        if not np.isfinite(p).all():
            raise ArithmeticError("policy probabilities are not finite")
        action = AdvisorAction(ACTIONS[int(np.argmax(p))])
        source = self.version
        share = f"p={float(p.max()):.3f}"
        if action is decision.action:
            return replace(decision, source=source, rationale=f"{decision.rationale}; {share}")
        if nearest is None:  # pragma: no cover - the mask allows only ADD without one
            raise LookupError("the policy chose a neighbour's action with no neighbour")
        if action in (AdvisorAction.UPDATE, AdvisorAction.NOOP):
            target = nearest.record.record_id
            what = (
                "merges it into the nearest record as its next version"
                if action is AdvisorAction.UPDATE
                else "reinforces the nearest record"
            )
            return replace(
                decision,
                action=action,
                rationale=f"the policy {what} (similarity {nearest.similarity:.3f}, {share})",
                source=source,
                target_record_id=target,
                update_candidate_of=None,
                conflicts=tuple(c for c in decision.conflicts if c.existing_record_id != target),
            )
        return replace(
            decision,
            action=AdvisorAction.ADD,
            rationale=f"the policy keeps it as a new record ({share}); heuristic: "
            f"{decision.rationale}",
            source=source,
            target_record_id=None,
            update_candidate_of=nearest.record.record_id,
        )


class ShadowAdvisor:
    """The active advisor decides; a candidate's advice on the same write is only recorded.

    A candidate's error never touches the write: it is counted and recorded as such."""

    def __init__(
        self,
        active: GateAdvisor,
        candidate: GateAdvisor,
        *,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self._active = active
        self._candidate = candidate
        self._on_error = on_error or (lambda _reason: None)

    @property
    def version(self) -> str:
        return self._active.version

    @property
    def active(self) -> GateAdvisor:
        return self._active

    async def advise(self, record: MemoryRecord, context: AdvisorContext) -> AdvisorDecision:
        decision = await self._active.advise(record, context)
        shadow: dict[str, Any]
        try:
            candidate = self._candidate
            if isinstance(candidate, RLAdvisor) and decision.features is not None:
                advice = candidate.decide_from(record, context, decision)
            else:
                advice = await candidate.advise(record, context)
            shadow = {
                "source": advice.source,
                "action": advice.action.value,
                "target_record_id": None
                if advice.target_record_id is None
                else str(advice.target_record_id),
                "importance": round(advice.importance, 6),
            }
        except Exception as exc:  # noqa: BLE001 - the candidate never decides
            self._on_error("error")
            shadow = {"source": self._candidate.version, "error": type(exc).__name__}
        return replace(decision, shadow=shadow)
