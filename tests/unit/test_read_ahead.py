"""A proposal's text read ahead (engram.memory.conflict.reading): the judgement is unchanged."""

from __future__ import annotations

import functools

import pytest

from engram.memory.conflict import cues, features, lexicon, quantities, restatement, sentences
from engram.memory.conflict.detection import ConflictDetector
from engram.memory.conflict.memo import PerText
from engram.memory.conflict.reading import read_ahead
from engram.memory.gate import librarian
from engram.memory.rl import features as rl_features
from engram.memory.types import MemoryRecord, MemoryType

PAIRS = [
    ("The billing API runs on port 8080.", "The billing API now runs on port 9090."),
    ("Dana owns the ledger service.", "Dana no longer owns the ledger service. Priya does."),
    ("Backups run nightly at 02:00 UTC.", "Backups run nightly at 02:00 UTC, except on Sundays."),
    (
        "The search cluster has 3 nodes in eu-west-1.",
        "The search cluster has 5 nodes in us-east-1.",
    ),
]


def _clear() -> None:
    """Empty every per-text and per-pair cache the judgement reads."""
    for module in (cues, features, lexicon, quantities, restatement, sentences, rl_features):
        for value in vars(module).values():
            if isinstance(value, functools._lru_cache_wrapper | PerText):
                value.cache_clear()


def _belief(text: str) -> MemoryRecord:
    return MemoryRecord.draft(MemoryType.BELIEF, text, source_agent="a")


async def test_reading_ahead_changes_no_judgement() -> None:
    """Conflicts, relations and the advisor's marks are the same with the new text read
    first as without: the read-ahead only fills caches the judgement reads."""
    judged = []
    for old_text, new_text in PAIRS:
        found = []
        for ahead in (False, True):
            _clear()
            old, new = _belief(old_text), _belief(new_text)
            if ahead:
                read_ahead(new.content)
            detector = ConflictDetector()
            conflicts = await detector.detect(new, [old], similarities={old.id: 0.9})
            found.append(
                (
                    [(c.classification, c.reason) for c in conflicts],
                    detector.relation(old, new, 0.9),
                    rl_features.marked(new.content),
                )
            )
        assert found[0] == found[1], (old_text, new_text)
        judged.append(found[0])
    assert any(conflicts for conflicts, _, _ in judged)  # the pairs are judged, not skipped


def test_the_gate_reads_ahead_only_short_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A text longer than READ_AHEAD_CHARS is left to the judgement, which may not need it."""
    read: list[str] = []
    monkeypatch.setattr(librarian, "read_ahead", read.append)
    short, long = "a" * librarian.READ_AHEAD_CHARS, "a" * (librarian.READ_AHEAD_CHARS + 1)
    librarian._read_ahead(short)
    librarian._read_ahead(long)
    assert read == [short]
