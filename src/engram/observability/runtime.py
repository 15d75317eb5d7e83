"""Gauges read from the running infrastructure on each scrape: the connection pool, the circuit
breakers and the embedding queue.

The sources are Protocols, so infrastructure never imports this layer: the composition root
hands the concrete objects to :meth:`RuntimeGauges.watch`. Until then the pool and queue
series are exported at zero (breakers appear once they are named).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from engram.infra.db import PoolUsage

#: ``engram_db_pool_connections`` by ``state``.
POOL_STATES = ("in_use", "idle")
#: The value of ``engram_circuit_breaker_state`` for each state a breaker reports.
BREAKER_STATES = {"closed": 0.0, "half_open": 1.0, "open": 2.0}

_IDLE_POOL = PoolUsage(size=0, idle=0, max_size=0, waiting=0, wait_seconds=0.0)


class PoolSource(Protocol):
    """A connection pool that can say how it is used."""

    def pool_usage(self) -> PoolUsage:
        """A snapshot of the pool now."""
        ...


class BreakerSource(Protocol):
    """A circuit breaker: the dependency it guards and its state."""

    @property
    def name(self) -> str: ...

    @property
    def state(self) -> str:
        """``closed``, ``half_open`` or ``open``."""
        ...


class QueueSource(Protocol):
    """A queue of texts waiting to be embedded, sent to the model in batches."""

    @property
    def queue_depth(self) -> int:
        """Texts waiting for a batch now."""
        ...

    def on_batch(self, listener: Callable[[int], None]) -> None:
        """Call ``listener`` with the size of each batch as it is sent."""
        ...


class RuntimeGauges:
    """A collector (``registry.register``) of the watched sources' state at scrape time."""

    def __init__(self) -> None:
        self._pool: PoolSource | None = None
        self._breakers: tuple[BreakerSource, ...] = ()
        self._queue: QueueSource | None = None

    def watch(
        self, *, pool: PoolSource, breakers: Sequence[BreakerSource], queue: QueueSource
    ) -> None:
        """Read these sources from now on (a kernel's; a second call replaces them)."""
        self._pool, self._breakers, self._queue = pool, tuple(breakers), queue

    def describe(self) -> Iterator[Metric]:
        """The families, without samples (the registry checks names against other metrics)."""
        return self._families(_IDLE_POOL, (), 0)

    def collect(self) -> Iterator[Metric]:
        """The families with the sources' values now."""
        pool = _IDLE_POOL if self._pool is None else self._pool.pool_usage()
        breakers = [(breaker.name, breaker.state) for breaker in self._breakers]
        depth = 0 if self._queue is None else self._queue.queue_depth
        return self._families(pool, breakers, depth)

    @staticmethod
    def _families(
        pool: PoolUsage, breakers: Sequence[tuple[str, str]], depth: int
    ) -> Iterator[Metric]:
        connections = GaugeMetricFamily(
            "engram_db_pool_connections",
            "Open connections of the database pool, lent out (in_use) or idle.",
            labels=["state"],
        )
        connections.add_metric(["in_use"], pool.in_use)
        connections.add_metric(["idle"], pool.idle)
        yield connections
        yield GaugeMetricFamily(
            "engram_db_pool_max_connections",
            "The most connections the pool may open (ENGRAM_DB_POOL_MAX_SIZE).",
            value=pool.max_size,
        )
        yield GaugeMetricFamily(
            "engram_db_pool_waiting",
            "Callers waiting for a pooled connection now.",
            value=pool.waiting,
        )
        yield CounterMetricFamily(
            "engram_db_pool_wait_seconds",
            "Seconds callers spent waiting for a pooled connection (rate: the average number "
            "waiting).",
            value=pool.wait_seconds,
        )
        state = GaugeMetricFamily(
            "engram_circuit_breaker_state",
            "State of the circuit breaker guarding a dependency: 0 closed, 1 half-open (one "
            "probe admitted), 2 open (calls refused).",
            labels=["dependency"],
        )
        for name, current in breakers:
            # A state this table does not know is read the cautious way: open.
            state.add_metric([name], BREAKER_STATES.get(current, BREAKER_STATES["open"]))
        yield state
        yield GaugeMetricFamily(
            "engram_embedding_queue_depth",
            "Texts waiting for the embedding queue to send them to the model.",
            value=depth,
        )
