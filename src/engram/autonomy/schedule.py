"""When a job is due: the due instants of a schedule are fixed points in UTC, the same on
every kernel, so "ran once per due time" has a meaning when several kernels share a database.

A schedule answers two questions about an instant ``now``: the latest due instant at or before
it (the one a scheduler should have run) and the next one after it (for ``engram jobs list``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Schedule(Protocol):
    """The due instants of a job."""

    def latest_due(self, now: datetime) -> datetime:
        """The last due instant at or before ``now``."""
        ...

    def next_due(self, now: datetime) -> datetime:
        """The first due instant after ``now``."""
        ...

    def describe(self) -> str:
        """How an operator would say it (``daily at 03:00 UTC``)."""
        ...


@dataclass(frozen=True, slots=True)
class Every:
    """Due at every multiple of ``interval`` since the Unix epoch (UTC)."""

    interval: timedelta

    def __post_init__(self) -> None:
        if self.interval <= timedelta(0):
            raise ValueError("a schedule's interval must be positive")

    def latest_due(self, now: datetime) -> datetime:
        steps = (now - _EPOCH) // self.interval
        return _EPOCH + steps * self.interval

    def next_due(self, now: datetime) -> datetime:
        return self.latest_due(now) + self.interval

    def describe(self) -> str:
        seconds = self.interval.total_seconds()
        for unit, size in (("h", 3600), ("min", 60)):
            if seconds >= size and seconds % size == 0:
                return f"every {seconds / size:g} {unit}"
        return f"every {seconds:g} s"


@dataclass(frozen=True, slots=True)
class Daily:
    """Due once a day at ``hour:minute`` UTC."""

    hour: int
    minute: int = 0

    def __post_init__(self) -> None:
        if not (0 <= self.hour < 24 and 0 <= self.minute < 60):
            raise ValueError(f"no such time of day: {self.hour:02d}:{self.minute:02d}")

    def latest_due(self, now: datetime) -> datetime:
        today = now.astimezone(UTC).replace(
            hour=self.hour, minute=self.minute, second=0, microsecond=0
        )
        return today if today <= now else today - timedelta(days=1)

    def next_due(self, now: datetime) -> datetime:
        return self.latest_due(now) + timedelta(days=1)

    def describe(self) -> str:
        return f"daily at {self.hour:02d}:{self.minute:02d} UTC"


def backoff(failures: int, *, base: timedelta, ceiling: timedelta) -> timedelta:
    """How long to wait before retrying after ``failures`` consecutive failures (≥ 1):
    ``base``, doubling with each further failure, never more than ``ceiling``."""
    if failures < 1:
        return timedelta(0)
    doublings = 2 ** min(failures - 1, 30)
    if base >= ceiling / doublings:  # a base of a day doubled 30 times is past timedelta.max
        return ceiling
    wait: timedelta = base * doublings
    return wait
