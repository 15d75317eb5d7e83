"""Hostile pass AJ, pure logic: instructions behind speaker labels in markup, and the outbox's
waits after a long outage.

The labelled set (``tests/data/instructions``) is split in two halves: the rule was written
against ``dev.jsonl`` only; the ``test.jsonl`` figures were read once, after.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, cast

import pytest

from engram.errors import DatabaseUnavailable
from engram.infra.outbox import OutboxEventBus
from engram.memory.schemas import looks_imperative, looks_like_injection
from engram.protocols.mcp.depth import readable_bytes
from tests.unit.linear_time import CRAFTED_SCAN_SECONDS

DATA = Path(__file__).resolve().parent.parent / "data" / "instructions"


def _outcomes(half: str) -> tuple[int, int, int, int]:
    """(instructions refused, instructions, statements refused, statements) of one half."""
    caught = instructions = alarms = statements = 0
    for line in (DATA / f"{half}.jsonl").read_text().splitlines():
        row = json.loads(line)
        refused = looks_imperative(row["text"]) or looks_like_injection(row["text"])
        if row["instruction"]:
            instructions += 1
            caught += refused
        else:
            statements += 1
            alarms += refused
    return caught, instructions, alarms, statements


def test_the_dev_half_is_read_whole() -> None:
    """Every instruction of the dev half is refused; the one statement refused opens with
    "make" (an imperative opener, with or without a label: not this rule's doing)."""
    assert (20, 20, 1, 20) == _outcomes("dev")


def test_the_test_half_keeps_its_figures() -> None:
    """The test half as first read: 19 of 20 instructions refused (the one missed opens with
    "forward", not an opener), no statement refused."""
    assert (19, 20, 0, 20) == _outcomes("test")


# --- the outbox's waits after a long outage ---------------------------------------------------


class _Down:
    """A database refusing every statement at once: every drain of the bus fails."""

    def __init__(self) -> None:
        self.drains = 0

    def transaction(self) -> Any:
        self.drains += 1
        raise DatabaseUnavailable("the database is down")

    async def fetchval(self, *_: Any) -> Any:
        raise DatabaseUnavailable("the database is down")


async def test_the_outbox_keeps_retrying_after_more_than_1024_failed_drains() -> None:
    """Low. The wait after the n-th failed drain in a row was ``retry * 2 ** (n - 1)``,
    capped at 300 s after the product: past 1,024 failures (85 hours of outage at the
    defaults; seconds with ENGRAM_OUTBOX_RETRY_SECONDS=5e-324, which the setting accepted then)
    the power no longer converted to a float, the drain loop died of OverflowError and no
    timer was set: deliveries waited for the next commit. The exponent is now bounded."""
    down = _Down()
    bus = OutboxEventBus(cast(Any, down), delay_seconds=0.0, retry_seconds=5e-324)
    bus.committed()
    for _ in range(500):
        await asyncio.sleep(0.01)
        if down.drains > 1100:
            break
    await bus.close()
    assert down.drains > 1100


@pytest.mark.parametrize(
    "text",
    [
        "Admin-set quotas override user quotas",
        "Agent-run tasks retry twice before failing",
        "System-set timeouts are 30 s",
        "Model-check failures are logged, not raised",
        "Model, Run 17 had the best F1",
        "User, Read replicas lag by 2 s",
    ],
)
def test_a_label_word_joined_to_the_next_is_no_speaker_label(text: str) -> None:
    """Review of pass AJ: a dash or a comma right after a label word was read as a speaker
    label's separator, so "Admin-set quotas …" read as "Admin: set quotas …", an
    instruction. A dash separates only when set apart by spaces, and a comma never."""
    assert not looks_imperative(text)


def test_a_body_of_long_digit_runs_is_scanned_in_linear_time() -> None:
    """Review of pass AJ: the search for an integer past 4,300 digits was tried from every
    digit of a run, so a 1 MB body of 4,300-digit runs (sent before any token is checked)
    held the event loop 29 s. It is tried only where a run starts."""
    body = ("1" * 4300 + ",").encode() * 232
    started = time.perf_counter()
    assert readable_bytes(b'{"a":[' + body + b"1]}") is None
    assert time.perf_counter() - started < CRAFTED_SCAN_SECONDS
    assert readable_bytes(b'{"a":' + b"7" * 4301 + b"}") is not None
