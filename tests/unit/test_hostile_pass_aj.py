"""Hostile pass AJ: instructions behind speaker labels in markup (``tests/data/instructions``).

The set is split in two halves: the rule was written against ``dev.jsonl`` only; the
``test.jsonl`` figures were read once, after.
"""

from __future__ import annotations

import json
from pathlib import Path

from engram.memory.schemas import looks_imperative, looks_like_injection

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
