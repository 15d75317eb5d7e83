"""Hostile pass P: the newest code (a caller's numbering of versions, the PII screen's newest
readings) under hostile input, races and real faults.

Every test here failed on the code it was written against; what held is in
``test_hostile_pass_p_held.py``. Real embedded PostgreSQL, the real embedding model, no
mocks."""

from __future__ import annotations

import json
import time

from engram.memory.gate.pii import scan
from engram.memory.schemas import MAX_CONTENT_CHARS, MAX_METADATA_BYTES


def _filled(piece: str, size: int) -> str:
    return (piece * (size // len(piece) + 1))[:size]


def _largest(piece: str) -> str:
    """The screened text of the largest record an adapter accepts, made of ``piece``: the
    content at its limit and a metadata value filling the metadata's (as ``screened_text``
    joins them)."""
    content = _filled(piece, MAX_CONTENT_CHARS)
    metadata = json.dumps({"n": _filled(piece, MAX_METADATA_BYTES - 16)}, ensure_ascii=False)
    return f"{content}\n{metadata}\n\ndefault"


def _screen_seconds(text: str) -> float:
    started = time.perf_counter()
    scan(text)
    return time.perf_counter() - started


def test_words_of_64_characters_before_an_at_sign_cost_the_screen_no_more_than_prose() -> None:
    """Medium. The spelled-address reading (``evasion._SPELLED``) tried a match at every
    character: started inside a 63-character word, each start walked the same 64 words before
    failing, so the largest record an adapter accepts, filled with such words and one '@',
    held the Gate (on the event loop) about two seconds against some 0.05 s for prose of the
    same size. A look now starts only where a piece starts."""
    prose = _screen_seconds(
        _largest("The committee reviews the budget before the quarter closes in March. ")
    )
    for piece in ("a" * 63 + " ", "b" * 32 + " "):
        text = _largest(piece).replace("\n", " @ ", 1)
        seconds = min(_screen_seconds(text) for _ in range(2))
        assert seconds < max(0.5, 5 * prose), (len(piece), seconds, prose)
