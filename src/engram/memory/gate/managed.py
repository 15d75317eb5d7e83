"""The Gate's advisor as configured, following the trained models' rows (ADR-020).

:func:`configured_advisor` returns the heuristic, or a :class:`ManagedAdvisor` when a trained
model may advise (``ENGRAM_ADVISOR=rl``) or shadow (``ENGRAM_ADVISOR_SHADOW``). The managed
advisor looks at ``engram.advisor_models`` every ``ENGRAM_ADVISOR_RELOAD_SECONDS`` in the
background of a decision (the decision never waits for it), so a promotion or rollback reaches
every kernel without a restart.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from engram.config import EngramSettings
from engram.memory.gate.advisor import (
    AdvisorContext,
    AdvisorDecision,
    GateAdvisor,
    HeuristicAdvisor,
)
from engram.memory.gate.learned import RLAdvisor, ShadowAdvisor
from engram.memory.rl.models import ModelRow, ModelStore
from engram.memory.rl.policy import AdvisorPolicy
from engram.memory.types import MemoryRecord
from engram.observability.metrics import EngramMetrics

log = structlog.get_logger("engram.memory.gate.advisor")


def configured_advisor(
    settings: EngramSettings,
    heuristic: HeuristicAdvisor,
    models: ModelStore,
    metrics: EngramMetrics,
) -> GateAdvisor:
    """Layer 2 as configured: the heuristic, or the model rows' advisor."""
    if settings.advisor == "heuristic" and not settings.advisor_shadow:
        return heuristic
    return ManagedAdvisor(
        heuristic,
        models,
        mode=settings.advisor,
        shadow=settings.advisor_shadow,
        reload_seconds=settings.advisor_reload_seconds,
        metrics=metrics,
    )


class ManagedAdvisor:
    """In ``rl`` mode the active model advises (none, or one that cannot be loaded: the
    heuristic, marked fallback and counted); with shadow on, the newest candidate runs beside
    the active advisor (none loadable: no shadow)."""

    def __init__(
        self,
        heuristic: HeuristicAdvisor,
        models: ModelStore,
        *,
        mode: str,
        shadow: bool,
        reload_seconds: float,
        metrics: EngramMetrics | None = None,
    ) -> None:
        self._heuristic = heuristic
        self._models = models
        self._mode = mode
        self._shadow = shadow
        self._reload_seconds = reload_seconds
        self._metrics = metrics or EngramMetrics()
        self._advisor: GateAdvisor = self._build(None, None)
        self._loaded: tuple[str | None, str | None] = (None, None)
        self._next_look = 0.0
        self._looking: asyncio.Task[None] | None = None

    @property
    def version(self) -> str:
        return self._advisor.version

    @property
    def loaded(self) -> tuple[str | None, str | None]:
        """Digests of the active and shadow rows last seen (whether or not they loaded)."""
        return self._loaded

    def _fallback(self, reason: str) -> None:
        self._metrics.advisor_fallbacks.labels(reason=reason).inc()

    def _shadow_error(self, reason: str) -> None:
        self._metrics.advisor_shadow_errors.labels(reason=reason).inc()

    def _build(self, active: AdvisorPolicy | None, candidate: AdvisorPolicy | None) -> GateAdvisor:
        main: GateAdvisor = self._heuristic
        if self._mode == "rl":
            main = RLAdvisor(self._heuristic, active, on_fallback=self._fallback)
        if self._shadow and candidate is not None:
            shadow = RLAdvisor(self._heuristic, candidate, on_fallback=self._shadow_error)
            return ShadowAdvisor(main, shadow, on_error=self._shadow_error)
        return main

    def _load(self, row: ModelRow | None, role: str) -> AdvisorPolicy | None:
        if row is None:
            return None
        try:
            return row.load()
        except Exception as exc:  # noqa: BLE001 - a bad row must not take the advisor down
            self._fallback("model_not_loadable")
            log.warning("advisor.model_not_loadable", role=role, model=row.version,
                        error=type(exc).__name__)  # fmt: skip
            return None

    async def refresh(self) -> None:
        """Load the active model and the newest candidate now, if their rows changed."""
        self._next_look = time.monotonic() + self._reload_seconds
        active_row = await self._models.active() if self._mode == "rl" else None
        candidate_row = await self._models.newest_candidate() if self._shadow else None
        seen = (
            None if active_row is None else active_row.digest,
            None if candidate_row is None else candidate_row.digest,
        )
        if seen == self._loaded:
            return
        self._advisor = self._build(
            self._load(active_row, "active"), self._load(candidate_row, "shadow")
        )
        self._loaded = seen
        log.info(
            "advisor.models_loaded",
            active=None if active_row is None else active_row.version,
            shadow=None if candidate_row is None else candidate_row.version,
        )

    async def look(self) -> None:
        """:meth:`refresh`, never raising: the advisor in place goes on advising."""
        try:
            await self.refresh()
        except Exception as exc:  # noqa: BLE001 - logged; the next look tries again
            log.warning("advisor.refresh_failed", error=type(exc).__name__)

    async def advise(self, record: MemoryRecord, context: AdvisorContext) -> AdvisorDecision:
        if time.monotonic() >= self._next_look and (self._looking is None or self._looking.done()):
            self._next_look = time.monotonic() + self._reload_seconds
            self._looking = asyncio.create_task(self.look())
        return await self._advisor.advise(record, context)

    async def close(self) -> None:
        """Wait for a look in progress (the kernel closes the pool after this)."""
        if self._looking is not None:
            await asyncio.gather(self._looking, return_exceptions=True)
