"""Fakes of the sources the runtime gauges read: a pool, a circuit breaker, an embedding queue."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from engram.infra.db import PoolUsage


@dataclass
class FakePool:
    """A pool whose usage the test sets."""

    usage: PoolUsage = field(
        default_factory=lambda: PoolUsage(size=2, idle=2, max_size=10, waiting=0, wait_seconds=0)
    )

    def pool_usage(self) -> PoolUsage:
        return self.usage


@dataclass
class FakeBreaker:
    """A breaker whose state the test sets."""

    name: str = "postgres"
    state: str = "closed"


@dataclass
class FakeQueue:
    """An embedding queue whose depth the test sets; it hands out batches on demand."""

    queue_depth: int = 0
    listeners: list[Callable[[int], None]] = field(default_factory=list)

    def on_batch(self, listener: Callable[[int], None]) -> None:
        self.listeners.append(listener)

    def send(self, size: int) -> None:
        for listener in self.listeners:
            listener(size)
