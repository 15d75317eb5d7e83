"""Contact details written to get past a platform's filter (marketplace, dating and game
chats): digits spaced out or split by emoji, letters standing for digits, words and digits
mixed, e-mail addresses spelled a character at a time.

- :func:`mixed_runs` finds a run of digits, English number words and look-alike letters
  ("O" and "o" for 0, "l" and "I" for 1, "S" for 5, inside a piece that has a digit, or alone
  between digits), whatever separates them (spaces, dots, dashes, slashes, commas, emoji and
  other symbols), and gives the scan its digits, as a spoken run's
  (:func:`~engram.memory.gate.pii.spoken.spoken_runs_other`): the words before the run decide
  what the digits are (a phone after "call me", a card after "card").
- :func:`spelled_emails` finds an address written with spaces between its characters
  ("k a y l a h . m o s s 8 @ y a h o o . c o m", "a.n.g.e.l.i.c.a @ yahoo . com"): the
  characters around an ``@`` joined, when what they make is an address.

Keycap emoji (``7️⃣``) are read as their digits before this (the scan drops the keycap).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

from engram.memory.gate.pii.contact import is_address
from engram.memory.gate.pii.disguised import NUMBER_WORDS
from engram.memory.gate.pii.findings import PiiKind, Span

#: Fewest digits a run must hold, and most tokens read in one run.
MIN_DIGITS = 7
MAX_TOKENS = 40
_LOOK_ALIKE = str.maketrans({"O": "0", "o": "0", "l": "1", "I": "1", "S": "5"})
# A piece: a word, a run of digits with look-alike letters among them, or anything else
# that is not a space (a separator: a dot, a dash, an emoji).
_TOKEN = re.compile(r"[A-Za-z]+|[0-9OolIS]*\d[0-9OolIS]*|\S")
_SEPARATORS = frozenset(".-/,|·•~_+()")
# What separates the groups of a number written plainly: no sign of a disguise on its own.
_PLAIN_SEPARATORS = frozenset(".-/,+()")
# At most 64 pieces a side (an address's part is at most 64 characters): a long run of words
# before an "@" that ends otherwise costs each start a bounded look, not the whole run. A look
# starts only where a piece does: started inside one, each of its characters would walk the
# same 64 pieces again (64-character words before an '@': seconds for the largest record).
_SPELLED = re.compile(
    r"(?<![\w.+\-])(?:[\w.+\-]{1,64}[ \t]{1,2}){2,64}@(?:[ \t]{1,2}[\w.\-]{1,64}){2,64}"
    r"|(?<![\w.+\-])[\w.+\-]{1,64}[ \t]{1,2}@[ \t]{1,2}[\w.\-]{1,64}"
)


def _separator(piece: str) -> bool:
    if len(piece) != 1:
        return False
    if piece in _SEPARATORS:
        return True
    return unicodedata.category(piece) in {"So", "Sk", "Sm", "Pd"}  # emoji, symbols, dashes


def _value(piece: str) -> str | None:
    """The digits a piece stands for, None if it is no part of a number."""
    if piece.lower() in NUMBER_WORDS:
        return str(NUMBER_WORDS[piece.lower()])
    if any(c.isdigit() for c in piece):
        return piece.translate(_LOOK_ALIKE)
    if piece in {"O", "l", "I"}:
        return piece.translate(_LOOK_ALIKE)
    return None


def mixed_runs(text: str) -> Iterator[tuple[int, int, str]]:
    """Each run mixing digits with words, look-alike letters or symbols between them, of at
    least ``MIN_DIGITS`` digits: its span and its digits (a space where a comma was)."""
    start = end = -1
    digits: list[str] = []
    mixed = False
    count = singles = 0
    between = False  # a disguising separator since the last digits: counts if digits follow
    for m in _TOKEN.finditer(text):
        piece = m.group(0)
        value = _value(piece)
        if value is not None and count < MAX_TOKENS:
            if start < 0:
                start, digits, mixed, count, singles = m.start(), [], False, 0, 0
            # disguised: a word or a look-alike letter for digits, or digits one by one
            mixed = mixed or between or not piece.isdigit()
            between = False
            singles += len(piece) == 1 and piece.isdigit()
            digits.append(value)
            end, count = m.end(), count + 1
            continue
        if start >= 0 and _separator(piece) and count < MAX_TOKENS:
            between = between or piece not in _PLAIN_SEPARATORS  # an emoji, a bar, a bullet
            digits.append(" " if piece == "," else "")
            continue
        yield from _finished(start, end, digits, mixed or singles >= 4)
        start, between = -1, False
    yield from _finished(start, end, digits, mixed or singles >= 4)


def _finished(
    start: int, end: int, parts: list[str], mixed: bool
) -> Iterator[tuple[int, int, str]]:
    """A run worth reading: disguised (not digits written plainly, which the scan reads
    already) and holding enough digits."""
    if start < 0 or not mixed:
        return
    digits = re.sub(r" +", " ", "".join(parts)).strip()
    if sum(c.isdigit() for c in digits) >= MIN_DIGITS:
        yield start, end, digits


def spelled_emails(text: str) -> Iterator[Span]:
    """Addresses written a character (or a few) at a time around an ``@``."""
    if "@" not in text:
        return
    for m in _SPELLED.finditer(text):
        joined = re.sub(r"[ \t]+", "", m.group(0))
        if is_address(joined) and " " in m.group(0):
            yield PiiKind.EMAIL, m.start(), m.end()
