"""A text read ahead of its comparisons (ADR-016, amended 2026-11-28).

The conflict judgement parses each text on its own before it compares two: its sentences and,
for the text and each sentence, its tokens, subject and verb, amounts, names, tense and marks.
Those readings are cached per text, since a store's records come back as neighbours write after
write; a proposal's own text is new, so without this its first comparison would parse it. The
Gate calls :func:`read_ahead` while its neighbour query runs in the database: the same cached
functions, on the same texts, so nothing the judgement decides can differ; only when the
parsing happens does.
"""

from __future__ import annotations

from engram.memory.conflict.features import read_side
from engram.memory.conflict.quantities import readings
from engram.memory.conflict.restatement import marks
from engram.memory.conflict.sentences import MAX_CLAIMS, statements


def read_ahead(text: str) -> None:
    """Fill the per-text caches the judgement of ``text`` against any neighbour reads."""
    for claim in dict.fromkeys((text, *statements(text)[:MAX_CLAIMS])):
        read_side(claim)
        readings(claim)
        marks(claim)


__all__ = ["read_ahead"]
